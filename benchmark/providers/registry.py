"""The provider registry: which provider keys exist, what each needs, and how to build one.

Each adapter module registers a ``ProviderSpec`` under its key when it is imported, and
``BenchmarkConfig.ready`` imports every module of this package, so the registry is complete
before anything reads it. ``ModelEndpoint.provider`` takes its choices from ``choices`` and the
factory builds providers through ``lookup``; a new provider is therefore one new module here.

A leaf module: it imports no SDK and no model, because ``benchmark.models`` imports it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.registry import Registry

if TYPE_CHECKING:
    from benchmark.providers.base import ChatProvider
    from benchmark.providers.ratelimit import EndpointLimiter

KEY_MAX_LENGTH = 20
"""``ModelEndpoint.provider`` stores the key in a column of this width."""
_KEY_PATTERN = re.compile(r"^[a-z][a-z0-9-]*$")


@dataclass(frozen=True)
class Connection:
    """What the factory hands a builder, parsed from an endpoint: the key is read from the
    environment there, never here, and the endpoint settings are already stripped from
    ``default_params``."""

    base_url: str | None
    api_key: str
    """Empty when the endpoint names no key and its provider needs none."""
    timeout_s: float
    limiter: EndpointLimiter | None
    """``None``: no limits."""
    default_params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProviderSpec:
    """One provider an endpoint can name.

    ``offline`` providers send nothing anywhere (replay): the factory reads no key and applies no
    limits for them, and the connection test answers without a call."""

    key: str
    label: str
    """Shown in the admin's provider choices."""
    build: Callable[[Connection], ChatProvider]
    needs_api_key: bool = True
    """An endpoint must name the environment variable that holds its key."""
    needs_base_url: bool = False
    """The provider has no default URL, so an endpoint must give one."""
    offline: bool = False


def _check(spec: ProviderSpec) -> None:
    if not _KEY_PATTERN.match(spec.key) or len(spec.key) > KEY_MAX_LENGTH:
        raise ValueError(
            f"provider key {spec.key!r} must be lower-case letters, digits and hyphens, "
            f"at most {KEY_MAX_LENGTH} characters"
        )
    if spec.offline and spec.needs_api_key:
        raise ValueError(f"provider {spec.key!r} is offline and so cannot need an API key")


PROVIDERS: Registry[ProviderSpec] = Registry("provider key", key=lambda s: s.key, check=_check)
register = PROVIDERS.register
unregister = PROVIDERS.unregister
registered = PROVIDERS.registered


def lookup(key: str) -> ProviderSpec | None:
    return PROVIDERS.find(key)


def choices() -> list[tuple[str, str]]:
    """(key, label) of every registered provider, by label: the order does not depend on which
    module was imported first. Django reads it lazily (``choices=<callable>``), and migrations
    keep only this function's path, so registering a provider needs no migration."""
    return sorted(
        ((spec.key, spec.label) for spec in PROVIDERS.all()), key=lambda c: c[1].casefold()
    )
