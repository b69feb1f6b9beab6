"""The half of an SDK-backed adapter that every vendor shares.

``SDKProvider`` owns the constructor options, the clients (each built on its first use: a worker
only ever uses the async one, and building a client costs an SSL context, ~50 ms of CPU), the
parameter merge, the timeout, the limiter's token estimate and the attempt loop
of retry.py. An adapter (openai_chat.py, anthropic_messages.py) says only what is its vendor's:
how to build its clients, how a ``ChatRequest`` becomes the SDK call's arguments, how to send
them, and how the response becomes a ``ChatResult``.

Every attempt reads the response's headers (``_send`` returns the SDK's raw response) and hands
the vendor's rate-limit headers (``_rate_limits``) to the endpoint's limiter, 429s included:
that is how an endpoint without configured limits learns them (ratelimit.py).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, Self

from benchmark.providers.base import ChatMessage, ChatRequest, ChatResult, ImagePart, ProviderError
from benchmark.providers.images import request_images
from benchmark.providers.ratelimit import EndpointLimiter, estimate_request_tokens
from benchmark.providers.ratelimit_headers import ObservedLimits
from benchmark.providers.registry import Connection
from benchmark.providers.retry import (
    atimed_call_with_retries,
    reject_reserved,
    timed_call_with_retries,
)


class SDKProvider(ABC):
    """``complete`` is safe to call from many threads at once: an SDK client is thread-safe and
    its connection pool is what makes many concurrent calls cheap, so build one provider per
    endpoint and process and share it between threads.

    ``default_params`` (the endpoint's) are overridden by the request's. An empty reply is a
    non-retryable ``ProviderError``: sent again, the same request usually ends the same way, and
    callers decide whether to resample."""

    vendor: ClassVar[str]
    """Names the vendor in error messages."""
    reserved_params: ClassVar[frozenset[str]]
    """Set by the adapter itself: neither an endpoint's nor a request's params may set them."""

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
    ) -> None:
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self._sleep, self._asleep = sleep, asleep
        self._limiter = limiter or EndpointLimiter()
        self._default_params = dict(default_params or {})
        self._secrets = (api_key,)
        self._client_options: dict[str, Any] = {
            "base_url": base_url,
            "api_key": api_key,
            "timeout": timeout_s,
            # retry.py retries instead, so every vendor gets one policy and the limiter is
            # consulted before every attempt.
            "max_retries": 0,
        }
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._aclient: Any = None

    @classmethod
    def from_connection(cls, connection: Connection) -> Self:
        """The builder an adapter registers (registry.py)."""
        return cls(
            base_url=connection.base_url,
            api_key=connection.api_key,
            timeout_s=connection.timeout_s,
            limiter=connection.limiter,
            default_params=connection.default_params,
        )

    def complete(self, request: ChatRequest) -> ChatResult:
        """One chat completion. The timeout is the tighter of the request's and the provider's;
        ``latency_s`` is that of the successful attempt alone (no backoff, no limiter wait)."""
        kwargs, timeout_s, estimated_tokens = self._prepare(request)
        with self._client_lock:  # many threads share the provider: build one client
            if self._client is None:
                self._client = self._make_client(self._client_options)
        client = self._client

        def send() -> Any:
            sent_at = time.monotonic()
            try:
                raw = self._send(client, kwargs, timeout_s)
            except Exception as exc:
                self._observe_failure(exc, sent_at)
                raise
            self._limiter.observe(self._rate_limits(raw.headers), sent_at=sent_at)
            return self._parse(raw)

        try:
            return timed_call_with_retries(
                send,
                self._checked_result,
                limiter=self._limiter,
                estimated_tokens=estimated_tokens,
                sleep=self._sleep,
                max_attempts=self.max_attempts,
                vendor=self.vendor,
                secrets=self._secrets,
            )
        except ProviderError as error:
            self._raise_if_images_refused(error, request)
            raise

    async def acomplete(self, request: ChatRequest) -> ChatResult:
        """``complete`` on an event loop (the SDK's async client). Call it from one event loop
        only: the async client's connection pool belongs to the loop that first used it."""
        kwargs, timeout_s, estimated_tokens = self._prepare(request)
        if self._aclient is None:
            self._aclient = self._make_async_client(self._client_options)
        client = self._aclient

        async def send() -> Any:
            sent_at = time.monotonic()
            try:
                raw = await self._send(client, kwargs, timeout_s)
            except Exception as exc:
                self._observe_failure(exc, sent_at)
                raise
            self._limiter.observe(self._rate_limits(raw.headers), sent_at=sent_at)
            parsed = self._parse(raw)
            # Anthropic's async raw response parses asynchronously, OpenAI's legacy one not.
            return await parsed if inspect.isawaitable(parsed) else parsed

        try:
            return await atimed_call_with_retries(
                send,
                self._checked_result,
                limiter=self._limiter,
                estimated_tokens=estimated_tokens,
                sleep=self._asleep,
                max_attempts=self.max_attempts,
                vendor=self.vendor,
                secrets=self._secrets,
            )
        except ProviderError as error:
            self._raise_if_images_refused(error, request)
            raise

    async def aclose(self) -> None:
        """Close the async client's connections (call it on the loop that used them)."""
        if self._aclient is not None:
            await self._aclient.close()
            self._aclient = None

    def _prepare(self, request: ChatRequest) -> tuple[dict[str, Any], float, int]:
        params = {**self._default_params, **request.params}
        reject_reserved(params, self.reserved_params)
        kwargs = self._create_kwargs(request, params)
        estimated_tokens = estimate_request_tokens(
            request.messages,
            max_output_tokens=self._max_output_tokens(params),
            image_tokens=self._image_tokens,
        )
        return kwargs, min(request.timeout_s, self.timeout_s), estimated_tokens

    def _parse(self, raw: Any) -> Any:
        """What ``_result`` reads, from the SDK's raw response: by default its ``parse()`` (an
        awaitable for an async raw response that parses asynchronously)."""
        return raw.parse()

    def _observe_failure(self, exc: Exception, sent_at: float) -> None:
        """A vendor's error response (the SDKs' ``APIStatusError``) carries the rate-limit
        headers too; a 429 also tells the limiter its buckets were out of step."""
        response = getattr(exc, "response", None)
        status = getattr(exc, "status_code", None)
        if response is not None and isinstance(status, int):
            self._limiter.observe(
                self._rate_limits(response.headers), refused=status == 429, sent_at=sent_at
            )

    def _rate_limits(self, headers: Mapping[str, str]) -> ObservedLimits:
        """The vendor's rate-limit headers read (ratelimit_headers.py); none by default."""
        return ObservedLimits()

    def _raise_if_images_refused(self, error: ProviderError, request: ChatRequest) -> None:
        """A 400 to a request that carried images says so: the vendor's message names a field
        path at best, and the usual cause (a model that takes no images, or a file it cannot
        read) is not retryable. Anything else is left to propagate unchanged."""
        count = len(request_images(request.messages))
        if error.status != 400 or not count:
            return
        raise ProviderError(
            f"{error} — the request carried {count} image(s): the model may not accept images, "
            "or one of them is not an image it can read",
            status=400,
            retryable=False,
            attempts=error.attempts,
        ) from error

    def _max_output_tokens(self, params: dict[str, Any]) -> int | None:
        """The output budget the limiter counts a call for (None: its default estimate)."""
        return params.get("max_tokens")

    def _checked_result(self, response: Any, latency_s: float, attempts: int) -> ChatResult:
        if isinstance(response, str):
            # The SDKs hand back the raw text when the response is not JSON at all: a web page,
            # typically, because base_url points at something that is not an API.
            raise ProviderError(
                f"{self.vendor} answered with something other than JSON; check the base URL",
                status=200,
                retryable=False,
            )
        return self._result(response, latency_s, attempts)

    def _empty_reply(self, reason: str) -> ProviderError:
        """``reason``: the vendor's own account of why the reply ended, e.g. ``stop_reason=…``."""
        return ProviderError(
            f"{self.vendor} returned an empty reply ({reason})", status=200, retryable=False
        )

    def _user_images(self, message: ChatMessage) -> tuple[ImagePart, ...]:
        """A message's images; only a user turn may carry any (the vendors take none from the
        assistant, and Anthropic's ``system`` is text only)."""
        if message.images and message.role != "user":
            raise ProviderError(
                f"{self.vendor}: only user messages may carry images, not {message.role} ones",
                retryable=False,
            )
        return message.images

    @abstractmethod
    def _image_tokens(self, image: ImagePart) -> int:
        """The vendor's prompt tokens for one image (``benchmark.providers.images``), for the
        limiter's estimate; the vendor's own count comes back in the usage."""

    @abstractmethod
    def _make_client(self, options: dict[str, Any]) -> Any:
        """The SDK's sync client, from ``base_url``, ``api_key``, ``timeout``, ``max_retries``."""

    @abstractmethod
    def _make_async_client(self, options: dict[str, Any]) -> Any:
        """The SDK's async client, from the same options; it must have an async ``close``."""

    @abstractmethod
    def _create_kwargs(self, request: ChatRequest, params: dict[str, Any]) -> dict[str, Any]:
        """The SDK call's arguments: the request in the vendor's shape, ``params`` mapped (the
        reserved ones are already refused)."""

    @abstractmethod
    def _send(self, client: Any, kwargs: dict[str, Any], timeout_s: float) -> Any:
        """One attempt with either client (the async one returns an awaitable), answering the
        SDK's raw response (``headers`` and ``parse()``: its ``with_raw_response`` form)."""

    @abstractmethod
    def _result(self, response: Any, latency_s: float, attempts: int) -> ChatResult:
        """The parsed response as a ``ChatResult``, or a ``ProviderError`` for a reply that
        cannot be used (no text: see ``_empty_reply``)."""
