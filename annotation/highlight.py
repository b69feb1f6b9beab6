"""Marking judges' evidence quotes inside a reply, safely.

Model output is untrusted. The reply is never searched or marked as HTML: quotes are located in
the *raw* text (normalising whitespace and curly quotes, as evidence grading does), and the
output is built from escaped slices of that text with our own ``<mark>`` tags between them. A
reply containing ``<script>`` therefore stays text, inside or outside a mark.
"""

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from benchmark.evaluation.evidence import split_fragments, straighten_quotes


def _normalised(text: str) -> tuple[str, list[int]]:
    """``text`` with quote characters straightened and whitespace runs collapsed to one
    space, and for each character kept, its index in ``text``."""
    chars: list[str] = []
    where: list[int] = []
    previous_space = False
    for index, char in enumerate(straighten_quotes(text)):
        if char.isspace():
            if previous_space:
                continue
            char, previous_space = " ", True
        else:
            previous_space = False
        chars.append(char)
        where.append(index)
    return "".join(chars), where


def quote_spans(reply: str, evidence: str) -> list[tuple[int, int]]:
    """Where the evidence's fragments occur in the reply: (start, end) offsets into ``reply``."""
    haystack, where = _normalised(reply)
    spans = []
    for fragment in split_fragments(evidence) or [evidence.strip(' "')]:
        needle, _ = _normalised(fragment.strip())
        if not needle:
            continue
        start = haystack.find(needle)
        while start != -1:
            end = start + len(needle)
            spans.append((where[start], where[end - 1] + 1))
            start = haystack.find(needle, end)
    return spans


def highlight(reply: str, marks: list[tuple[str, str]]) -> SafeString:
    """The reply as HTML with each (css class, evidence) quote marked. Overlapping quotes get
    one mark carrying both classes."""
    classes_at: list[set[str]] = [set() for _ in reply]
    for css_class, evidence in marks:
        for start, end in quote_spans(reply, evidence):
            for position in range(start, end):
                classes_at[position].add(css_class)
    out: list[str] = []
    start = 0
    for position in range(1, len(reply) + 1):
        if position == len(reply) or classes_at[position] != classes_at[start]:
            piece = escape(reply[start:position])
            classes = classes_at[start]
            if classes:
                out.append(f'<mark class="evidence {" ".join(sorted(classes))}">{piece}</mark>')
            else:
                out.append(str(piece))
            start = position
    return mark_safe("".join(out))  # noqa: S308 — every piece of the reply is escaped above
