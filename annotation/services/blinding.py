"""Whether a text annotators will read (a study's name, its instructions) names a model, a judge
or a condition.

The text and every name are normalised the same way — NFKC (full-width and compatibility
forms become plain letters), invisible format characters (soft hyphen, zero-width space)
dropped, every Unicode dash made ``-``, case folded — and then compared as words (runs of
letters and digits), so "Which is Birch?", "rubric‑injected" with a non-breaking hyphen and
"ZEPHYR_secret large" are all caught, and "birchwood" is not "birch".

What is looked for (docs/annotation.md, "Blinding"):

- every name of a model or judge of the selection (handle, display name, provider model id)
  as a whole phrase, also written run together ("GPT-4o" as "gpt4o");
- each distinctive word of those names on its own ("Birch 2" → "birch"): a word with at least
  three letters that is not in ``GENERIC_NAME_WORDS`` (sizes, variants and words any
  instruction may use, such as "mini", "large", "chat", "judge"), which alone would name
  nothing;
- the condition words: any word containing "vanilla" or "inject" (injected, injection, and
  "rubricinjected" once a soft hyphen inside it is dropped).
  "rubric" is not one: annotators are shown rubrics.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from benchmark.models import ModelEndpoint

# Words that model names share with plain instructions, or that tell apart sizes and versions
# rather than models: on their own they name nothing ("Prefer the large reply" is innocent).
GENERIC_NAME_WORDS = frozenset(
    """
    mini small medium large big tiny nano micro base max ultra lite light plus pro
    chat instruct instruction turbo preview latest fast flash tuned experimental exp
    alpha beta gamma stable new old next open free vision code online
    model models judge judges assistant reply replies response responses agent bot
    demo test example sample primary secondary
    the and for with from one two three all any best good better more less than this that
    """.split()
)

# The condition words, as stems: a word that contains one of them names a condition (every
# ``Condition`` value and label must be caught: tests/annotation/test_blinding_text.py).
CONDITION_STEMS = ("vanilla", "inject")

_WORD = re.compile(r"[^\W_]+")
_MIN_LETTERS = 3


def endpoint_names(endpoint: ModelEndpoint) -> tuple[str, ...]:
    """Every name a model goes by: none may appear in what annotators see."""
    return (endpoint.name, endpoint.display_name, endpoint.model_name)


def _char(c: str) -> str:
    if unicodedata.category(c) == "Cf":  # soft hyphen, zero-width space and joiners: invisible
        return ""
    if unicodedata.category(c) == "Pd" or c == "\u2212":  # every dash, and the minus sign
        return "-"
    return c


def normalise(text: str) -> str:
    """NFKC, invisible format characters dropped, all dashes ``-``, case folded."""
    return "".join(_char(c) for c in unicodedata.normalize("NFKC", text)).casefold()


def words(text: str) -> list[str]:
    """The words of ``text`` (normalised): runs of letters and digits."""
    return _WORD.findall(normalise(text))


def _contains(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def _distinctive(word: str) -> bool:
    return sum(c.isalpha() for c in word) >= _MIN_LETTERS and word not in GENERIC_NAME_WORDS


def blinding_findings(text: str, names: Iterable[str]) -> list[str]:
    """What in ``text`` would tell an annotator which model, judge or condition they see: the
    names (as given) and words found, in a stable order; empty when the text is blind."""
    text_words = words(text)
    present = set(text_words)
    found: list[str] = []
    for name in sorted(set(names)):
        name_words = words(name)
        if not name_words:
            continue
        joined = "".join(name_words)
        if _contains(text_words, name_words) or (
            sum(c.isalpha() for c in joined) >= _MIN_LETTERS and joined in present
        ):
            found.append(name)
            continue
        found += [w for w in dict.fromkeys(name_words) if _distinctive(w) and w in present]
    found += [w for w in dict.fromkeys(text_words) if any(s in w for s in CONDITION_STEMS)]
    return list(dict.fromkeys(found))
