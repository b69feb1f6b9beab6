"""Real image files for the provider tests, drawn with Pillow."""

import hashlib
import io

from PIL import Image

from benchmark.providers.base import ImagePart


def image_part(
    width: int = 64,
    height: int = 48,
    *,
    color: str = "navy",
    file_format: str = "PNG",
    media_type: str = "",
    alt: str = "",
) -> ImagePart:
    """A ``width`` × ``height`` file of one colour; ``media_type`` defaults to the format's."""
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buffer, format=file_format)
    data = buffer.getvalue()
    return ImagePart(
        media_type=media_type or f"image/{file_format.lower()}",
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
        alt=alt,
    )


def raw_part(data: bytes, media_type: str = "image/png") -> ImagePart:
    """Bytes that claim to be an image (whether or not they are)."""
    return ImagePart(media_type=media_type, data=data, sha256=hashlib.sha256(data).hexdigest())
