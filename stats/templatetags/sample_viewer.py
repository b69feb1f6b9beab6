"""The sample viewer's markup: a reply with its judges' evidence marked (one highlighter,
``annotation.highlight``, on the rendered Markdown and the raw text) and the evidence-status
badge."""

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from annotation.highlight import highlight
from benchmark.models import EvidenceStatus

register = template.Library()

# The badge's word per status; its title is the status's full label.
BADGE_TEXT = {
    EvidenceStatus.EXACT: "exact",
    EvidenceStatus.CLOSE: "close",
    EvidenceStatus.NOT_FOUND: "not found",
    EvidenceStatus.NONE: "no evidence",
}


@register.simple_tag
def highlight_reply(reply: str, marks: list[tuple[str, str]]) -> SafeString:
    """The reply as Markdown beside its raw text, each (css class, quote) marked in both, cut
    with "show all" when long."""
    return highlight(reply or "", marks)


@register.simple_tag
def evidence_badge(status: str) -> SafeString:
    known = status in EvidenceStatus.values
    return format_html(
        '<span class="badge evidence-{}" title="{}">{}</span>',
        status if known else "unknown",
        EvidenceStatus(status).label if known else status,
        BADGE_TEXT[EvidenceStatus(status)] if known else status,
    )
