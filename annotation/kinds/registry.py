"""The study-kind registry: which kinds exist, by key. It imports no kind logic (only
``core.registry``), so ``models.py`` can take ``Study.kind``'s choices from it.

Each kind is one module in ``annotation/kinds/`` that ends with ``register(TheKind())``; the
app's ``ready()`` imports every module of the package (``annotation.kinds.discover``), so a new
kind is one new file. Everything else — the creation form, the workspace, the outcome of an
answer, the exports, the statistics — asks the registry for the kind of a study.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.registry import Registry

if TYPE_CHECKING:
    from annotation.kinds.base import StudyKind


class UnknownKind(LookupError):
    """No kind is registered under this key."""


def _check(kind: StudyKind) -> None:
    if not 0 < len(kind.key) <= KEY_MAX_LENGTH:
        raise ValueError(f"study kind key {kind.key!r}: 1 to {KEY_MAX_LENGTH} characters")


KEY_MAX_LENGTH = 20  # Study.kind's column
KINDS: Registry[StudyKind] = Registry(
    "study kind", key=lambda kind: kind.key, check=_check, unknown=UnknownKind
)
register = KINDS.register
unregister = KINDS.unregister
registered = KINDS.registered
get = KINDS.get
find = KINDS.find


def all_kinds() -> list[StudyKind]:
    """Every registered kind, in menu order."""
    return sorted(KINDS.all(), key=lambda kind: (kind.order, kind.key))


def kind_choices() -> list[tuple[str, str]]:
    """(key, label) of every kind, in menu order: the choices of ``Study.kind`` and of the
    creation form (evaluated whenever they are read, so later registrations count)."""
    return [(kind.key, kind.label) for kind in all_kinds()]
