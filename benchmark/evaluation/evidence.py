"""Does a judge's evidence quote really occur in the reply?

Two uses, two strictness levels:

- ``quote_in_reply`` — for judges run here: the quote must occur verbatim, normalising only
  whitespace and quote characters (curly vs straight). Anything else is re-asked, then a
  ``judge_error``; a verdict is never kept on an unverifiable quote.
- ``grade_evidence`` — for imported results, where the release's judge often joined several
  fragments with "…", "and", "Also:" or " / ", with Markdown and curly quotes. Each fragment is
  graded exact / close / not found and the share found is reported, never silently trusted or
  discarded. "Exact" = found up to whitespace and quote characters. "Close" = found once case,
  punctuation, Markdown markup and bullets are dropped from both texts (``loose``), or found so
  with at most ``2 + length // 20`` one-character insertions or deletions (a typo; in a longer
  quote, a short word added or left out) — not a paraphrase, which rewrites more than that.

Grading (and the adjudication highlighter, annotation/highlight.py) run in time and memory
linear in the reply — str.find, regular expressions and rapidfuzz's bit-parallel alignment, in
place of difflib's quadratic SequenceMatcher — and look at most at the reply's first
``PROACTBENCH_EVIDENCE_MAX_CHARS`` characters: a quote only beyond them is "not found".
"""

import re
from dataclasses import dataclass

from django.conf import settings
from rapidfuzz import fuzz
from rapidfuzz.distance import Indel

_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "‚": "'", "`": "`"})


def straighten_quotes(text: str) -> str:
    """Curly quotes as straight ones, character for character (offsets are kept)."""
    return text.translate(_QUOTES)


class _WordsOnly(dict):
    """A ``str.translate`` table sending every character that is not a letter or digit —
    punctuation, Markdown markup, bullets, arrows, quote marks, whitespace — to a space, built
    lazily per character seen (CPython caches ASCII lookups, so a long reply translates at
    memory speed)."""

    def __missing__(self, code: int) -> int:
        value = code if chr(code).isalnum() else 32
        self[code] = value
        return value


_WORDS_ONLY = _WordsOnly()
_QUOTED = re.compile(r'"([^"]{3,})"')
_SEPARATORS = re.compile(r"\s*(?:…|\.\.\.|\s/\s|;|\bAlso:|\band\b)\s*")
MIN_FRAGMENT_CHARS = 8


def close_edits_allowed(length: int) -> int:
    """One-character insertions/deletions a "close" fragment of ``length`` (loose) characters
    may differ by: a typo is 1–2, a word added or left out its length + 1; a paraphrase
    rewrites more than a twentieth of the text."""
    return 2 + length // 20


def max_graded_chars() -> int:
    return settings.PROACTBENCH_EVIDENCE_MAX_CHARS


def normalise(text: str) -> str:
    """Whitespace and quote characters only."""
    return " ".join(straighten_quotes(text).split())


def loose(text: str) -> str:
    """Lower case, only letters and digits: words separated by one space. So "**bold**," and
    "bold," read alike, and so do "1. Check" in a list and "1. Check" quoted inline: a list
    number is kept (as the word "1") on both sides, never dropped from one only."""
    return " ".join(text.lower().translate(_WORDS_ONLY).split())


def quote_in_reply(quote: str, reply: str) -> bool:
    needle = normalise(quote).strip('"').strip()
    return bool(needle) and needle in normalise(reply)


def split_fragments(evidence: str) -> list[str]:
    """The quoted fragments of an evidence string (or its separator-split pieces)."""
    text = straighten_quotes(evidence)
    quoted = [q.strip() for q in _QUOTED.findall(text)]
    pieces = quoted or [p.strip(' "') for p in _SEPARATORS.split(text)]
    fragments = []
    for piece in pieces:
        # A quoted fragment may itself elide with an ellipsis: grade each side.
        fragments += [p.strip(" ,.;:") for p in re.split(r"…|\.\.\.", piece)]
    return [f for f in fragments if len(f) >= MIN_FRAGMENT_CHARS]


@dataclass(frozen=True)
class EvidenceGrade:
    status: str  # exact | close | not_found | none (EvidenceStatus values)
    found_share: float | None
    fragments: tuple[tuple[str, str], ...]  # (fragment, exact|close|not_found)


class _Reply:
    """The reply's normalised and loose forms, each made once and only when needed."""

    def __init__(self, reply: str) -> None:
        self.text = reply[: max_graded_chars()]
        self._norm: str | None = None
        self._loose: str | None = None

    @property
    def norm(self) -> str:
        if self._norm is None:
            self._norm = normalise(self.text)
        return self._norm

    @property
    def loose(self) -> str:
        if self._loose is None:
            self._loose = loose(self.text)
        return self._loose


def _edits_in_best_window(needle: str, haystack: str) -> int | None:
    """The fewest insertions/deletions turning ``needle`` into some stretch of ``haystack``,
    when that is within the "close" allowance (else None). rapidfuzz finds where the needle
    aligns best (bit-parallel, linear in the haystack); the count is then taken over that
    window widened by the allowance, not charging the window's unmatched ends."""
    allowed = close_edits_allowed(len(needle))
    cutoff = 100 * (1 - allowed / (2 * len(needle)))
    best = fuzz.partial_ratio_alignment(needle, haystack, score_cutoff=max(cutoff - 10, 0))
    if best is None:
        return None
    window = haystack[max(best.dest_start - allowed, 0) : best.dest_end + allowed]
    ops = list(Indel.opcodes(needle, window))
    # Unmatched characters of the window before the first and after the last match are the
    # window's slack, not edits.
    while ops and ops[0].tag == "insert":
        ops.pop(0)
    while ops and ops[-1].tag == "insert":
        ops.pop()
    edits = sum(
        (op.src_end - op.src_start) + (op.dest_end - op.dest_start)
        for op in ops
        if op.tag != "equal"
    )
    return edits if edits <= allowed else None


def _grade_fragment(fragment: str, reply: _Reply) -> str:
    exact = normalise(fragment)
    # Found in the raw text ⇒ found in the normalised one (the needle's single spaces sit
    # between non-space characters), and most quotes are: skip normalising the reply for them.
    if exact in reply.text or exact in reply.norm:
        return "exact"
    needle = loose(fragment)
    if not needle:
        return "not_found"
    if needle in reply.loose:
        return "close"
    if _edits_in_best_window(needle, reply.loose) is not None:
        return "close"
    return "not_found"


def grade_evidence(evidence: str, reply: str) -> EvidenceGrade:
    fragments = split_fragments(evidence)
    if not fragments:
        return EvidenceGrade("none", None, ())
    graded_reply = _Reply(reply)
    graded = tuple((f, _grade_fragment(f, graded_reply)) for f in fragments)
    grades = [g for _, g in graded]
    found = sum(g != "not_found" for g in grades)
    if all(g == "exact" for g in grades):
        status = "exact"
    elif found == 0:
        status = "not_found"
    else:
        status = "close"
    return EvidenceGrade(status, found / len(grades), graded)
