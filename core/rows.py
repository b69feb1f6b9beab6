"""Model instances from the rows of a plain SQL statement (the apps' ``sql.py``: only what
the ORM cannot say). A statement selects ``columns(Model, alias)`` and ``load`` turns its row
into the instance the ORM would have built: every field's converter applied, ``_state`` set,
no query. Only table names and fixed fragments are ever formatted into a statement; every
value is a parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from django.db import connection, models

M = TypeVar("M", bound=models.Model)


@dataclass(frozen=True)
class _Loader:
    """What turning a row into ``model`` needs on one database: the field names, and the
    converters its columns need on the way out (JSON text to objects, SQLite's datetime strings
    to datetimes), as Django's compiler would apply them."""

    names: list[str]
    converters: list[tuple[int, list[Callable[..., Any]], Any]]


# Per (database alias, model), built once per process: a model's fields do not change at run
# time.
_loaders: dict[tuple[str, type[models.Model]], _Loader] = {}


@cache
def columns(model: type[models.Model], alias: str) -> str:
    """``alias."col", …`` for every concrete field of ``model``, in the model's field order:
    the order ``load`` reads a row in."""
    return ", ".join(f'{alias}."{f.column}"' for f in model._meta.concrete_fields)


def width(model: type[models.Model]) -> int:
    """How many columns ``columns(model, …)`` selects."""
    return len(model._meta.concrete_fields)


def _loader(model: type[models.Model]) -> _Loader:
    key = (connection.alias, model)
    loader = _loaders.get(key)
    if loader is None:
        fields = model._meta.concrete_fields
        converters = []
        for i, f in enumerate(fields):
            col = f.cached_col
            # Field.get_db_converters is Django's (django-stubs does not declare it).
            funcs = connection.ops.get_db_converters(col) + f.get_db_converters(connection)  # type: ignore[attr-defined]
            if funcs:
                converters.append((i, funcs, col))
        loader = _loaders[key] = _Loader([f.attname for f in fields], converters)
    return loader


def load(model: type[M], row: Sequence[Any], start: int = 0) -> M:
    """The instance in ``row[start:]`` (selected with ``columns(model, …)``), as the ORM would
    build it: converted values, ``_state`` set, no extra query. What ``Model.objects.raw``
    does, without working out afresh for every row which column is which field."""
    loader = _loader(model)
    values = list(row[start : start + len(loader.names)])
    for i, funcs, col in loader.converters:
        value = values[i]
        for func in funcs:
            value = func(value, col, connection)
        values[i] = value
    return model.from_db(connection.alias, loader.names, values)


def fetch_rows(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        try:
            cursor.execute(sql, params)
        except OverflowError:  # SQLite binds no integer beyond 64 bits: no row holds one
            return []
        return cursor.fetchall()


def first(model: type[M], sql: str, params: Sequence[Any]) -> M | None:
    """The first ``model`` instance ``sql`` (``SELECT {columns(model, a)} …``) finds, or None."""
    rows = fetch_rows(sql, params)
    return load(model, rows[0]) if rows else None
