"""A turn's images as pages show them (the workspaces' conversations, the audit, the dialogue
page): thumbnails that open the zoom dialog (``components/image_zoom.html``,
``static/js/images.js``), with the corpus's alt text.

Blind by construction: an image's URL is its content's SHA-256 and nothing else (no model,
condition, study or file name), served by ``annotation:turn_image`` only to someone who was
shown its turn, without the file's metadata.
"""

from collections.abc import Iterable
from html import escape
from typing import Protocol

from django.urls import reverse
from django.utils.safestring import SafeString

# The key that zooms the conversation's latest image (every workspace; "?" lists it).
ZOOM_KEY = "z"


class ShownImage(Protocol):
    @property
    def sha256(self) -> str: ...
    @property
    def alt(self) -> str: ...


def image_url(sha256: str) -> str:
    return reverse("annotation:turn_image", args=[sha256])


def turn_images_markup(images: Iterable[ShownImage], *, zoom_key: bool = False) -> SafeString:
    """The images' thumbnails; ``zoom_key``: the first one answers ``ZOOM_KEY``."""
    figures = []
    for n, image in enumerate(images, start=1):
        alt = escape(image.alt or "")
        keys = f' data-keys="{ZOOM_KEY}"' if zoom_key and n == 1 else ""
        label = f"Enlarge image {n}" + (f": {alt}" if alt else "")
        caption = f"<figcaption>{alt}</figcaption>" if alt else ""
        figures.append(
            f'<figure class="turn-image"><button type="button" class="image-zoom"'
            f' data-image-zoom{keys} aria-label="{label}">'
            f'<img src="{escape(image_url(image.sha256))}" alt="{alt}" loading="lazy"'
            f' decoding="async"></button>{caption}</figure>'
        )
    if not figures:
        return SafeString("")
    return SafeString('<div class="turn-images">' + "".join(figures) + "</div>")
