"""The two reads every signed-in request makes before any view runs — its session and its
user — as plain statements: with Django's own backends (the ORM's ``get``) a request of the
annotation workspace cost ~1 ms more CPU (about 1,400 Python calls; the annotation load
benchmark, bench/README.md). tests/core/test_sessions.py checks both against Django's.
Only table and column names are formatted into a statement; every value is a parameter.
Both look a row up by its key in a table that annotating does not grow: planned once
(``core.prepared``, ``generic_plan``)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.db import connection
from django.utils import timezone

from core.rows import columns, first


def live_session(session_key: str) -> Session | None:
    """The session with this key, unless it has expired."""
    return first(
        Session,
        f"SELECT {columns(Session, 's')} FROM {Session._meta.db_table} s"  # noqa: S608
        " WHERE s.session_key = %s AND s.expire_date > %s",
        [session_key, connection.ops.adapt_datetimefield_value(timezone.now())],
        generic_plan=True,
    )


def user_by_pk(model: type[User], pk: object) -> User | None:
    """The user with this primary key (already in the key's Python type), or None."""
    return first(
        model,
        f"SELECT {columns(model, 'u')} FROM {model._meta.db_table} u"  # noqa: S608
        f' WHERE u."{model._meta.pk.column}" = %s',
        [pk],
        generic_plan=True,
    )
