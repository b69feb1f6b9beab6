"""The study-kind registry: which kinds exist, by key. A leaf (it imports nothing of the
project), so ``models.py`` can take ``Study.kind``'s choices from it without importing any
kind's logic.

Each kind is one module in ``annotation/kinds/`` that ends with ``register(TheKind())``; the
app's ``ready()`` imports every module of the package (``annotation.kinds.discover``), so a new
kind is one new file. Everything else — the creation form, the workspace, the outcome of an
answer, the exports, the statistics — asks the registry for the kind of a study.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from annotation.kinds.base import StudyKind

_KINDS: dict[str, StudyKind] = {}


class UnknownKind(LookupError):
    """No kind is registered under this key."""


def register(kind: StudyKind) -> StudyKind:
    """Add ``kind`` under its key (once: a second kind with the same key is a mistake)."""
    if kind.key in _KINDS:
        raise ValueError(f"study kind {kind.key!r} is already registered")
    _KINDS[kind.key] = kind
    return kind


def unregister(key: str) -> None:
    _KINDS.pop(key, None)


@contextmanager
def registered(kind: StudyKind) -> Iterator[StudyKind]:
    """``kind`` registered for the length of a ``with`` block (tests)."""
    register(kind)
    try:
        yield kind
    finally:
        unregister(kind.key)


def get(key: str) -> StudyKind:
    """The kind registered under ``key``; ``UnknownKind`` if none is."""
    try:
        return _KINDS[key]
    except KeyError:
        raise UnknownKind(f"unknown study kind {key!r}") from None


def find(key: str) -> StudyKind | None:
    """The kind registered under ``key``, or None."""
    return _KINDS.get(key)


def all_kinds() -> list[StudyKind]:
    """Every registered kind, in menu order."""
    return sorted(_KINDS.values(), key=lambda kind: (kind.order, kind.key))


def kind_choices() -> list[tuple[str, str]]:
    """(key, label) of every kind, in menu order: the choices of ``Study.kind`` and of the
    creation form (evaluated whenever they are read, so later registrations count)."""
    return [(kind.key, kind.label) for kind in all_kinds()]
