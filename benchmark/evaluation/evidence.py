"""Does a judge's evidence quote really occur in the reply?

Two uses, two strictness levels:

- ``quote_in_reply`` — for judges run here: the quote must occur verbatim, normalising only
  whitespace and quote characters (curly vs straight). Anything else is re-asked, then a
  ``judge_error``; a verdict is never kept on an unverifiable quote.
- ``grade_evidence`` — for imported results, where the release's judge often joined several
  fragments with "…", "and", "Also:" or " / ", with Markdown and curly quotes. Each fragment is
  graded exact / close / not found and the share found is reported, never silently trusted or
  discarded. "Close" = found after also dropping Markdown markup, list markers and case, or
  ≥ 80 % of the fragment's characters matched in one block (a condensed quote).
"""

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "‚": "'", "`": "`"})


def straighten_quotes(text: str) -> str:
    """Curly quotes as straight ones, character for character (offsets are kept)."""
    return text.translate(_QUOTES)


_SPACE = re.compile(r"\s+")
_MARKUP = re.compile(r"[*_`#>]+|^\s*(?:[-•]|\d+[.)])\s+", re.MULTILINE)
_QUOTED = re.compile(r'"([^"]{3,})"')
_SEPARATORS = re.compile(r"\s*(?:…|\.\.\.|\s/\s|;|\bAlso:|\band\b)\s*")
CLOSE_RATIO = 0.8
MIN_FRAGMENT_CHARS = 8


def normalise(text: str) -> str:
    """Whitespace and quote characters only."""
    return _SPACE.sub(" ", straighten_quotes(text)).strip()


def _loose(text: str) -> str:
    """Also without Markdown markup, list markers, quote marks and case."""
    text = _MARKUP.sub(" ", straighten_quotes(text)).replace('"', "").replace("'", "")
    return _SPACE.sub(" ", text).strip().lower()


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


def _grade_fragment(fragment: str, reply_norm: str, reply_loose: str) -> str:
    if normalise(fragment) in reply_norm:
        return "exact"
    loose = _loose(fragment)
    if loose and loose in reply_loose:
        return "close"
    matcher = SequenceMatcher(None, loose, reply_loose, autojunk=False)
    match = matcher.find_longest_match(0, len(loose), 0, len(reply_loose))
    if loose and match.size / len(loose) >= CLOSE_RATIO:
        return "close"
    return "not_found"


def grade_evidence(evidence: str, reply: str) -> EvidenceGrade:
    fragments = split_fragments(evidence)
    if not fragments:
        return EvidenceGrade("none", None, ())
    reply_norm, reply_loose = normalise(reply), _loose(reply)
    graded = tuple((f, _grade_fragment(f, reply_norm, reply_loose)) for f in fragments)
    grades = [g for _, g in graded]
    found = sum(g != "not_found" for g in grades)
    if all(g == "exact" for g in grades):
        status = "exact"
    elif found == 0:
        status = "not_found"
    else:
        status = "close"
    return EvidenceGrade(status, found / len(grades), graded)
