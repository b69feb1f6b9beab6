"""Transparent heuristics that pre-fill an answer, shown to the annotator with their reason,
who confirms or changes it (the answer records which): the failure mode of a failed RECOVERY
reply, and (below) the action level of a reply in a HALO diagnosis.

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

from benchmark.vocabulary import ActionLevel, FailureMode

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


# --- The action level of a reply (HALO diagnosis) ---------------------------------------------
# Rules, first match wins (docs/annotation.md, "HALO diagnosis"):
#
# 1. The record's own level: an imported response that gives ``level`` (L0–L3).
# 2. The record's action: an imported response whose ``action`` is null did nothing (L0); a
#    command is read by its words (``send_email`` → send): a word in ``PREPARE_WORDS`` → L2
#    (checked first: ``create_draft`` prepares), in ``EXECUTE_WORDS`` → L3, in ``NOTIFY_WORDS``
#    → L1; a command of none of these suggests nothing.
# 3. The reply's text: a first-person report of a done action ("I've booked", "I sent") → L3;
#    a prepared artefact ("here's a draft", "draft:", three or more list lines) → L2; a
#    heads-up ("don't forget", "make sure", "note that", …) → L1; a short reply (under
#    ``SHORT_LEVEL_WORDS`` words) with none of these → L0; otherwise no suggestion.

NOTIFY_WORDS = frozenset("notify remind reminder alert flag warn highlight mention".split())
PREPARE_WORDS = frozenset("draft drafts prepare compose outline stage tentative template".split())
EXECUTE_WORDS = frozenset(
    """send pay book buy order purchase cancel delete transfer submit schedule reschedule
    accept decline reply forward update move share invite confirm sign post reserve
    refund archive""".split()
)
_DONE = re.compile(
    r"\bi(?:'ve| have|’ve)?\s+(?:just\s+|already\s+|now\s+)?(?:booked|sent|scheduled|ordered|"
    r"paid|cancell?ed|submitted|purchased|bought|transferred|emailed|reserved|deleted|moved|"
    r"rescheduled|forwarded|confirmed|signed|updated|shared|invited|set up|placed|filed)\b",
    re.IGNORECASE,
)
_PREPARED = re.compile(
    r"\b(?:here(?:'s| is|’s) (?:a|the|your) (?:draft|template|checklist|plan)|i(?:'ve| have|’ve)"
    r" (?:drafted|prepared|put together|written up)|draft:|checklist:|template:)",
    re.IGNORECASE,
)
_LIST_LINE = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+\S", re.MULTILINE)
HEADS_UP_PHRASES = (
    "heads up",
    "heads-up",
    "don't forget",
    "do not forget",
    "remember to",
    "make sure",
    "keep in mind",
    "note that",
    "be aware",
    "watch out",
    "worth checking",
    "you may want to",
    "you might want to",
    "reminder",
)
SHORT_LEVEL_WORDS = 25
PREPARED_LIST_LINES = 3


def _command_words(command: str) -> list[str]:
    return [w for w in re.split(r"[^a-z]+", command.lower()) if w]


def suggest_action_level(
    text: str, *, level: str | None = None, action: str | None = None, has_action: bool = False
) -> Suggestion | None:
    """The suggested level of a reply, or None when no rule applies. ``level`` and ``action``
    are an imported record's (``has_action``: the record has an ``action`` key, so None there
    means "no action")."""
    if level:
        return Suggestion(level, "The imported record gives this level.")
    if has_action and action is None:
        return Suggestion(ActionLevel.L0, "The imported record's action is none: it did nothing.")
    if action:
        words_ = _command_words(action)
        for vocabulary, suggested in (
            (PREPARE_WORDS, ActionLevel.L2),
            (EXECUTE_WORDS, ActionLevel.L3),
            (NOTIFY_WORDS, ActionLevel.L1),
        ):
            if vocabulary.intersection(words_):
                return Suggestion(suggested, f"Its action is the command “{action}”.")
        return None
    if match := _DONE.search(text):
        return Suggestion(ActionLevel.L3, f"It says it has acted: “{match.group(0)}”.")
    if match := _PREPARED.search(text):
        return Suggestion(ActionLevel.L2, f"It prepares something: “{match.group(0)}”.")
    if len(_LIST_LINE.findall(text)) >= PREPARED_LIST_LINES:
        return Suggestion(ActionLevel.L2, "It lays out a list of steps or items for the user.")
    flat = " ".join(words(text))
    for phrase in HEADS_UP_PHRASES:
        if " ".join(words(phrase)) in flat:
            return Suggestion(ActionLevel.L1, f"It raises something: “{phrase}”.")
    n_words = len(words(text))
    if n_words < SHORT_LEVEL_WORDS:
        return Suggestion(
            ActionLevel.L0, f"Only {n_words} words, and it raises, prepares or does nothing."
        )
    return None
