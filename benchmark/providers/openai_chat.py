"""The OpenAI Chat Completions adapter — also for every OpenAI-compatible server (vLLM, Ollama,
LM Studio, gateways), selected by ``base_url``.

Chat Completions rather than the Responses API because it is the format compatible servers
actually implement. One ``openai.OpenAI`` client per provider: it is thread-safe and its
connection pool is what makes many concurrent calls cheap, so share the provider between threads.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from benchmark.providers.base import ChatRequest, ChatResult, ProviderError
from benchmark.providers.ratelimit import EndpointLimiter, estimate_request_tokens
from benchmark.providers.retry import (
    atimed_call_with_retries,
    reject_reserved,
    timed_call_with_retries,
)

# Vendor-neutral names the SDK takes as keyword arguments; any other parameter goes into the
# body unchanged (``extra_body``), so a server's own knobs (top_k, repetition_penalty, …) work.
_NAMED_PARAMS = ("temperature", "top_p", "seed", "stop")
_RESERVED_PARAMS = frozenset({"model", "messages", "stream"})


class OpenAIChatProvider:
    """``complete`` is safe to call from many threads at once.

    ``max_tokens_param`` is the body field the vendor-neutral ``max_tokens`` is sent as: OpenAI's
    reasoning models accept only ``max_completion_tokens``, while many compatible servers know
    only ``max_tokens``. ``default_params`` (the endpoint's) are overridden by the request's.

    An empty reply (null or blank content — e.g. the whole budget went to reasoning, or a content
    filter) is a non-retryable ``ProviderError``: sent again, the same request usually ends the
    same way, and callers decide whether to resample."""

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
        max_tokens_param: str = "max_tokens",
        vendor: str = "openai",
    ) -> None:
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.vendor = vendor
        self._sleep, self._asleep = sleep, asleep
        self._limiter = limiter or EndpointLimiter()
        self._default_params = dict(default_params or {})
        self._max_tokens_param = max_tokens_param
        self._secrets = (api_key,)
        self._client_options = {
            "base_url": base_url,
            "api_key": api_key,
            "timeout": timeout_s,
            "max_retries": 0,
        }
        self._client = openai.OpenAI(**self._client_options)
        self._aclient: openai.AsyncOpenAI | None = None

    def complete(self, request: ChatRequest) -> ChatResult:
        """One chat completion. The timeout is the tighter of the request's and the provider's;
        ``latency_s`` is that of the successful attempt alone (no backoff, no limiter wait)."""
        kwargs, timeout_s, estimated_tokens = self._prepare(request)

        def send() -> Any:
            # The SDK's own client and HTTP stack, but its generic post: the typed create()
            # re-walks every message through TypedDict transforms, which cost more CPU than the
            # rest of a call at benchmark volume (bench/pipeline.py).
            return self._client.post(
                "/chat/completions",
                body=kwargs,
                cast_to=ChatCompletion,
                options={"timeout": timeout_s},
            )

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
            # aiohttp under the SDK's HTTP layer: the default async pool scans every pooled
            # connection on each request, which dominated a worker's CPU at 64 calls in flight.
            self._aclient = openai.AsyncOpenAI(
                **self._client_options, http_client=openai.DefaultAioHttpClient()
            )
        client = self._aclient

        def send() -> Any:
            return client.post(
                "/chat/completions",
                body=kwargs,
                cast_to=ChatCompletion,
                options={"timeout": timeout_s},
            )

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
        params = {**self._default_params, **request.params}
        kwargs = self._create_kwargs(request, params)
        estimated_tokens = estimate_request_tokens(
            request.messages, max_output_tokens=params.get("max_tokens")
        )
        return kwargs, min(request.timeout_s, self.timeout_s), estimated_tokens

    def _create_kwargs(self, request: ChatRequest, params: dict[str, Any]) -> dict[str, Any]:
        reject_reserved(params, _RESERVED_PARAMS)
        extra = dict(params)
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        }
        for name in _NAMED_PARAMS:
            if name in extra:
                kwargs[name] = extra.pop(name)
        if "max_tokens" in extra:
            kwargs[self._max_tokens_param] = extra.pop("max_tokens")
        kwargs.update(extra)  # anything else goes into the body as it is
        return kwargs

    def _result(self, completion: Any, latency_s: float, attempts: int) -> ChatResult:
        if isinstance(completion, str):
            # The SDK hands back the raw text when the response is not JSON at all: a web page,
            # typically, because base_url points at something that is not an API.
            raise ProviderError(
                f"{self.vendor} answered with something other than JSON; check the base URL",
                status=200,
                retryable=False,
            )
        choices = getattr(completion, "choices", None) or []
        if not choices:
            # Some gateways report an upstream failure as a 200 carrying an "error" object.
            error = getattr(completion, "error", None)
            detail = f": {str(error)[:300]}" if error else ""
            raise ProviderError(
                f"{self.vendor} sent a response without choices{detail}", status=200, retryable=True
            )
        choice = choices[0]
        text = getattr(choice.message, "content", None) if choice.message else None
        if not text or not text.strip():
            raise ProviderError(
                f"{self.vendor} returned an empty reply (finish_reason={choice.finish_reason})",
                status=200,
                retryable=False,
            )
        usage = completion.usage
        details = getattr(usage, "completion_tokens_details", None) if usage else None
        completion_tokens = (usage.completion_tokens or 0) if usage else 0
        reasoning_tokens = (getattr(details, "reasoning_tokens", None) or 0) if details else 0
        return ChatResult(
            text=text,
            input_tokens=(usage.prompt_tokens or 0) if usage else 0,
            # OpenAI's completion_tokens include the reasoning tokens; ChatResult keeps the two
            # apart (ModelPrice.cost bills output + reasoning), so subtract them here.
            output_tokens=max(0, completion_tokens - reasoning_tokens),
            reasoning_tokens=reasoning_tokens,
            latency_s=latency_s,
            attempts=attempts,
            request_id=completion._request_id or completion.id or "",
        )
