"""The Anthropic Messages adapter.

The Messages API has no "system" role: system text is a separate ``system`` parameter, and it
requires ``max_tokens``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from benchmark.providers.base import ChatMessage, ChatRequest, ChatResult, ImagePart
from benchmark.providers.images import anthropic_image_tokens, base64_data
from benchmark.providers.ratelimit_headers import ObservedLimits, anthropic_limits
from benchmark.providers.registry import ProviderSpec, register
from benchmark.providers.sdk import SDKProvider

if TYPE_CHECKING:
    import anthropic

ANTHROPIC = "anthropic"
DEFAULT_MAX_TOKENS = 1024
# Parameters with no Anthropic equivalent, dropped rather than sent (the API rejects unknown
# fields), so one endpoint configuration can be shared across vendors.
_UNSUPPORTED_PARAMS = frozenset({"seed"})


class AnthropicMessagesProvider(SDKProvider):
    """Parameter mapping: ``max_tokens`` (default 1024), ``stop`` → ``stop_sequences``, ``seed``
    dropped; everything else (temperature, top_p, top_k, thinking, …) is sent as given.
    Every system message, wherever it stands, goes into ``system`` (joined by blank lines).
    An empty reply is one with no text blocks, e.g. a refusal or a budget spent on thinking."""

    vendor = ANTHROPIC
    reserved_params = frozenset({"model", "messages", "system", "stream"})

    # The SDK is imported when a client is built, not with this module: the registry imports
    # every adapter in every process, and the SDK costs about 1.5 s of CPU (retry.py).
    def _make_client(self, options: dict[str, Any]) -> anthropic.Anthropic:
        import anthropic

        return anthropic.Anthropic(**options)

    def _make_async_client(self, options: dict[str, Any]) -> anthropic.AsyncAnthropic:
        import anthropic

        # aiohttp under the SDK's HTTP layer, as for OpenAI (openai_chat.py says why).
        return anthropic.AsyncAnthropic(**options, http_client=anthropic.DefaultAioHttpClient())

    def _send(self, client: Any, kwargs: dict[str, Any], timeout_s: float) -> Any:
        return client.messages.with_raw_response.create(**kwargs, timeout=timeout_s)

    def _rate_limits(self, headers: Mapping[str, str]) -> ObservedLimits:
        return anthropic_limits(headers)

    def _max_output_tokens(self, params: dict[str, Any]) -> int | None:
        return params.get("max_tokens") or DEFAULT_MAX_TOKENS

    def _create_kwargs(self, request: ChatRequest, params: dict[str, Any]) -> dict[str, Any]:
        extra = {k: v for k, v in params.items() if k not in _UNSUPPORTED_PARAMS}
        kwargs: dict[str, Any] = {
            "model": request.model,
            "max_tokens": extra.pop("max_tokens", None) or DEFAULT_MAX_TOKENS,
            "messages": [self._message(m) for m in request.messages if m.role != "system"],
        }
        # _user_images refuses a system message's images, which ``system`` (text) cannot carry.
        system = "\n\n".join(
            m.content for m in request.messages if m.role == "system" and not self._user_images(m)
        )
        if system:
            kwargs["system"] = system
        if "stop" in extra:
            stop = extra.pop("stop")
            kwargs["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop or [])
        if extra:
            # The SDK no longer names temperature/top_p/top_k; the API still takes them.
            kwargs["extra_body"] = extra
        return kwargs

    def _image_tokens(self, image: ImagePart) -> int:
        return anthropic_image_tokens(image)

    def _message(self, message: ChatMessage) -> dict[str, Any]:
        """A text-only message keeps plain string content; a user message with images becomes
        content blocks: its text (left out when empty: the API refuses an empty text block),
        then one base64 image block per image, in corpus order."""
        images = self._user_images(message)
        if not images:
            return {"role": message.role, "content": message.content}
        blocks: list[dict[str, Any]] = []
        if message.content.strip():
            blocks.append({"type": "text", "text": message.content})
        blocks += [
            {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": image.media_type,
                    "data": base64_data(image),
                },
            }
            for image in images
        ]
        return {"role": message.role, "content": blocks}

    def _result(self, message: Any, latency_s: float, attempts: int) -> ChatResult:
        blocks = getattr(message, "content", None) or []
        text = "".join(block.text for block in blocks if getattr(block, "type", "") == "text")
        if not text.strip():
            raise self._empty_reply(f"stop_reason={message.stop_reason}")
        usage = message.usage
        # Anthropic counts cached prompt tokens apart from input_tokens; add them back so that
        # input_tokens means "the whole prompt", as it does for OpenAI. Image tokens are part
        # of input_tokens already.
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


register(ProviderSpec(ANTHROPIC, "Anthropic", AnthropicMessagesProvider.from_connection))
