"""The OpenAI Chat Completions adapter, and its variant for OpenAI-compatible servers (vLLM,
Ollama, LM Studio, gateways) at their own base URL.

Chat Completions rather than the Responses API because it is the format compatible servers
actually implement. Another compatible vendor is one more small subclass of
``OpenAICompatibleProvider`` registered here (or in a module of its own in this package).
"""

from __future__ import annotations

import functools
import itertools
import os
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from benchmark.providers.base import (
    ChatMessage,
    ChatRequest,
    ChatResult,
    ImagePart,
    ProviderError,
)
from benchmark.providers.images import data_url, openai_image_tokens
from benchmark.providers.ratelimit_headers import ObservedLimits, openai_limits
from benchmark.providers.registry import ProviderSpec, register
from benchmark.providers.sdk import SDKProvider

if TYPE_CHECKING:
    import openai

OPENAI = "openai"
OPENAI_COMPATIBLE = "openai-compatible"
NO_KEY_PLACEHOLDER = "not-needed"
"""Sent to compatible servers that need no key (the SDK refuses to run without one)."""

# Vendor-neutral names the SDK takes as keyword arguments; any other parameter goes into the
# body unchanged, so a server's own knobs (top_k, repetition_penalty, …) work.
_NAMED_PARAMS = ("temperature", "top_p", "seed", "stop")


class OpenAIChatProvider(SDKProvider):
    """OpenAI itself. ``max_tokens_param`` is the body field the vendor-neutral ``max_tokens``
    is sent as: OpenAI's reasoning models accept only ``max_completion_tokens``.

    An empty reply is null or blank content: e.g. the whole budget went to reasoning, or a
    content filter."""

    vendor = OPENAI
    reserved_params = frozenset({"model", "messages", "stream"})
    max_tokens_param = "max_completion_tokens"

    # The SDK is imported when a client is built, not with this module: the registry imports
    # every adapter in every process, and the SDK costs about 0.5 s of CPU (retry.py).
    def _make_client(self, options: dict[str, Any]) -> openai.OpenAI:
        import openai

        return openai.OpenAI(**options)

    def _make_async_client(self, options: dict[str, Any]) -> openai.AsyncOpenAI:
        import openai

        # aiohttp under the SDK's HTTP layer: the default async pool scans every pooled
        # connection on each request, which dominated a worker's CPU at 64 calls in flight.
        return openai.AsyncOpenAI(**options, http_client=openai.DefaultAioHttpClient())

    def _send(self, client: Any, kwargs: dict[str, Any], timeout_s: float) -> Any:
        # The SDK's own client and HTTP stack, but its generic post: the typed create()
        # re-walks every message through TypedDict transforms, which cost more CPU than the
        # rest of a call at benchmark volume (bench/pipeline.py). ``cast_to=object`` has the
        # SDK hand back the JSON as it came (``_parse``): building its pydantic ChatCompletion
        # cost ~10 % of a worker's CPU, for the five fields ``_result`` reads.
        # The raw-response header is what ``with_raw_response`` sets: the SDK then answers its
        # raw response, whose headers carry the rate limits (sdk.py).
        # The idempotency key is given, not left to the SDK: it makes one with ``uuid4()``, whose
        # ``os.urandom`` lets go of the GIL, and the event loop then waits for it behind the
        # batch threads (5 % of a worker's samples, bench/pipeline.py). The SDK sends no
        # idempotency header to OpenAI; the key is unique per attempt as the SDK's would be.
        return client.post(
            "/chat/completions",
            body=kwargs,
            cast_to=object,
            options={
                "timeout": timeout_s,
                "headers": {_raw_response_header(): "true"},
                "idempotency_key": _idempotency_key(),
            },
        )

    def _parse(self, raw: Any) -> Any:
        """The response's JSON object with its request id; the text of a body that is not JSON,
        as the SDK's ``parse()`` answers it (``_checked_result`` refuses it); JSON that is not
        an object reads as an object without choices (``_result`` refuses it)."""
        data = raw.parse()
        if isinstance(data, str):
            return data
        return _Completion(data if isinstance(data, dict) else {}, raw.request_id or "")

    def _rate_limits(self, headers: Mapping[str, str]) -> ObservedLimits:
        return openai_limits(headers)

    def _create_kwargs(self, request: ChatRequest, params: dict[str, Any]) -> dict[str, Any]:
        extra = dict(params)
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": [self._message(m) for m in request.messages],
        }
        for name in _NAMED_PARAMS:
            if name in extra:
                kwargs[name] = extra.pop(name)
        if "max_tokens" in extra:
            kwargs[self.max_tokens_param] = extra.pop("max_tokens")
        kwargs.update(extra)  # anything else goes into the body as it is
        return kwargs

    def _image_tokens(self, image: ImagePart) -> int:
        return openai_image_tokens(image)

    def _message(self, message: ChatMessage) -> dict[str, Any]:
        """A text-only message keeps plain string content (what every compatible server takes);
        a user message with images becomes content parts: its text, then each image as a data
        URL, in corpus order. An empty text part is left out (nothing to say beside the image)."""
        images = self._user_images(message)
        if not images:
            return {"role": message.role, "content": message.content}
        parts: list[dict[str, Any]] = []
        if message.content.strip():
            parts.append({"type": "text", "text": message.content})
        parts += [{"type": "image_url", "image_url": {"url": data_url(image)}} for image in images]
        return {"role": message.role, "content": parts}

    def _result(self, completion: Any, latency_s: float, attempts: int) -> ChatResult:
        body = completion.body
        choices = body.get("choices") or []
        if not choices:
            # Some gateways report an upstream failure as a 200 carrying an "error" object.
            error = body.get("error")
            detail = f": {str(error)[:300]}" if error else ""
            raise ProviderError(
                f"{self.vendor} sent a response without choices{detail}", status=200, retryable=True
            )
        choice = choices[0] or {}
        message = choice.get("message") or {}
        text = message.get("content")
        if not isinstance(text, str) or not text.strip():
            raise self._empty_reply(f"finish_reason={choice.get('finish_reason')}")
        usage = body.get("usage") or {}
        # prompt_tokens already counts the images (prompt_tokens_details only breaks out cached
        # and audio tokens), so input_tokens, and the cost billed from it, include them.
        details = usage.get("completion_tokens_details") or {}
        completion_tokens = usage.get("completion_tokens") or 0
        reasoning_tokens = details.get("reasoning_tokens") or 0
        return ChatResult(
            text=text,
            input_tokens=usage.get("prompt_tokens") or 0,
            # OpenAI's completion_tokens include the reasoning tokens; ChatResult keeps the two
            # apart (ModelPrice.cost bills output + reasoning), so subtract them here.
            output_tokens=max(0, completion_tokens - reasoning_tokens),
            reasoning_tokens=reasoning_tokens,
            latency_s=latency_s,
            attempts=attempts,
            request_id=completion.request_id or str(body.get("id") or ""),
        )


