"""The hot paths' own SQL (``core.rows``, the apps' ``sql.py``), prepared once per PostgreSQL
connection instead of parsed on every request.

Here the statement is prepared in SQL — ``PREPARE name AS …`` sent with its first
``EXECUTE name(…)`` in one round trip — and then run as ``EXECUTE name(…)``, both through
Django's usual client-side binding: the web process's work per statement is what it was and
the round trips are as many, while PostgreSQL parses, analyses and rewrites each statement
once per connection. psycopg's own prepared statements (server-side binding) cost the web
process more than the database saved (commit b857b8e).

Plans: a prepared statement gets PostgreSQL's own choice (``plan_cache_mode`` ``auto``): a plan
for its values on its first five runs, then one generic plan, kept while its estimated cost is
no worse. That saves the planning too, which cost as much as the running on the answer request
(pg_stat_statements: ~1.8 ms of planning against ~1.8 ms of execution per answer). A statement
whose best plan depends on its values — which study, how far its items are answered, whose
history — is marked ``custom_plan=True`` by its caller and runs as plain SQL, planned afresh
each time: generic, those cost 4–15× their custom plans under the annotation benchmark's load
(the next item's search 2.2 against 0.29 ms, the progress count 8.9–10.5 against 0.6–1.4 ms;
bench/README.md), which had doubled PostgreSQL's CPU per answer when every statement was
prepared.

Invariants:
- A statement's name is a hash of its text: the same text is the same statement on every
  connection. Only text written in this codebase comes here; every value is a parameter.
- What this process has prepared is kept per database connection (a new one has none). After
  any error in a statement sent here, it is read afresh from ``pg_prepared_statements`` before
  the connection's next one: an error after ``PREPARE`` took effect (it is not undone by a
  rollback) must not make the next ``PREPARE`` of that name fail.
- At most ``MAX_PER_CONNECTION`` statements are prepared on a connection; beyond, statements
  run as plain SQL. Off (``DB_PREPARE_STATEMENTS=0``) or not on PostgreSQL: plain SQL. So
  does a run with an integer parameter beyond 64 bits (it finds nothing, as before), and a
  statement run with ``custom_plan=True``.
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


def execute(cursor: Any, sql: str, params: Sequence[Any], *, custom_plan: bool = False) -> None:
    """``cursor.execute(sql, params)``; on PostgreSQL the statement prepared once per
    connection, unless ``custom_plan`` (its plan must fit each run's values: plain SQL).
    ``cursor`` is a Django cursor; read its rows as usual."""
    db = cursor.db  # its connection, without a lookup of the connection proxy at each use
    if (
        custom_plan
        or db.vendor != "postgresql"
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
    try:
        if statement.name in prepared:
            cursor.execute(statement.execute, params)
        elif len(prepared) < MAX_PER_CONNECTION:
            cursor.execute(f"{statement.prepare}; {statement.execute}", params)
            prepared.add(statement.name)
            cursor.nextset()  # past PREPARE's (empty) result, to EXECUTE's rows
        else:
            cursor.execute(sql, params)
    except Exception:
        _prepared[raw] = None
        raise
