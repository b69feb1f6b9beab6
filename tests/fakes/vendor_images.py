"""How the fake vendor server checks a request's content parts, the way the real APIs do.

A message's ``content`` is either a string or a list of parts. The fake validates the parts'
shapes, decodes every image (base64, then Pillow: a corrupt or mislabelled file is refused as the
vendor refuses it), and answers a model it was told cannot see with that vendor's error for an
image sent to a text-only model. The messages are the vendors' own wording (as of 2026), with
OpenAI's ``param`` paths and Anthropic's ``messages.N.content.M…`` field paths.

``image_tokens`` is what the fake bills per image in the usage it reports: a fixed figure (a
1024×1024 image at OpenAI's high detail), so a test can tell image tokens from text tokens.
"""

from __future__ import annotations

import base64
import binascii
import io
from dataclasses import dataclass
from typing import Any, Literal

from PIL import Image, UnidentifiedImageError

Api = Literal["openai", "anthropic"]

FAKE_IMAGE_TOKENS = 765
"""Billed per image in the fake's usage (OpenAI: 85 + 170 × 4 tiles for a 1024×1024 image)."""

SUPPORTED_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_PILLOW_FORMATS = {
    "JPEG": "image/jpeg",
    "PNG": "image/png",
    "GIF": "image/gif",
    "WEBP": "image/webp",
}

OPENAI_TEXT_ONLY_MODEL = "Invalid content type. image_url is only supported by certain models."
OPENAI_INVALID_IMAGE = (
    "You uploaded an unsupported image. Please make sure your image has of one the following "
    "formats: ['png', 'jpeg', 'gif', 'webp']."
)
ANTHROPIC_COULD_NOT_PROCESS = "Could not process image"


@dataclass(frozen=True)
class ContentProblem:
    """Why the vendor would refuse the request: HTTP 400, ``invalid_request_error``."""

    message: str
    param: str | None = None
    """OpenAI's ``error.param`` (Anthropic writes its path into the message)."""
    code: str | None = None
    """OpenAI's ``error.code``."""


def content_problem(api: Api, body: dict[str, Any], *, text_only: bool) -> ContentProblem | None:
    """The first thing wrong with the request's messages, or None. ``text_only``: the model
    named in the request cannot take images."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None  # the shape of everything else is not what these fakes check
    check = _openai_parts if api == "openai" else _anthropic_blocks
    for m, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            problem = check(m, message.get("role"), content, text_only)
            if problem is not None:
                return problem
    return None


def image_count(body: dict[str, Any]) -> int:
    """Images in the request (either wire format), for the usage the fake reports."""
    count = 0
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            count += sum(
                1
                for part in content
                if isinstance(part, dict) and part.get("type") in ("image_url", "image")
            )
    return count


def _openai_parts(m: int, role: object, parts: list[Any], text_only: bool) -> ContentProblem | None:
    for p, part in enumerate(parts):
        where = f"messages.[{m}].content.[{p}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            if not isinstance(part.get("text"), str):
                return ContentProblem(f"Invalid type for '{where}.text'.", f"{where}.text")
            continue
        if kind != "image_url":
            return ContentProblem(
                f"Invalid value: '{kind}'. Supported values are: 'text', 'image_url', "
                "'input_audio', 'refusal', 'audio', and 'file'.",
                f"{where}.type",
                "invalid_value",
            )
        if role != "user":
            return ContentProblem(
                f"Invalid '{where}.type': image_url is only supported in user messages.",
                f"{where}.type",
            )
        if text_only:
            return ContentProblem(OPENAI_TEXT_ONLY_MODEL, f"{where}.type")
        image_url = part.get("image_url")
        url = image_url.get("url") if isinstance(image_url, dict) else None
        if not isinstance(url, str):
            return ContentProblem(
                f"Missing required parameter: '{where}.image_url.url'.",
                f"{where}.image_url.url",
                "missing_required_parameter",
            )
        if image_url.get("detail", "auto") not in ("auto", "low", "high"):
            return ContentProblem(
                f"Invalid value: '{image_url['detail']}'. Supported values are: 'auto', 'low', "
                "and 'high'.",
                f"{where}.image_url.detail",
                "invalid_value",
            )
        if url.startswith(("http://", "https://")):
            continue  # the fake fetches nothing; a URL is taken as it is
        header, comma, data = url.partition(",")
        media_type = header.removeprefix("data:").removesuffix(";base64")
        if not (header.startswith("data:") and header.endswith(";base64") and comma):
            return ContentProblem(
                f"Invalid '{where}.image_url.url'. Expected a base64-encoded data URL with an "
                "image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got "
                "a value without the 'data:' prefix.",
                f"{where}.image_url.url",
                "invalid_value",
            )
        decoded = _decoded(data)
        if (
            media_type not in SUPPORTED_MEDIA_TYPES
            or decoded is None
            or _identified(decoded) is None
        ):
            return ContentProblem(OPENAI_INVALID_IMAGE, None, "invalid_image_format")
    return None


def _anthropic_blocks(
    m: int, role: object, blocks: list[Any], text_only: bool
) -> ContentProblem | None:
    for b, block in enumerate(blocks):
        where = f"messages.{m}.content.{b}"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                return ContentProblem(f"{where}.text.text: Input should be a valid string")
            if not text:
                return ContentProblem("messages: text content blocks must be non-empty")
            continue
        if kind != "image":
            return ContentProblem(
                f"{where}: Input tag '{kind}' found using 'type' does not match any of the "
                "expected tags: 'text', 'image', 'document', 'tool_use', 'tool_result', "
                "'thinking', 'redacted_thinking'"
            )
        if role != "user":
            return ContentProblem(f"{where}: image content blocks are only allowed in user turns")
        source = block.get("source")
        if not isinstance(source, dict) or source.get("type") != "base64":
            return ContentProblem(f"{where}.image.source: Input should be a base64 image source")
        media_type, data = source.get("media_type"), source.get("data")
        if media_type not in SUPPORTED_MEDIA_TYPES:
            return ContentProblem(
                f"{where}.image.source.base64.media_type: Input should be 'image/jpeg', "
                "'image/png', 'image/gif' or 'image/webp'"
            )
        decoded = _decoded(data) if isinstance(data, str) else None
        if decoded is None:
            return ContentProblem(f"{where}.image.source.base64: invalid base64 data")
        actual = _identified(decoded)
        # No current Claude model is text-only: one told to be answers as for a bad file.
        if text_only or actual is None:
            return ContentProblem(
                f"{where}.image.source.base64.data: {ANTHROPIC_COULD_NOT_PROCESS}"
            )
        if actual != media_type:
            return ContentProblem(
                f"{where}.image.source.base64.data: The image was specified using the "
                f"{media_type} media type, but the image appears to be a {actual} image"
            )
    return None


def _decoded(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _identified(data: bytes) -> str | None:
    """The media type Pillow reads from the file itself, or None if it is no image it knows."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.verify()
            return _PILLOW_FORMATS.get(image.format or "")
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return None
