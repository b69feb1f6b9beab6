"""The suggested failure mode of a failed RECOVERY reply: a transparent heuristic, shown to the
annotator with its reason, who confirms or changes it (the answer records which).

Rules, first match wins (docs/annotation.md explains them):

1. **Deliverable repetition** — at least ``REPETITION_SHARE`` of the reply's content words
   (three or more letters, not a common function word, not a number) already occur in the
   assistant's earlier replies: the reply restates what was delivered.
2. **Generic closing** — the reply contains a boilerplate closing phrase (``CLOSING_PHRASES``).
3. **Premature closure** — fewer than ``SHORT_REPLY_WORDS`` words, and neither of the above.
4. **Ungrounded suggestion** — otherwise: a reply of some length that neither repeats the earlier
   deliverable nor signs off with boilerplate, yet failed, is most often a suggestion not tied
   to what the user said.

Pure functions: no database, no randomness.
"""

import re
from dataclasses import dataclass

from benchmark.vocabulary import FailureMode

REPETITION_SHARE = 0.55
SHORT_REPLY_WORDS = 40
# Function words (and thank-you filler) that say nothing about a reply's content.
FUNCTION_WORDS = frozenset(
    """about above after again all also and any are as at be been before being below both but by
    can did do does each few for from further get got had has have he her here him his how i if in
    into is it it's its just me more most my no not now of off on once one only or our out over own
    same she so some such than that the their them then there these they this those through to too
    under up very was we were what when which who will with you you're you've your yours""".split()
)
CLOSING_PHRASES = (
    "let me know if",
    "let me know how",
    "feel free to",
    "don't hesitate",
    "do not hesitate",
    "hope this helps",
    "hope that helps",
    "happy to help",
    "glad i could help",
    "glad to help",
    "good luck",
    "best of luck",
    "all the best",
    "you've got this",
    "you got this",
    "have a great",
    "have fun",
    "enjoy your",
    "enjoy the",
    "anything else",
    "reach out",
    "i'm here if",
    "i'm here whenever",
    "take care",
)

_WORD = re.compile(r"\w+(?:['’]\w+)?", re.UNICODE)


@dataclass(frozen=True)
class Suggestion:
    label: str
    reason: str


def words(text: str) -> list[str]:
    return [w.lower().replace("’", "'") for w in _WORD.findall(text)]


def content_words(text: str) -> set[str]:
    return {w for w in words(text) if len(w) >= 3 and w not in FUNCTION_WORDS and not w.isdigit()}


def repetition_share(reply: str, earlier: list[str]) -> float:
    """Share of the reply's distinct content words that the earlier replies already used."""
    mine = content_words(reply)
    if not mine:
        return 0.0
    before = set().union(*(content_words(text) for text in earlier)) if earlier else set()
    return len(mine & before) / len(mine)


def closing_phrase(reply: str) -> str | None:
    flat = " ".join(words(reply))
    for phrase in CLOSING_PHRASES:
        if " ".join(words(phrase)) in flat:
            return phrase
    return None


def suggest_failure_mode(reply: str, earlier_assistant: list[tuple[int, str]]) -> Suggestion:
    """``earlier_assistant``: (turn number, text) of the assistant's replies before this one."""
    share = repetition_share(reply, [text for _, text in earlier_assistant])
    if share >= REPETITION_SHARE:
        mine = content_words(reply)
        source_turn = max(
            earlier_assistant, key=lambda turn_text: len(mine & content_words(turn_text[1]))
        )[0]
        return Suggestion(
            FailureMode.DELIVERABLE_REPETITION,
            f"{share:.0%} of the reply's content words already appear in the assistant's "
            f"earlier replies (most of them at turn {source_turn}).",
        )
    phrase = closing_phrase(reply)
    if phrase:
        return Suggestion(
            FailureMode.GENERIC_CLOSING, f"It contains the closing phrase “{phrase}”."
        )
    n_words = len(words(reply))
    if n_words < SHORT_REPLY_WORDS:
        return Suggestion(
            FailureMode.PREMATURE_CLOSURE,
            f"Only {n_words} words, with no boilerplate and no repetition: it wraps up "
            "without a next step.",
        )
    return Suggestion(
        FailureMode.UNGROUNDED_SUGGESTION,
        f"{n_words} words, no closing boilerplate, and only {share:.0%} of its content words "
        "used before: most likely a suggestion not tied to the user's details.",
    )
