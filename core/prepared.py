"""The hot paths' own SQL (``core.rows``, the apps' ``sql.py``), prepared once per PostgreSQL
connection instead of parsed on every request.

Here the statement is prepared in SQL — ``PREPARE name AS …`` sent with its first
``EXECUTE name(…)`` in one round trip — and then run as ``EXECUTE name(…)``, both through
Django's usual client-side binding: the web process's work per statement is what it was and
the round trips are as many, while PostgreSQL parses, analyses and rewrites each statement
once per connection. psycopg's own prepared statements (server-side binding) cost the web
process more than the database saved (commit b857b8e).

Each run is still planned for its own values: the settings set ``plan_cache_mode`` to
``force_custom_plan`` on these connections. With PostgreSQL's default, a generic plan chosen
after a statement's fifth run doubled its CPU per answer under the annotation benchmark's
HTTP load (bench/README.md); planned each time, that load ran at 119–141 answers/s against
109–116 unprepared. The cause: a generic plan is made once, for the table as it is then, and
kept while the table grows — on a new study's assignments, a sequential scan chosen while the
table was nearly empty read 3–12× the buffers of an index scan (pg_stat_statements: the
rater's leases, an item's places, the assignment's update and its foreign-key check).

A statement that reads only tables annotating does not grow (the corpus: a conversation and
its replies; a session, a user, a rater and its study, each by its key) may ask for
PostgreSQL's own choice, ``generic_plan=True``: ``plan_cache_mode`` ``auto`` for that run alone
(``SET LOCAL`` before it and back to the connection's default after it, in the same round
trip), so that after five runs it is planned no more where the generic plan costs no more.
The conversation's UNION ALL spent ~0.6 ms planning each run and ~0.1 ms running.

Invariants:
- A statement's name is a hash of its text: the same text is the same statement on every
  connection. Only text written in this codebase comes here; every value is a parameter.
- What this process has prepared is kept per database connection (a new one has none). After
  any error in a statement sent here, it is read afresh from ``pg_prepared_statements`` before
  the connection's next one: an error after ``PREPARE`` took effect (it is not undone by a
  rollback) must not make the next ``PREPARE`` of that name fail.
- At most ``MAX_PER_CONNECTION`` statements are prepared on a connection; beyond, statements
  run as plain SQL. Off (``DB_PREPARE_STATEMENTS=0``) or not on PostgreSQL: plain SQL. So
  does a run with an integer parameter beyond 64 bits (it finds nothing, as before).
- A parameter PostgreSQL cannot type from where it stands (one in the select list) must carry
  a cast in the statement (``%s::integer``): prepared, it would otherwise be text.
"""

from __future__ import annotations

import hashlib
import re
import weakref
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from django.conf import settings

MAX_PER_CONNECTION = 256
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# The statements each connection has prepared (None: to be read afresh, after an error), by
# the driver's connection object: dropped with it.
_prepared: weakref.WeakKeyDictionary[Any, set[str] | None] = weakref.WeakKeyDictionary()

_PLACEHOLDER = re.compile(r"%%|%s")


class _Statement(NamedTuple):
    name: str
    prepare: str  # PREPARE … AS the text with $1 … $n, still %%-escaped for the driver
    execute: str  # EXECUTE name(%s, …)


@lru_cache(maxsize=1024)
def _statement(sql: str) -> _Statement:
    name = "pb_" + hashlib.blake2b(sql.encode(), digest_size=8).hexdigest()
    count = 0

    def number(match: re.Match[str]) -> str:
        nonlocal count
        if match.group() == "%%":
            return "%%"
        count += 1
        return f"${count}"

    numbered = _PLACEHOLDER.sub(number, sql)
    arguments = f"({', '.join(['%s'] * count)})" if count else ""
    return _Statement(name, f"PREPARE {name} AS {numbered}", f"EXECUTE {name}{arguments}")


# Around a generic_plan run. SET LOCAL holds to the end of the transaction: in autocommit
# that is the end of this very query string (one implicit transaction), and inside an atomic
# block the second SET gives the connection's own mode back at once. An error in between
# ends the transaction (or rolls back to its savepoint), which undoes the first SET too.
_AUTO_PLAN = "SET LOCAL plan_cache_mode = auto"
_OWN_PLAN = "SET LOCAL plan_cache_mode TO DEFAULT"


def execute(cursor: Any, sql: str, params: Sequence[Any], *, generic_plan: bool = False) -> None:
    """``cursor.execute(sql, params)``; on PostgreSQL the statement prepared once per
    connection and, with ``generic_plan`` (only for a statement on tables annotating does not
    grow), planned as PostgreSQL chooses rather than for each run's values. ``cursor`` is a
    Django cursor; read its rows as usual."""
    db = cursor.db  # its connection, without a lookup of the connection proxy at each use
    if (
        db.vendor != "postgresql"
        or not settings.DB_PREPARE_STATEMENTS
        or any(type(p) is int and not _INT64_MIN <= p <= _INT64_MAX for p in params)
    ):
        # An integer beyond 64 bits (a URL's id): plain SQL compares it as the number it is
        # and finds nothing, where a prepared parameter, typed by its bigint column, would
        # refuse it with an error.
        cursor.execute(sql, params)
        return
    raw = db.connection  # open: the cursor was made on it
    prepared = _prepared.get(raw, set())
    if prepared is None:
        cursor.execute("SELECT name FROM pg_prepared_statements")
        prepared = {name for (name,) in cursor.fetchall()}
    _prepared[raw] = prepared
    statement = _statement(sql)
    run = f"{_AUTO_PLAN}; {statement.execute}; {_OWN_PLAN}" if generic_plan else statement.execute
    try:
        if statement.name in prepared:
            cursor.execute(run, params)
        elif len(prepared) < MAX_PER_CONNECTION:
            cursor.execute(f"{statement.prepare}; {run}", params)
            prepared.add(statement.name)
            cursor.nextset()  # past PREPARE's (empty) result
        else:
            cursor.execute(sql, params)
            return
        if generic_plan:
            cursor.nextset()  # past the first SET's, to EXECUTE's rows
    except Exception:
        _prepared[raw] = None
        raise
