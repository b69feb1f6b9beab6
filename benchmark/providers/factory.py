"""Building the provider for a ``ModelEndpoint``: the one place that reads API keys and parses
endpoint settings. Which class answers an endpoint is the registry's business (registry.py):
the factory looks the endpoint's provider key up there and hands its builder a ``Connection``.

Keys come from the environment variable the endpoint *names*; a key value never appears in a
message or a log line, only the variable's name. Endpoint plumbing that is not a sampling
parameter travels in ``default_params`` for now (the model has no columns for it yet) and is
stripped here before anything is sent: ``rate_limit_rpm``, ``rate_limit_tpm``,
``max_concurrency`` (see ratelimit.py) and ``timeout_s``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from benchmark.models import ModelEndpoint
from benchmark.providers import keys, registry
from benchmark.providers.base import (
    ChatMessage,
    ChatProvider,
    ChatRequest,
    ChatResult,
    ProviderError,
)
from benchmark.providers.ratelimit import limiters_for
from benchmark.providers.registry import Connection, ProviderSpec

ENDPOINT_SETTINGS = ("rate_limit_rpm", "rate_limit_tpm", "max_concurrency", "timeout_s")
DEFAULT_TIMEOUT_S = 120.0
LEASE_MARGIN_S = 60.0
"""A concurrency lease outlives the call's timeout by this much, so it never expires mid-call."""


def provider_for(endpoint: ModelEndpoint) -> ChatProvider:
    """A new provider for ``endpoint``, built by its provider's registered builder, with its
    limiter. Raises ``ProviderError`` (not retryable) for a configuration that cannot work: an
    unknown provider, a missing key or base URL, a bad setting.

    Each provider owns an HTTP connection pool: build one per endpoint and process and share it
    between threads rather than one per call."""
    spec = _spec(endpoint)
    if spec.offline:
        # Nothing is sent anywhere: no key to read, no limits or timeout to apply.
        return spec.build(
            Connection(base_url=None, api_key="", timeout_s=DEFAULT_TIMEOUT_S, limiter=None)
        )
    api_key = _api_key(endpoint, spec)
    limits = configured_limits(endpoint)
    params = sampling_params(endpoint)
    timeout_s = _timeout_s(endpoint, (endpoint.default_params or {}).get("timeout_s"))
    limiter = limiters_for(
        endpoint.name,
        rpm=limits.rpm,
        tpm=limits.tpm,
        max_concurrency=limits.max_concurrency,
        lease_s=timeout_s + LEASE_MARGIN_S,
        learn=True,  # limits not configured are learnt from the vendor's headers
    )
    base_url = endpoint.base_url or None
    if spec.needs_base_url and not base_url:
        raise ProviderError(
            f"endpoint {endpoint.name} is {spec.key} but has no base URL", retryable=False
        )
    return spec.build(
        Connection(
            base_url=base_url,
            api_key=api_key,
            timeout_s=timeout_s,
            limiter=limiter,
            default_params=params,
        )
    )


def test_connection(endpoint: ModelEndpoint) -> ChatResult:
    """Send one tiny request, for the "test connection" button. Offline (replay) endpoints need
    no key or network and answer "OK" at once. Raises ``ProviderError`` with a message fit for
    the UI."""
    spec = _spec(endpoint)
    if spec.offline:
        return ChatResult(text="OK", request_id=f"{spec.key}-test")
    request = ChatRequest(
        model=endpoint.model_name,
        messages=(ChatMessage("user", "Reply with the word OK."),),
        params={"max_tokens": 5},
    )
    return provider_for(endpoint).complete(request)


def _spec(endpoint: ModelEndpoint) -> ProviderSpec:
    spec = registry.lookup(endpoint.provider)
    if spec is None:
        raise ProviderError(
            f"endpoint {endpoint.name} has an unknown provider {endpoint.provider!r}",
            retryable=False,
        )
    return spec


def _api_key(endpoint: ModelEndpoint, spec: ProviderSpec) -> str:
    """The key from the environment; "" for a provider that needs none and an endpoint that
    names none (a variable that is named must be set, whatever the provider). The variable
    must be one an endpoint may name (keys.py), whatever wrote the endpoint: ``clean`` is not
    run by the ORM, a fixture or an import."""
    name = endpoint.api_key_env
    if not name:
        if not spec.needs_api_key:
            return ""
        raise ProviderError(
            f"endpoint {endpoint.name} names no environment variable for its API key",
            retryable=False,
        )
    if not keys.is_env_name(name):
        # Not echoed: a key pasted into the field instead of a variable's name.
        raise ProviderError(
            f"endpoint {endpoint.name}: api_key_env is not the name of an environment variable",
            retryable=False,
        )
    refusal = keys.api_key_env_refusal(name)
    if refusal:
        raise ProviderError(f"endpoint {endpoint.name}: api_key_env {refusal}", retryable=False)
    value = os.environ.get(name, "").strip()
    if not value:
        raise ProviderError(
            f"environment variable {name} is not set for endpoint {endpoint.name}",
            retryable=False,
        )
    return value


def sampling_params(endpoint: ModelEndpoint) -> dict:
    """The endpoint's sampling parameters, without its plumbing (``ENDPOINT_SETTINGS``: rate
    limits, timeout), which is not sent and not part of what identifies a call."""
    return {
        key: value
        for key, value in (endpoint.default_params or {}).items()
        if key not in ENDPOINT_SETTINGS
    }


@dataclass(frozen=True)
class ConfiguredLimits:
    """The limits set in an endpoint's ``default_params`` (None: not set; a rate limit not set
    is learnt from the vendor's headers, ratelimit.py)."""

    rpm: int | None
    tpm: int | None
    max_concurrency: int | None


def configured_limits(endpoint: ModelEndpoint) -> ConfiguredLimits:
    """Raises ``ProviderError`` (not retryable), naming the setting, for one that is not a
    positive whole number."""
    params = endpoint.default_params or {}
    return ConfiguredLimits(
        rpm=_positive_int(endpoint, "rate_limit_rpm", params.get("rate_limit_rpm")),
        tpm=_positive_int(endpoint, "rate_limit_tpm", params.get("rate_limit_tpm")),
        max_concurrency=_positive_int(endpoint, "max_concurrency", params.get("max_concurrency")),
    )


def _positive_int(endpoint: ModelEndpoint, name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ProviderError(
            f"endpoint {endpoint.name}: {name} must be a positive whole number, not {value!r}",
            retryable=False,
        )
    return value


def _timeout_s(endpoint: ModelEndpoint, value: Any) -> float:
    if value is None:
        return DEFAULT_TIMEOUT_S
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ProviderError(
            f"endpoint {endpoint.name}: timeout_s must be a positive number, not {value!r}",
            retryable=False,
        )
    return float(value)
