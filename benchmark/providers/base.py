"""The provider interface: one chat completion in, text plus accounting out.

Everything above this layer (curation, evaluation, judging) talks to a ``ChatProvider`` and never
to a vendor SDK, so the replay provider can stand in for any model and tests can drive the real
SDKs against local servers that speak each vendor's wire format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class ImagePart:
    """One image a user turn carries (multimodal turns, issue #18).

    ``data`` is the image file's bytes exactly as stored (already validated by Pillow on the way
    in); ``media_type`` its MIME type ("image/png", "image/jpeg", …); ``sha256`` the hex digest
    of ``data``, which the replay provider keys recordings by; ``alt`` the corpus's alt text
    (never sent to a model as the image's substitute, but kept for display).
    """

    media_type: str
    data: bytes
    sha256: str
    alt: str = ""


@dataclass(frozen=True)
class ChatMessage:
    """One chat message. ``images`` (user messages only) follow the text, in corpus order."""

    role: Role
    content: str
    images: tuple[ImagePart, ...] = ()


@dataclass(frozen=True)
class ReplayKey:
    """Identifies a recorded reply for the ``replay`` provider. Never sent to a vendor.

    ``kind`` is "reply" (a model's answer at a trigger), "judgment" (a judge's verdict on one),
    "failure_mode" (a classifier's label for one), "pairwise" (a pairwise judge's choice between
    two replies at a trigger) or "curation" (a curation agent's answer while writing dialogue
    ``unique_id_eval``); ``judge`` names the judge or classifier, ``agent`` the curation agent
    ("planner", "user_agent" or "assistant"). A curation key has no condition. A pairwise key's
    ``model`` and ``condition`` are the reply shown first (Response 1), ``other_model`` and
    ``other_condition`` the one shown second: the two orders are two keys.
    """

    kind: Literal["reply", "judgment", "failure_mode", "pairwise", "curation"]
    unique_id_eval: str
    turn: int
    model: str
    condition: str
    judge: str = ""
    agent: str = ""
    other_model: str = ""
    other_condition: str = ""


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: tuple[ChatMessage, ...]
    params: dict[str, Any] = field(default_factory=dict)
    """Sampling parameters: temperature, top_p, max_tokens, … (vendor-neutral names)."""
    timeout_s: float = 120.0
    replay_key: ReplayKey | None = None

    def payload(self) -> dict[str, Any]:
        """What identifies the call for caching and what tests inspect for isolation. An image
        is identified by its sha256 (under ``images``, only on a message that has any, so a
        text-only call's payload is what it always was)."""
        return {
            "model": self.model,
            "messages": [_message_payload(m) for m in self.messages],
            "params": dict(sorted(self.params.items())),
        }


def _message_payload(message: ChatMessage) -> dict[str, Any]:
    payload: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.images:
        payload["images"] = [image.sha256 for image in message.images]
    return payload


@dataclass(frozen=True)
class ChatResult:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    latency_s: float = 0.0
    attempts: int = 1
    request_id: str = ""


class ProviderError(Exception):
    """A call that failed for good (after retries, or at once for a non-retryable status).

    ``status`` is the HTTP status when there was one; ``retryable`` says whether the failure was
    transient (429, 5xx, connection error, timeout) — relevant to callers that schedule a later
    retry of the whole unit."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.attempts = attempts


class CompletesChat(Protocol):
    """What a synchronous caller needs of a provider: ``complete`` alone. The curation loop takes
    these, so that a provider in front of another (``benchmark/curation/calls.py``: the response
    cache and the call records) need not implement the event-loop half."""

    def complete(self, request: ChatRequest) -> ChatResult:
        """One chat completion, with retries for transient failures. Raises ProviderError."""
        ...


class ChatProvider(CompletesChat, Protocol):
    """A provider: ``complete``, and the same for an event loop (the evaluation engine)."""

    async def acomplete(self, request: ChatRequest) -> ChatResult:
        """``complete`` for an event loop (one loop per provider). Raises ProviderError."""
        ...

    async def aclose(self) -> None:
        """Release what ``acomplete`` opened (on the same loop)."""
        ...
