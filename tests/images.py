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
