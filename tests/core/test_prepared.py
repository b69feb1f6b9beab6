"""core.prepared: on PostgreSQL a statement is prepared with its first run and executed by name
after, with the rows plain SQL gives; an error after PREPARE took effect does not break the
statement's next run; off, or on SQLite, the statement runs as written."""

import uuid

import pytest
from django.db import DataError, IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from core import prepared

pytestmark = pytest.mark.django_db

on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="PREPARE/EXECUTE are PostgreSQL's: on SQLite every statement runs as written",
)


def _fresh(sql: str) -> str:
    """The statement with a comment no other test's text has: not yet prepared anywhere."""
    return f"{sql} /* {uuid.uuid4().hex} */"


def _run(sql: str, params: list) -> tuple[list, list[str]]:
    with CaptureQueriesContext(connection) as captured, connection.cursor() as cursor:
        prepared.execute(cursor, sql, params)
        rows = cursor.fetchall() if cursor.description else []
    return rows, [q["sql"] for q in captured.captured_queries]


def _mode() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW plan_cache_mode")
        return cursor.fetchone()[0]


def _plans(sql: str) -> tuple[int, int]:
    """The statement's (generic, custom) plans so far on this connection."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = %s",
            [prepared._statement(sql).name],
        )
        return cursor.fetchone()


def _prepared_names() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements")
        return {name for (name,) in cursor.fetchall()}


@on_postgresql
def test_prepared_with_its_first_run_then_executed_by_name_with_the_same_rows():
    sql = _fresh(
        "SELECT %s::integer + 1, 'per cent %%, literal', %s = ANY(ARRAY['a', 'b'])"
        " FROM generate_series(1, 3) g WHERE g > %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [41, "b", 1])
        plain = cursor.fetchall()
    first, first_sent = _run(sql, [41, "b", 1])
    again, again_sent = _run(sql, [41, "b", 1])
    other, _ = _run(sql, [1, "z", 2])
    assert first == again == plain == [(42, "per cent %, literal", True)] * 2
    assert other == [(2, "per cent %, literal", False)]
    # One round trip each time: PREPARE with the first EXECUTE, then EXECUTE alone.
    assert len(first_sent) == len(again_sent) == 1
    assert first_sent[0].startswith("PREPARE pb_") and "; EXECUTE pb_" in first_sent[0]
    assert again_sent[0].startswith("EXECUTE pb_") and "41" in again_sent[0]
    assert prepared._statement(sql).name in _prepared_names()


@on_postgresql
def test_a_statement_without_parameters_and_a_write_report_their_rows():
    table = f"t_{uuid.uuid4().hex[:12]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE {table} (k integer PRIMARY KEY, v text)")
    for k in (1, 2):
        _run(f"INSERT INTO {table} (k, v) VALUES (%s, %s)", [k, f"v{k}"])
    with connection.cursor() as cursor:
        prepared.execute(cursor, f"UPDATE {table} SET v = %s WHERE k >= %s", ["w", 1])
        assert cursor.rowcount == 2
    assert _run(f"SELECT k, v FROM {table} ORDER BY k", [])[0] == [(1, "w"), (2, "w")]


@on_postgresql
def test_an_error_after_prepare_does_not_break_the_next_run():
    table = f"t_{uuid.uuid4().hex[:12]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE {table} (k integer PRIMARY KEY)")
        cursor.execute(f"INSERT INTO {table} VALUES (1)")
    insert = f"INSERT INTO {table} (k) VALUES (%s)"
    # The first run prepares the statement and then fails: PREPARE stays in effect on the
    # connection (a rollback does not undo it), though this process never saw it succeed.
    with pytest.raises(IntegrityError), transaction.atomic():
        _run(insert, [1])
    assert prepared._statement(insert).name in _prepared_names()
    with CaptureQueriesContext(connection) as captured, connection.cursor() as cursor:
        prepared.execute(cursor, insert, [2])
    sent = [q["sql"] for q in captured.captured_queries]
    # Read afresh, so executed by name — not prepared a second time, which would fail.
    assert sent[0] == "SELECT name FROM pg_prepared_statements"
    assert sent[1].startswith("EXECUTE pb_")
    assert _run(f"SELECT k FROM {table} ORDER BY k", [])[0] == [(1,), (2,)]


@on_postgresql
def test_past_the_cap_statements_run_as_written(monkeypatch):
    monkeypatch.setattr(prepared, "MAX_PER_CONNECTION", 0)
    sql = _fresh("SELECT %s::integer")
    assert _run(sql, [7]) == ([(7,)], [sql.replace("%s", "7")])
    assert prepared._statement(sql).name not in _prepared_names()


def test_off_or_on_sqlite_statements_run_as_written(settings):
    # On SQLite with the setting on (its default); on PostgreSQL with it off.
    settings.DB_PREPARE_STATEMENTS = connection.vendor != "postgresql"
    sql = _fresh("SELECT 1 + %s")
    assert _run(sql, [1]) == ([(2,)], [sql.replace("%s", "1")])


@on_postgresql
def test_each_run_is_planned_for_its_own_values():
    """Never a generic plan (core.prepared: one doubled PostgreSQL's CPU under load), however
    often a statement runs."""
    assert _mode() == "force_custom_plan"
    sql = _fresh("SELECT count(*) FROM generate_series(1, 10) g WHERE g > %s")
    for limit in range(8):
        assert _run(sql, [limit])[0] == [(10 - limit,)]
    assert _plans(sql) == (0, 8)


@on_postgresql
def test_an_integer_beyond_64_bits_finds_nothing_as_in_plain_sql():
    """A URL's id can be any length: prepared, its bigint parameter would refuse it."""
    sql = _fresh("SELECT id FROM auth_user WHERE id = %s")
    _run(sql, [1])  # prepared
    rows, sent = _run(sql, [10**30])
    assert rows == [] and "PREPARE" not in sent[0] and "EXECUTE" not in sent[0]
    assert _run(sql, [-(10**30)])[0] == []


def _generic_run(sql: str, params: list) -> list:
    with connection.cursor() as cursor:
        prepared.execute(cursor, sql, params, generic_plan=True)
        return cursor.fetchall()


@on_postgresql
def test_a_generic_plan_run_is_planned_once_postgresql_finds_it_as_good():
    """PostgreSQL's own choice for that statement alone: custom plans for its first five runs,
    then the generic one; every other statement is still planned for its values."""
    sql = _fresh("SELECT username FROM auth_user WHERE id = %s")
    for user_id in range(8):
        assert _generic_run(sql, [user_id]) == []
        assert _mode() == "force_custom_plan"
    with transaction.atomic():  # SET LOCAL would hold to the end of the transaction
        assert _generic_run(sql, [8]) == []
        assert _mode() == "force_custom_plan"
    assert _plans(sql) == (4, 5)


@on_postgresql
def test_an_error_in_a_generic_plan_run_leaves_the_connection_planning_each_run():
    sql = _fresh("SELECT 10 / %s::integer")
    with pytest.raises(DataError), transaction.atomic():
        _generic_run(sql, [0])  # its first run: PREPARE, then the division fails
    assert _mode() == "force_custom_plan"
    with transaction.atomic():
        with pytest.raises(DataError), transaction.atomic():  # a savepoint rolled back
            _generic_run(sql, [0])
        assert _mode() == "force_custom_plan"
        assert _generic_run(sql, [5]) == [(2,)]
    assert _mode() == "force_custom_plan"