class OpenAICompatibleProvider(OpenAIChatProvider):
    """The same wire format at any base URL. What differs from OpenAI: the endpoint must give
    the URL and need not name a key (both said in its registration below), the name in
    messages, and ``max_tokens``, which keeps its name because many compatible servers do not
    know ``max_completion_tokens``."""

    vendor = OPENAI_COMPATIBLE
    max_tokens_param = "max_tokens"

    def __init__(self, *, api_key: str, **options: Any) -> None:
        super().__init__(api_key=api_key or NO_KEY_PLACEHOLDER, **options)


register(ProviderSpec(OPENAI, "OpenAI", OpenAIChatProvider.from_connection))
register(
    ProviderSpec(
        OPENAI_COMPATIBLE,
        "OpenAI-compatible (vLLM, Ollama, …)",
        OpenAICompatibleProvider.from_connection,
        needs_api_key=False,
        needs_base_url=True,
    )
)


class _Completion(NamedTuple):
    """A chat completion as the server sent it (its JSON object), and its request id (the
    ``x-request-id`` header)."""

    body: dict[str, Any]
    request_id: str


@functools.cache
def _raw_response_header() -> str:
    """The header ``with_raw_response`` sets, from the SDK the client's construction imported."""
    from openai._constants import RAW_RESPONSE_HEADER

    return RAW_RESPONSE_HEADER


_idempotency_prefix = f"proactbench-{uuid.uuid4().hex}"
_idempotency_counter = itertools.count()  # next() on it is atomic: threads may share it


def _idempotency_key() -> str:
    """A key no other attempt has, in this or any process, without a system call."""
    return f"{_idempotency_prefix}-{os.getpid()}-{next(_idempotency_counter)}"
