"""The session store: Django's database sessions, read with one plain statement.

Every request loads its session; the ORM's ``Session.objects.get`` cost more to compose than
the database took to answer it (bench/README.md, the annotation load benchmark). Everything
else — saving, expiry, clearing, the cookie — is Django's ``db`` backend unchanged.
"""

from __future__ import annotations

from django.contrib.sessions.backends import db
from django.db import connection
from django.utils import timezone

from core.rows import columns, first


class SessionStore(db.SessionStore):
    def _get_session_from_db(self):
        model = self.model
        session = None
        if self.session_key:  # the base class validated its form (None if malformed)
            session = first(
                model,
                f"SELECT {columns(model, 's')} FROM {model._meta.db_table} s"  # noqa: S608
                " WHERE s.session_key = %s AND s.expire_date > %s",
                [self.session_key, connection.ops.adapt_datetimefield_value(timezone.now())],
            )
        if session is None:
            self._session_key = None
        return session
