"""The Anthropic Messages adapter.

The Messages API has no "system" role: system text is a separate ``system`` parameter, and it
requires ``max_tokens``. One ``anthropic.Anthropic`` client per provider (thread-safe, pooled
connections), so share the provider between threads.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anthropic

from benchmark.providers.base import ChatRequest, ChatResult, ProviderError
from benchmark.providers.ratelimit import EndpointLimiter, estimate_request_tokens
from benchmark.providers.retry import (
    atimed_call_with_retries,
    reject_reserved,
    timed_call_with_retries,
)

DEFAULT_MAX_TOKENS = 1024
# Parameters with no Anthropic equivalent, dropped rather than sent (the API rejects unknown
# fields), so one endpoint configuration can be shared across vendors.
_UNSUPPORTED_PARAMS = frozenset({"seed"})
_RESERVED_PARAMS = frozenset({"model", "messages", "system", "stream"})


class AnthropicMessagesProvider:
    """``complete`` is safe to call from many threads at once.

    Parameter mapping: ``max_tokens`` (default 1024), ``stop`` → ``stop_sequences``, ``seed``
    dropped; everything else (temperature, top_p, top_k, thinking, …) is sent as given.
    Every system message, wherever it stands, goes into ``system`` (joined by blank lines).
    An empty reply (no text blocks, e.g. a refusal or a budget spent on thinking) is a
    non-retryable ``ProviderError``, as for OpenAI."""

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        timeout_s: float = 120,
        max_attempts: int = 5,
        sleep: Callable[[float], None] = time.sleep,
        asleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        limiter: EndpointLimiter | None = None,
        default_params: Mapping[str, Any] | None = None,
        vendor: str = "anthropic",
    ) -> None:
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.vendor = vendor
        self._sleep, self._asleep = sleep, asleep
        self._limiter = limiter or EndpointLimiter()
        self._default_params = dict(default_params or {})
        self._secrets = (api_key,)
        self._client_options = {
            "base_url": base_url,
            "api_key": api_key,
            "timeout": timeout_s,
            "max_retries": 0,
        }
        self._client = anthropic.Anthropic(**self._client_options)
        self._aclient: anthropic.AsyncAnthropic | None = None

    def complete(self, request: ChatRequest) -> ChatResult:
        """One message. The timeout is the tighter of the request's and the provider's;
        ``latency_s`` is that of the successful attempt alone (no backoff, no limiter wait)."""
        kwargs, timeout_s, estimated_tokens = self._prepare(request)

        def send() -> Any:
            return self._client.messages.create(**kwargs, timeout=timeout_s)

        return timed_call_with_retries(
            send,
            self._result,
            limiter=self._limiter,
            estimated_tokens=estimated_tokens,
            sleep=self._sleep,
            max_attempts=self.max_attempts,
            vendor=self.vendor,
            secrets=self._secrets,
        )

    async def acomplete(self, request: ChatRequest) -> ChatResult:
        """``complete`` on an event loop (the SDK's async client). Call it from one event loop
        only: the async client's connection pool belongs to the loop that first used it."""
        kwargs, timeout_s, estimated_tokens = self._prepare(request)
        if self._aclient is None:
            # aiohttp under the SDK's HTTP layer, as for OpenAI (openai_chat.py says why).
            self._aclient = anthropic.AsyncAnthropic(
                **self._client_options, http_client=anthropic.DefaultAioHttpClient()
            )
        client = self._aclient

        def send() -> Any:
            return client.messages.create(**kwargs, timeout=timeout_s)

        return await atimed_call_with_retries(
            send,
            self._result,
            limiter=self._limiter,
            estimated_tokens=estimated_tokens,
            sleep=self._asleep,
            max_attempts=self.max_attempts,
            vendor=self.vendor,
            secrets=self._secrets,
        )

    async def aclose(self) -> None:
        """Close the async client's connections (call it on the loop that used them)."""
        if self._aclient is not None:
            await self._aclient.close()
            self._aclient = None

    def _prepare(self, request: ChatRequest) -> tuple[dict[str, Any], float, int]:
        kwargs = self._create_kwargs(request, {**self._default_params, **request.params})
        estimated_tokens = estimate_request_tokens(
            request.messages, max_output_tokens=kwargs["max_tokens"]
        )
        return kwargs, min(request.timeout_s, self.timeout_s), estimated_tokens

    def _create_kwargs(self, request: ChatRequest, params: dict[str, Any]) -> dict[str, Any]:
        reject_reserved(params, _RESERVED_PARAMS)
        extra = {k: v for k, v in params.items() if k not in _UNSUPPORTED_PARAMS}
        kwargs: dict[str, Any] = {
            "model": request.model,
            "max_tokens": extra.pop("max_tokens", None) or DEFAULT_MAX_TOKENS,
            "messages": [
                {"role": m.role, "content": m.content}
                for m in request.messages
                if m.role != "system"
            ],
        }
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        if system:
            kwargs["system"] = system
        if "stop" in extra:
            stop = extra.pop("stop")
            kwargs["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop or [])
        if extra:
            # The SDK no longer names temperature/top_p/top_k; the API still takes them.
            kwargs["extra_body"] = extra
        return kwargs

    def _result(self, message: Any, latency_s: float, attempts: int) -> ChatResult:
        if isinstance(message, str):
            # The SDK hands back the raw text when the response is not JSON at all.
            raise ProviderError(
                f"{self.vendor} answered with something other than JSON; check the base URL",
                status=200,
                retryable=False,
            )
        blocks = getattr(message, "content", None) or []
        text = "".join(block.text for block in blocks if getattr(block, "type", "") == "text")
        if not text.strip():
            raise ProviderError(
                f"{self.vendor} returned an empty reply (stop_reason={message.stop_reason})",
                status=200,
                retryable=False,
            )
        usage = message.usage
        # Anthropic counts cached prompt tokens apart from input_tokens; add them back so that
        # input_tokens means "the whole prompt", as it does for OpenAI.
        input_tokens = (
            (usage.input_tokens or 0)
            + (getattr(usage, "cache_creation_input_tokens", None) or 0)
            + (getattr(usage, "cache_read_input_tokens", None) or 0)
            if usage
            else 0
        )
        return ChatResult(
            text=text,
            input_tokens=input_tokens,
            # Thinking tokens are billed as output and not reported apart: reasoning_tokens
            # stays 0, so output + reasoning is still what was billed.
            output_tokens=(usage.output_tokens or 0) if usage else 0,
            latency_s=latency_s,
            attempts=attempts,
            request_id=message._request_id or message.id or "",
        )
