"""Model instances from the rows of a plain SQL statement (the apps' ``sql.py``: only what
the ORM cannot say). A statement selects ``columns(Model, alias)`` and ``load`` turns its row
into the instance the ORM would have built: every field's converter applied, ``_state`` set,
no query. Only table names and fixed fragments are ever formatted into a statement; every
value is a parameter. Statements run here are prepared once per PostgreSQL connection
(``core.prepared``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from django.db import connection, models
from django.db.models import signals

from core import prepared

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


def fetch_rows(
    sql: str, params: Sequence[Any], *, generic_plan: bool = False
) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` (``generic_plan``: see ``core.prepared.execute``)."""
    with connection.cursor() as cursor:
        try:
            prepared.execute(cursor, sql, params, generic_plan=generic_plan)
        except OverflowError:  # SQLite binds no integer beyond 64 bits: no row holds one
            return []
        return cursor.fetchall()


def first(
    model: type[M], sql: str, params: Sequence[Any], *, generic_plan: bool = False
) -> M | None:
    """The first ``model`` instance ``sql`` (``SELECT {columns(model, a)} …``) finds, or None."""
    rows = fetch_rows(sql, params, generic_plan=generic_plan)
    return load(model, rows[0]) if rows else None


# --- Writes ----------------------------------------------------------------------------------
# The ORM composes an INSERT or an UPDATE afresh on every call: on the annotation answer
# request that was ~0.2 ms of web CPU per write against ~0.1 ms for the same statement written
# once (bench/annotation_inproc.py). These write the statements the ORM would, built once per
# (database, model[, fields]), with every value prepared by its field as the ORM prepares it.


@dataclass(frozen=True)
class _Inserter:
    fields: list[models.Field]
    sql: str
    returning: bool


_inserters: dict[tuple[str, type[models.Model]], _Inserter] = {}


def _inserter(model: type[models.Model]) -> _Inserter:
    key = (connection.alias, model)
    inserter = _inserters.get(key)
    if inserter is None:
        opts = model._meta
        fields = [f for f in opts.concrete_fields if not f.generated and f is not opts.auto_field]
        quote = connection.ops.quote_name
        returning = connection.features.can_return_columns_from_insert
        # Names and placeholders only: every value is a parameter.
        sql = (
            f"INSERT INTO {quote(opts.db_table)} ({', '.join(quote(f.column) for f in fields)})"  # noqa: S608
            f" VALUES ({', '.join(['%s'] * len(fields))})"
            + (f" RETURNING {quote(opts.pk.column)}" if returning else "")
        )
        inserter = _inserters[key] = _Inserter(fields, sql, returning)
    return inserter


def _plain_save(model: type[models.Model]) -> bool:
    """Whether saving ``model`` is the INSERT alone: Django's own ``save``, an auto-increment
    key and no receiver of its save signals (else the ORM must do it, to keep all of that)."""
    return (
        model.save is models.Model.save
        and model._meta.auto_field is not None
        and not (signals.pre_save.has_listeners(model) or signals.post_save.has_listeners(model))
    )


def insert(instance: M) -> M:
    """Save the new ``instance`` — ``Model.objects.create(...)`` is
    ``insert(Model(...))`` — in the one INSERT the ORM would send: each field's ``pre_save``
    (``auto_now_add``) and ``get_db_prep_save`` applied, the key set from the database,
    ``_state`` as after a save. A model with its own ``save``, a non-automatic key or save
    signal receivers, or a value that is an expression, is saved by the ORM instead."""
    model = type(instance)
    if not _plain_save(model):
        instance.save(force_insert=True)
        return instance
    inserter = _inserter(model)
    # The ORM's own check: a related object assigned before it was saved has no key to store.
    # Model._prepare_related_fields_for_save is Django's (django-stubs does not declare it).
    instance._prepare_related_fields_for_save(operation_name="save")  # type: ignore[attr-defined]
    values = []
    for field in inserter.fields:
        value = field.pre_save(instance, add=True)
        if _not_a_plain_value(value):
            instance.save(force_insert=True)
            return instance
        values.append(field.get_db_prep_save(value, connection))
    with connection.cursor() as cursor:
        prepared.execute(cursor, inserter.sql, values)
        if inserter.returning:
            pk = cursor.fetchone()[0]
        else:
            opts = model._meta
            pk = connection.ops.last_insert_id(cursor, opts.db_table, opts.pk.column)
    instance.pk = pk
    instance._state.adding = False
    instance._state.db = connection.alias
    return instance


def _concrete(model: type[models.Model], name: str) -> models.Field:
    """The model's column field called ``name`` (or with that attname, ``item_id``)."""
    field = model._meta.get_field(name)
    if not isinstance(field, models.Field) or not field.concrete:
        raise ValueError(f"{model.__name__}.{name} is not a column")
    return field


def _not_a_plain_value(value: Any) -> bool:
    """An expression (``F(...)``, a database default) or a model instance: the ORM's to write."""
    return hasattr(value, "resolve_expression") or hasattr(value, "prepare_database_save")


@cache
def _update_sql(alias: str, model: type[models.Model], names: tuple[str, ...]) -> str:
    opts = model._meta
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(_concrete(model, n).column)} = %s" for n in names)
    table, pk = quote(opts.db_table), quote(opts.pk.column)
    return f"UPDATE {table} SET {assignments} WHERE {pk} = %s"  # noqa: S608


def update(model: type[models.Model], pk: Any, **values: Any) -> int:
    """``model.objects.filter(pk=pk).update(**values)`` in the UPDATE the ORM would send, each
    value prepared by its field (no save signals, as with the ORM's update); the rows updated
    (0 or 1). A value that is an expression (``F(...)``) or a model instance goes through the
    ORM."""
    if any(_not_a_plain_value(v) for v in values.values()):
        return model._default_manager.filter(pk=pk).update(**values)
    opts = model._meta
    params = [_concrete(model, n).get_db_prep_save(v, connection) for n, v in values.items()]
    params.append(opts.pk.get_db_prep_value(pk, connection))
    with connection.cursor() as cursor:
        prepared.execute(cursor, _update_sql(connection.alias, model, tuple(values)), params)
        return cursor.rowcount
