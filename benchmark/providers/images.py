"""What the providers need to know about a user turn's images (multimodal turns, issue #18):
how each is written into a request, and how many prompt tokens each costs before the vendor
says.

The vendors bill an image by its pixel size, not its byte size, so the rate limiter's estimate
reads each image's width and height: Pillow's ``Image.open`` parses the header only (the pixels
are decoded lazily, and never here), which is cheap whatever the file's size.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Iterable

from PIL import Image, UnidentifiedImageError

from benchmark.providers.base import ChatMessage, ImagePart

UNREADABLE_IMAGE_TOKENS = 1600
"""The estimate for an image whose size cannot be read: about the most either vendor bills for
one image (OpenAI's high detail tops out at 1,445 tokens, Anthropic's resize at ~1,600), so the
limiter errs on the side of waiting."""


def data_url(image: ImagePart) -> str:
    """The image inline, as OpenAI's ``image_url.url`` takes it."""
    return f"data:{image.media_type};base64,{base64.b64encode(image.data).decode('ascii')}"


def base64_data(image: ImagePart) -> str:
    """The image's bytes as Anthropic's ``source.data`` takes them (no ``data:`` prefix)."""
    return base64.b64encode(image.data).decode("ascii")


def image_size(image: ImagePart) -> tuple[int, int] | None:
    """(width, height) from the file's header, or None if Pillow cannot identify it."""
    try:
        with Image.open(io.BytesIO(image.data)) as opened:
            return opened.size
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
        return None


def openai_image_tokens(image: ImagePart) -> int:
    """OpenAI's published formula for a ``detail: high`` (the default "auto" picks it for any
    image above 512×512): fit within 2048×2048, scale the shortest side down to 768, then 85
    tokens plus 170 per 512-pixel tile."""
    size = image_size(image)
    if size is None:
        return UNREADABLE_IMAGE_TOKENS
    width, height = (float(side) for side in size)
    if max(width, height) > 2048:
        scale = 2048 / max(width, height)
        width, height = width * scale, height * scale
    if min(width, height) > 768:
        scale = 768 / min(width, height)
        width, height = width * scale, height * scale
    tiles = math.ceil(width / 512) * math.ceil(height / 512)
    return 85 + 170 * tiles


def anthropic_image_tokens(image: ImagePart) -> int:
    """Anthropic's published rule of thumb: width × height / 750, after the API scales an image
    whose long edge exceeds 1568 pixels down to that edge."""
    size = image_size(image)
    if size is None:
        return UNREADABLE_IMAGE_TOKENS
    width, height = (float(side) for side in size)
    if max(width, height) > 1568:
        scale = 1568 / max(width, height)
        width, height = width * scale, height * scale
    return max(1, math.ceil(width * height / 750))


def request_images(messages: Iterable[ChatMessage]) -> tuple[ImagePart, ...]:
    """Every image the request carries, in the order the messages and their parts give."""
    return tuple(image for message in messages for image in message.images)
