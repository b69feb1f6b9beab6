"""``{% long_text text %}``: a turn's or a reply's text, cut with "show all" when it is longer
than ``PROACTBENCH_DISPLAY_MAX_CHARS`` (core/long_text.py)."""

from django import template
from django.utils.safestring import SafeString

from core import long_text as texts

register = template.Library()


@register.simple_tag
def long_text(text: str, full_url: str = "") -> SafeString:
    """``full_url``: where "show all" fetches the whole text (a staff page); without it, the
    rest is in the page, folded (the annotation workspace)."""
    return texts.long_text(text or "", full_url=full_url)
