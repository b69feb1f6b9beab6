"""Study kinds as plug-ins: one module per kind, each declaring a ``StudyKind`` (``base.py``)
and registering it (``registry.py``). Import the registry's functions from here::

    from annotation import kinds
    kind = kinds.get(study.kind)

This package's ``__init__`` stays light (the registry only): ``models.py`` imports it.
"""

import importlib
import pkgutil

from annotation.kinds.registry import (
    UnknownKind,
    all_kinds,
    find,
    get,
    kind_choices,
    register,
    registered,
    unregister,
)

# Modules of this package that are infrastructure, not kinds.
_INFRASTRUCTURE = frozenset({"base", "registry", "selection", "verdicts"})


def discover() -> None:
    """Import every kind module of this package (each registers its kind). Called once, from
    the app's ``ready()``."""
    for module in pkgutil.iter_modules(__path__):
        if module.name not in _INFRASTRUCTURE and not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


__all__ = [
    "UnknownKind",
    "all_kinds",
    "discover",
    "find",
    "get",
    "kind_choices",
    "register",
    "registered",
    "unregister",
]
