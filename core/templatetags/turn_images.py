"""``{{ turn.images.all|turn_images }}``: a turn's images as thumbnails that zoom
(core/turn_images.py)."""

from django import template
from django.utils.safestring import SafeString

from core.turn_images import turn_images_markup

register = template.Library()


@register.filter
def turn_images(images, zoom_key: bool = False) -> SafeString:
    return turn_images_markup(images, zoom_key=bool(zoom_key))
