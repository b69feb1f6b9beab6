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


def discover() -> None:
    """Import every module of this package: each kind's registers it (the shared ones,
    ``base``, ``selection``, ``verdicts``, register nothing). Called once, from the app's
    ``ready()``."""
    for module in pkgutil.iter_modules(__path__):
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
