"""The benchmark app's statements that the ORM cannot say as cheaply.

- ``units_update_owned``: one UPDATE per unit with that unit's own values, sent as one
  ``executemany`` (a single pipelined round trip on PostgreSQL). ``bulk_update`` would build a
  CASE expression per row and field, which cost more CPU than the calls a batch records
  (bench/pipeline.py). tests/benchmark/test_sql.py checks it against the ORM's update.

Only table and column names are formatted into a statement; every value is a parameter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Field

from benchmark.models import EvaluationUnit, UnitState


def units_update_owned(
    *, fields: Sequence[str], rows: Sequence[tuple[Any, ...]], claim_token: str
) -> None:
    """For each row ``(*values, unit_id)``: set ``fields`` to ``values`` on that unit if it is
    still running under ``claim_token`` (a unit another delivery took over is left alone)."""
    if not rows:
        return
    quote = connection.ops.quote_name
    columns = [_column(name) for name in fields]
    assignments = ", ".join(f"{quote(column)} = %s" for column in columns)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {quote(EvaluationUnit._meta.db_table)} SET {assignments} "  # noqa: S608
            "WHERE id = %s AND claim_token = %s AND state = %s",
            [(*row, claim_token, UnitState.RUNNING) for row in rows],
        )


def _column(name: str) -> str:
    field = EvaluationUnit._meta.get_field(name)
    if not isinstance(field, Field):
        raise ValueError(f"EvaluationUnit.{name} is a relation, not a column")
    return field.column
