"""Building the provider for a ``ModelEndpoint``: the one place that reads API keys.

Keys come from the environment variable the endpoint *names*; a key value never appears in a
message or a log line, only the variable's name. Endpoint plumbing that is not a sampling
parameter travels in ``default_params`` for now (the model has no columns for it yet) and is
stripped here before anything is sent: ``rate_limit_rpm``, ``rate_limit_tpm``,
``max_concurrency`` (see ratelimit.py) and ``timeout_s``.
"""

from __future__ import annotations

import os
from typing import Any

from benchmark.models import ModelEndpoint, Provider
from benchmark.providers.anthropic_messages import AnthropicMessagesProvider
from benchmark.providers.base import (
    ChatMessage,
    ChatProvider,
    ChatRequest,
    ChatResult,
    ProviderError,
)
from benchmark.providers.openai_chat import OpenAIChatProvider, OpenAICompatibleProvider
from benchmark.providers.ratelimit import limiters_for
from benchmark.providers.replay import ReplayProvider, ReplayStore

ENDPOINT_SETTINGS = ("rate_limit_rpm", "rate_limit_tpm", "max_concurrency", "timeout_s")
DEFAULT_TIMEOUT_S = 120.0
LEASE_MARGIN_S = 60.0
"""A concurrency lease outlives the call's timeout by this much, so it never expires mid-call."""


def provider_for(endpoint: ModelEndpoint) -> ChatProvider:
    """A new provider for ``endpoint``, with its limiter. Raises ``ProviderError`` (not
    retryable) for a configuration that cannot work: a missing key, a bad setting.

    Each provider owns an HTTP connection pool: build one per endpoint and process and share it
    between threads rather than one per call."""
    if endpoint.provider == Provider.REPLAY:
        return ReplayProvider(ReplayStore.from_demo_data())
    api_key = _api_key(endpoint)
    params = dict(endpoint.default_params or {})
    rpm = _positive_int(endpoint, "rate_limit_rpm", params.pop("rate_limit_rpm", None))
    tpm = _positive_int(endpoint, "rate_limit_tpm", params.pop("rate_limit_tpm", None))
    concurrency = _positive_int(endpoint, "max_concurrency", params.pop("max_concurrency", None))
    timeout_s = _timeout_s(endpoint, params.pop("timeout_s", None))
    limiter = limiters_for(
        endpoint.name,
        rpm=rpm,
        tpm=tpm,
        max_concurrency=concurrency,
        lease_s=timeout_s + LEASE_MARGIN_S,
    )
    base_url = endpoint.base_url or None
    if endpoint.provider == Provider.ANTHROPIC:
        return AnthropicMessagesProvider(
            base_url=base_url,
            api_key=api_key,
            timeout_s=timeout_s,
            limiter=limiter,
            default_params=params,
        )
    if endpoint.provider in (Provider.OPENAI, Provider.OPENAI_COMPATIBLE):
        if endpoint.provider == Provider.OPENAI_COMPATIBLE and not base_url:
            raise ProviderError(
                f"endpoint {endpoint.name} is OpenAI-compatible but has no base URL",
                retryable=False,
            )
        provider_class = (
            OpenAIChatProvider if endpoint.provider == Provider.OPENAI else OpenAICompatibleProvider
        )
        return provider_class(
            base_url=base_url,
            api_key=api_key,
            timeout_s=timeout_s,
            limiter=limiter,
            default_params=params,
        )
    raise ProviderError(
        f"endpoint {endpoint.name} has an unknown provider {endpoint.provider!r}", retryable=False
    )


def test_connection(endpoint: ModelEndpoint) -> ChatResult:
    """Send one tiny request, for the "test connection" button. Replay endpoints need no key or
    network and answer "OK" at once. Raises ``ProviderError`` with a message fit for the UI."""
    if endpoint.provider == Provider.REPLAY:
        return ChatResult(text="OK", request_id="replay-test")
    request = ChatRequest(
        model=endpoint.model_name,
        messages=(ChatMessage("user", "Reply with the word OK."),),
        params={"max_tokens": 5},
    )
    return provider_for(endpoint).complete(request)


def _api_key(endpoint: ModelEndpoint) -> str:
    name = endpoint.api_key_env
    if not name:
        if endpoint.provider == Provider.OPENAI_COMPATIBLE:
            return ""  # OpenAICompatibleProvider sends its placeholder
        raise ProviderError(
            f"endpoint {endpoint.name} names no environment variable for its API key",
            retryable=False,
        )
    value = os.environ.get(name, "").strip()
    if not value:
        raise ProviderError(
            f"environment variable {name} is not set for endpoint {endpoint.name}",
            retryable=False,
        )
    return value


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
