"""``{% markdown text %}``: a corpus or model text (a turn, a reply, a rubric, a rationale) as
pages show it — Markdown rendered and sanitised beside the raw text, cut with "show all" when
it is longer than ``PROACTBENCH_DISPLAY_MAX_CHARS`` (core/markdown.py, core/long_text.py)."""

from django import template
from django.utils.safestring import SafeString

from core.markdown import readable

register = template.Library()


@register.simple_tag
def markdown(text: str, full_url: str = "", whole: bool = False) -> SafeString:
    """``full_url``: where "show all" fetches the whole text (a staff page); without it, the
    rest is in the page, folded (the annotation workspace, whose URLs must not tell texts
    apart). ``whole``: never cut (the page that serves ``full_url``)."""
    return readable(text or "", full_url=full_url, whole=whole)
