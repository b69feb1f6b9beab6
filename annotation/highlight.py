"""Marking judges' evidence quotes inside a reply, safely.

Model output is untrusted. The reply is never searched or marked as HTML: quotes are located in
the *raw* text (up to whitespace and curly quotes, as evidence grading does), and the output is
built from escaped slices of that text with our own ``<mark>`` tags between them. A reply
containing ``<script>`` therefore stays text, inside or outside a mark.

Time and memory are linear in the reply plus the marks: each quote is one regular expression
searched over the raw text, and the marks are laid out from their boundaries alone (no
per-character state). Quotes are looked for in the reply's first
``PROACTBENCH_EVIDENCE_MAX_CHARS`` characters, as in grading.
"""

import re
from collections import Counter

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from benchmark.evaluation.evidence import max_graded_chars, normalise, split_fragments

_SAME_QUOTE = {'"': '["“”„]', "'": "['‘’‚]"}


def _pattern(fragment: str) -> re.Pattern[str] | None:
    """The fragment as a pattern over the raw reply: any run of whitespace between its words,
    a straight or curly quote wherever it has one."""
    words = normalise(fragment).split(" ")
    if words == [""]:
        return None
    return re.compile(
        r"\s+".join("".join(_SAME_QUOTE.get(c) or re.escape(c) for c in word) for word in words)
    )


def quote_spans(reply: str, evidence: str) -> list[tuple[int, int]]:
    """Where the evidence's fragments occur in the reply: (start, end) offsets into ``reply``."""
    searched = reply[: max_graded_chars()]
    spans = []
    for fragment in split_fragments(evidence) or [evidence.strip(' "')]:
        pattern = _pattern(fragment.strip())
        if pattern is not None:
            spans += [match.span() for match in pattern.finditer(searched)]
    return spans


def highlight(reply: str, marks: list[tuple[str, str]]) -> SafeString:
    """The reply as HTML with each (css class, evidence) quote marked. Overlapping quotes get
    one mark carrying both classes."""
    # +1 where a class's span opens, -1 where it closes; a class is on while its count is > 0.
    changes: dict[int, Counter[str]] = {}
    for css_class, evidence in marks:
        for start, end in quote_spans(reply, evidence):
            changes.setdefault(start, Counter())[css_class] += 1
            changes.setdefault(end, Counter())[css_class] -= 1
    active: Counter[str] = Counter()
    out: list[str] = []
    previous = 0
    for boundary in sorted(changes):
        after = +(active + changes[boundary])  # + drops classes whose spans have all closed
        if set(after) != set(active):
            out.append(_piece(reply[previous:boundary], active))
            previous = boundary
        active = after
    out.append(_piece(reply[previous:], active))
    return mark_safe("".join(out))  # noqa: S308 — every piece of the reply is escaped in _piece


def _piece(text: str, active: Counter[str]) -> str:
    if not text:
        return ""
    if active:
        return f'<mark class="evidence {" ".join(sorted(active))}">{escape(text)}</mark>'
    return str(escape(text))
