"""Marking judges' evidence quotes inside a reply, safely.

Model output is untrusted. The reply is never searched or marked as HTML: quotes are located in
the *raw* text (up to whitespace and curly quotes, as evidence grading does), and the output is
built from escaped slices of that text with our own ``<mark>`` tags between them. A reply
containing ``<script>`` therefore stays text, inside or outside a mark.

Time and memory are linear in the reply plus the marks: each quote is one regular expression
searched over the raw text, and the marks are laid out from their boundaries alone (no
per-character state). Quotes are looked for in the reply's first
``PROACTBENCH_EVIDENCE_MAX_CHARS`` characters, as in grading. A reply longer than
``PROACTBENCH_DISPLAY_MAX_CHARS`` is shown cut with "show all" (``highlight``), its marks on
both sides of the cut.

Pages show a reply as Markdown beside its raw text (core/markdown.py): the marks are the same
source spans, written into the escaped raw text and carried onto the rendered text by
alignment.
"""

from collections import Counter

from django.utils.safestring import SafeString

from benchmark.evaluation.evidence import max_graded_chars, raw_pattern, split_fragments
from core.long_text import display_cut
from core.markdown import Piece, readable


def quote_spans(reply: str, evidence: str) -> list[tuple[int, int]]:
    """Where the evidence's fragments occur in the reply: (start, end) offsets into ``reply``."""
    searched = reply[: max_graded_chars()]
    spans = []
    for fragment in split_fragments(evidence) or [evidence.strip(' "')]:
        pattern = raw_pattern(fragment.strip())
        if pattern is not None:
            spans += [match.span() for match in pattern.finditer(searched)]
    return spans


def highlight(reply: str, marks: list[tuple[str, str]]) -> SafeString:
    """The reply as pages show it (core/markdown.py: rendered Markdown beside the raw text)
    with each (css class, evidence) quote marked in both; overlapping quotes get one mark
    carrying both classes. A reply longer than the display cap is cut (``_cut``), the rest
    under "show all" (core/long_text.py) and marked there too."""
    pieces = _pieces(reply, marks)
    return readable(reply, pieces=pieces, cut=_cut(reply, pieces), whole=True)


def _cut(reply: str, pieces: list[Piece]) -> int | None:
    """Where a long reply is cut: at the display cap's cut, moved back to where a mark begins
    when it would fall inside one (so a quote reads whole on one side), unless that is more
    than half the shown text away; then the mark is split in two at the cut."""
    cut = display_cut(reply)
    if cut is None:
        return None
    for a, b, on in pieces:
        if a < cut < b:
            if on and a >= cut // 2:
                cut = a
            break
    return cut


def _pieces(reply: str, marks: list[tuple[str, str]]) -> list[Piece]:
    """The reply as consecutive (start, end, classes marking it) pieces, from 0 to its end;
    the classes as one shared string per combination (a reply has thousands of pieces)."""
    # +1 where a class's span opens, -1 where it closes; a class is on while its count is > 0.
    changes: dict[int, Counter[str]] = {}
    for css_class, evidence in marks:
        for start, end in quote_spans(reply, evidence):
            changes.setdefault(start, Counter())[css_class] += 1
            changes.setdefault(end, Counter())[css_class] -= 1
    active: Counter[str] = Counter()
    pieces: list[Piece] = []
    classes: dict[frozenset[str], str] = {}
    previous = 0
    for boundary in sorted(changes):
        after = +(active + changes[boundary])  # + drops classes whose spans have all closed
        if set(after) != set(active):
            if boundary > previous:
                pieces.append((previous, boundary, _classes(active, classes)))
            previous = boundary
        active = after
    pieces.append((previous, len(reply), _classes(active, classes)))
    return pieces


def _classes(active: Counter[str], known: dict[frozenset[str], str]) -> str:
    key = frozenset(active)
    if key not in known:
        known[key] = " ".join(sorted(key))
    return known[key]
