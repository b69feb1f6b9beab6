"""Model instances from plain SQL, for the few statements every request runs.

On the annotation hot path (and the session and user every request loads), Django spent longer
composing the equivalent querysets than the database spent running them (bench/README.md, the
annotation load benchmark). These helpers keep the rest of the ORM's behaviour: a statement
selects ``columns(Model, alias)`` and ``load`` turns its row into the instance the ORM would
have built. Only table names and fixed fragments are ever formatted into a statement; every
value is a parameter.
"""

from __future__ import annotations

from functools import cache
from typing import TypeVar

from django.db import connection, models

M = TypeVar("M", bound=models.Model)

# Per (database alias, model): the converters its columns need on the way out of that database
# (JSON text to objects, SQLite's datetime strings to datetimes), as Django's compiler would
# apply them. Built once per process; a model's fields do not change at run time.
_converters: dict[tuple[str, type[models.Model]], list[tuple[int, list, object]]] = {}


@cache
def columns(model: type[models.Model], alias: str) -> str:
    """``alias."col", …`` for every concrete field of ``model``, in the model's field order:
    the order ``load`` reads a row in."""
    return ", ".join(f'{alias}."{f.column}"' for f in model._meta.concrete_fields)


def load(model: type[M], row: tuple | list, start: int = 0) -> M:
    """The instance in ``row[start:]`` (selected with ``columns(model, …)``), as the ORM would
    build it: converted values, ``_state`` set, no extra query. What ``Model.objects.raw``
    does, without working out afresh for every row which column is which field."""
    fields = model._meta.concrete_fields
    values = list(row[start : start + len(fields)])
    key = (connection.alias, model)
    converters = _converters.get(key)
    if converters is None:
        converters = _converters[key] = []
        for i, f in enumerate(fields):
            col = f.cached_col
            funcs = connection.ops.get_db_converters(col) + f.get_db_converters(connection)
            if funcs:
                converters.append((i, funcs, col))
    for i, funcs, col in converters:
        value = values[i]
        for func in funcs:
            value = func(value, col, connection)
        values[i] = value
    return model.from_db(connection.alias, None, values)


def load_each(row: tuple | list, *models: type[models.Model]) -> tuple[models.Model, ...]:
    """One instance of each model from a row that selected ``columns(model, …)`` for each of
    them, in this order (a join)."""
    instances, start = [], 0
    for model in models:
        instances.append(load(model, row, start))
        start += len(model._meta.concrete_fields)
    return tuple(instances)


def fetch_rows(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def first(model: type[M], sql: str, params: list) -> M | None:
    """The first ``model`` instance ``sql`` (``SELECT {columns(model, a)} …``) finds, or None."""
    rows = fetch_rows(sql, params)
    return load(model, rows[0]) if rows else None
