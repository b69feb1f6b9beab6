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

_CURLY_QUOTES = (("“", '"'), ("”", '"'), ("„", '"'), ("‘", "'"), ("’", "'"), ("‚", "'"))


def straighten_quotes(text: str) -> str:
    """Curly quotes as straight ones, character for character (offsets are kept). One
    ``str.replace`` per quote mark present: ``str.translate`` looks every character up,
    which is slow on a long reply holding any non-ASCII character."""
    for curly, straight in _CURLY_QUOTES:
        if curly in text:
            text = text.replace(curly, straight)
    return text


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


# UTF-8 bytes of a lower-cased text: ASCII letters and digits kept, other ASCII to a space;
# bytes of non-ASCII characters kept for the second step.
_ASCII_LOOSE = bytes(b if chr(b).isalnum() else 32 for b in range(128)) + bytes(range(128, 256))
# JSON may carry a lone surrogate ("\\ud800"); it is no letter, so it becomes a space.
_UTF8, _LONE_SURROGATES = "utf-8", "surrogatepass"


def loose(text: str) -> str:
    """Lower case, only letters and digits: words separated by one space. So "**bold**," and
    "bold," read alike, and so do "1. Check" in a list and "1. Check" quoted inline: a list
    number is kept (as the word "1") on both sides, never dropped from one only.

    The same as ``" ".join("".join(c if c.isalnum() else " " for c in text.lower()).split())``
    (a test checks it), done over the UTF-8 bytes: ASCII by one ``bytes.translate``, runs of
    non-ASCII characters one by one, and the spaces collapsed with NumPy — 18 ms for a 1 MB
    reply, about a third of ``str.translate`` or a regular expression (bench/README.md)."""
    # Imported here: evaluation workers import this module and need NumPy (15 MB) only once a
    # quote is not found word for word (tests/proactweb/test_worker.py keeps their start lean).
    import numpy as np

    raw = bytearray(text.lower().encode(_UTF8, _LONE_SURROGATES).translate(_ASCII_LOOSE))
    codes = np.frombuffer(raw, dtype=np.uint8)
    non_ascii = codes >= 0x80
    if non_ascii.any():
        edges = np.flatnonzero(np.diff(non_ascii.view(np.int8), prepend=0, append=0))
        for start, end in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
            run = raw[start:end].decode(_UTF8, _LONE_SURROGATES)
            if not run.isalnum():
                # Same length in bytes, so the offsets of later runs hold.
                raw[start:end] = "".join(
                    c if c.isalnum() else " " * len(c.encode(_UTF8, _LONE_SURROGATES)) for c in run
                ).encode(_UTF8, _LONE_SURROGATES)
    space = codes == 32
    keep = ~space
    keep[1:] |= space[1:] & ~space[:-1]  # the first space of each run
    return codes[keep].tobytes().strip().decode()


_SAME_QUOTE = {'"': '["“”„]', "'": "['‘’‚]"}


def raw_pattern(fragment: str) -> re.Pattern[str] | None:
    """The fragment as a pattern over the raw reply: any run of whitespace between its words,
    a straight or curly quote wherever it has one. It matches exactly where
    ``normalise(fragment)`` occurs in ``normalise(reply)``, without normalising the reply
    (``\\s`` and ``str.split`` agree on what is whitespace)."""
    words = normalise(fragment).split(" ")
    if words == [""]:
        return None
    return re.compile(
        r"\s+".join("".join(_SAME_QUOTE.get(c) or re.escape(c) for c in word) for word in words)
    )


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
    """The reply as graded, and its loose form, made once and only when needed."""

    def __init__(self, reply: str) -> None:
        self.text = reply[: max_graded_chars()]
        self._loose: str | None = None

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
    # Most quotes occur as they are; the pattern finds the rest of those equal up to
    # whitespace and curly quotes, over the raw text: the reply itself is never normalised.
    exact = normalise(fragment)
    pattern = raw_pattern(fragment)
    if exact in reply.text or (pattern is not None and pattern.search(reply.text)):
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
