"""Test images: small, valid, and unique per call (random pixels), so that a test's image is
never a file another test stored (the turn-image storage is content-addressed and shared)."""

import base64
import io
import os

from PIL import Image


def image_bytes(fmt: str = "PNG", size: tuple[int, int] = (24, 16), **save) -> bytes:
    image = Image.frombytes("RGB", size, os.urandom(size[0] * size[1] * 3))
    out = io.BytesIO()
    image.save(out, fmt, **save)
    return out.getvalue()


def embedded(data: bytes, media_type: str = "image/png", alt: str = "") -> dict:
    return {
        "type": "image",
        "media_type": media_type,
        "data": base64.b64encode(data).decode(),
        "alt": alt,
    }


def with_images(record: dict, turn_images: dict[str, list[dict]]) -> dict:
    record.setdefault("x_workbench", {})["turn_images"] = turn_images
    return record


def stored_turn_image(turn, data: bytes | None = None, *, position: int = 0, alt: str = ""):
    """A turn image stored as an import stores it (the files in the turn-image storage, its
    metadata-free copy beside it), attached to ``turn``."""
    from benchmark.corpus.images import ImageStore, store_part
    from benchmark.models import TurnImage

    data = image_bytes() if data is None else data
    checked = store_part(data, {}, ImageStore())
    return TurnImage.objects.create(
        turn=turn,
        position=position,
        file=checked.name,
        sha256=checked.sha256,
        media_type=checked.media_type,
        width=checked.width,
        height=checked.height,
        byte_size=checked.byte_size,
        alt=alt,
    )


def tagged_jpeg(*secrets: str) -> bytes:
    """A JPEG whose EXIF (Make, Software, description) carries ``secrets``."""
    exif = Image.Exif()
    for tag, text in zip((0x010F, 0x0131, 0x010E), secrets, strict=False):
        exif[tag] = text
    return image_bytes("JPEG", exif=exif.tobytes(), quality=90)
