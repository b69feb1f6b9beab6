"""A registry of named plug-ins: what the study kinds, the statistics tables and the model
providers each keep (``annotation/kinds/registry.py``, ``stats/tables/base.py``,
``benchmark/providers/registry.py``). Entries are registered once each, by key, when their
module is imported; tests add one for the length of a ``with`` block (``registered``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries by key, in registration order. ``what`` names the entries in messages
    ("study kind"); ``key`` reads an entry's key; ``check`` refuses a malformed entry
    (raising ValueError) before it is registered; ``unknown`` is raised for a key nobody
    registered."""

    def __init__(
        self,
        what: str,
        *,
        key: Callable[[T], str],
        check: Callable[[T], None] | None = None,
        unknown: type[LookupError] = LookupError,
    ) -> None:
        self.what = what
        self._key = key
        self._check = check
        self._unknown = unknown
        self._entries: dict[str, T] = {}

    def register(self, entry: T) -> T:
        """Add ``entry``; a key registered twice is a mistake (which one would a row mean?)."""
        if self._check is not None:
            self._check(entry)
        key = self._key(entry)
        if key in self._entries:
            raise ValueError(f"{self.what} {key!r} is already registered")
        self._entries[key] = entry
        return entry

    def unregister(self, key: str) -> None:
        self._entries.pop(key, None)

    @contextmanager
    def registered(self, *entries: T) -> Iterator[T]:
        """``entries`` registered for the length of a ``with`` block (tests); yields the first."""
        done: list[str] = []
        try:
            for entry in entries:
                self.register(entry)
                done.append(self._key(entry))
            yield entries[0]
        finally:
            for key in done:
                self.unregister(key)

    def get(self, key: str) -> T:
        """The entry under ``key``; the registry's ``unknown`` error (naming the known keys)
        if there is none."""
        try:
            return self._entries[key]
        except KeyError:
            known = ", ".join(self._entries)
            raise self._unknown(f"unknown {self.what} {key!r} (one of {known})") from None

    def find(self, key: str) -> T | None:
        return self._entries.get(key)

    def all(self) -> tuple[T, ...]:
        """Every entry, in registration order."""
        return tuple(self._entries.values())
