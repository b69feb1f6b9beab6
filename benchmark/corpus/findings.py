"""Protocol findings: departures from the ProactBench protocol that do not make a dialogue
unreadable. They are stored on the dialogue for the audit, counted in the import summary, and
turned into errors by ``import_corpus --strict``. The real release has such cases.

Pure functions over plain data; the importer feeds them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from benchmark.corpus.styles import TRAITS, suffix_fits_style, word_count
from benchmark.models import PHASE_WINDOWS, CommunicationStyle


@dataclass(frozen=True)
class Finding:
    code: str
    turn: int | None
    path: str
    message: str

    def as_dict(self) -> dict:
        return asdict(self)


FINDING_CODES: dict[str, str] = {
    "trigger_outside_window": "A trigger outside its nominal phase window "
    "(EMERGENT 1–3, CRITICAL 4–7, RECOVERY 8–10).",
    "anchor_drip": "A user turn discloses more than one new anchor (anchor-drip rule).",
    "critical_without_two_anchors": "A CRITICAL trigger with fewer than two anchors disclosed in "
    "earlier turns (checked only where anchors are known).",
    "planner_trigger_mismatch": "The Planner's decision for a turn disagrees with trigger_points.",
    "turn_count_mismatch": "num_turns_completed differs from the number of turn records.",
    "style_code_mismatch": "The blueprint suffix names a trait the style index does not have "
    "(docs/styles.md: how the release spells its labels).",
    "user_turn_length_outside_style": "A user message with fewer or more words than its "
    "style's bounds (expressive styles 40–100, the others 5–25).",
}


@dataclass(frozen=True)
class StyleTraits:
    index: int
    code: str
    traits: frozenset[str]
    """Keys of the traits present (``benchmark.corpus.styles.TRAITS``)."""
    min_words: int
    max_words: int

    @classmethod
    def by_index(cls, styles: Iterable[CommunicationStyle]) -> dict[int, StyleTraits]:
        return {
            style.index: cls(
                style.index,
                style.code,
                frozenset(key for key, field, _ in TRAITS if getattr(style, field)),
                style.min_words,
                style.max_words,
            )
            for style in styles
        }


@dataclass(frozen=True)
class TriggerFacts:
    position: int  # index in trigger_points, for the JSON path
    turn: int
    type: str
    rubric: dict


def protocol_findings(
    *,
    triggers: list[TriggerFacts],
    planner_by_turn: dict[int, dict | None],
    anchor_turns: dict[str, int | None] | None,
    num_turns_completed: int,
    turn_count: int,
    blueprint_id: str,
    style: StyleTraits | None,
    user_messages: dict[int, str] | None = None,
) -> list[Finding]:
    """All findings for one dialogue. ``anchor_turns`` maps anchor key → disclosing turn, or is
    None when the dialogue's anchors are not known (then the anchor rules are not checked).
    ``user_messages`` maps turn → user message, checked against the style's word bounds."""
    found: list[Finding] = []

    for trig in triggers:
        if trig.type not in PHASE_WINDOWS:
            continue  # INTERVENTION has no window: it goes wherever an image falls short
        low, high = PHASE_WINDOWS[trig.type]
        if not low <= trig.turn <= high:
            found.append(
                Finding(
                    "trigger_outside_window",
                    trig.turn,
                    f"$.trigger_points[{trig.position}].turn",
                    f"{trig.type} trigger at turn {trig.turn}, outside its window {low}–{high}",
                )
            )

    if anchor_turns is not None:
        per_turn: dict[int, list[str]] = {}
        for key, turn in anchor_turns.items():
            if turn is not None:
                per_turn.setdefault(turn, []).append(key)
        for turn in sorted(per_turn):
            keys = per_turn[turn]
            if len(keys) > 1:
                found.append(
                    Finding(
                        "anchor_drip",
                        turn,
                        f"$.turn_records[{turn - 1}].user_message",
                        f"turn {turn} discloses {len(keys)} anchors ({', '.join(sorted(keys))})",
                    )
                )
        for trig in triggers:
            if trig.type != "CRITICAL":
                continue
            # "Earlier" = disclosed in a turn before the trigger turn, counted by distinct turns,
            # since a CRITICAL reply must synthesise anchors disclosed in different turns.
            earlier_turns = {t for t in anchor_turns.values() if t is not None and t < trig.turn}
            if len(earlier_turns) < 2:
                found.append(
                    Finding(
                        "critical_without_two_anchors",
                        trig.turn,
                        f"$.trigger_points[{trig.position}]",
                        f"CRITICAL trigger at turn {trig.turn} has {len(earlier_turns)} "
                        "earlier anchor turn(s); it needs two to synthesise",
                    )
                )

    trigger_by_turn = {trig.turn: trig for trig in triggers}
    for turn, planner in sorted(planner_by_turn.items()):
        if not isinstance(planner, dict) or "is_trigger_point" not in planner:
            continue
        says_trigger = planner.get("is_trigger_point") is True
        planned = trigger_by_turn.get(turn)
        planner_rubric = planner.get("evaluation_rubric")
        planner_type = planner_rubric.get("type") if isinstance(planner_rubric, dict) else None
        if says_trigger != (planned is not None) or (
            planned is not None and planner_type not in (None, planned.type)
        ):
            found.append(
                Finding(
                    "planner_trigger_mismatch",
                    turn,
                    f"$.turn_records[{turn - 1}].planner.is_trigger_point",
                    f"turn {turn}: planner says "
                    f"{'trigger ' + str(planner_type) if says_trigger else 'no trigger'}, "
                    f"trigger_points say {planned.type if planned else 'no trigger'}",
                )
            )

    if num_turns_completed != turn_count:
        found.append(
            Finding(
                "turn_count_mismatch",
                None,
                "$.num_turns_completed",
                f"num_turns_completed is {num_turns_completed} but there are {turn_count} turns",
            )
        )

    suffix = blueprint_id.rsplit("_", 1)[-1] if "_" in blueprint_id else ""
    if (
        style is not None
        and suffix.isupper()
        and suffix.isalpha()
        and not suffix_fits_style(suffix, style.traits)
    ):
        found.append(
            Finding(
                "style_code_mismatch",
                None,
                "$.blueprint_id",
                f"blueprint suffix {suffix!r} names a trait that style {style.index} "
                f"({style.code}) does not have",
            )
        )

    if style is not None:
        for turn, text in sorted((user_messages or {}).items()):
            words = word_count(text)
            if not style.min_words <= words <= style.max_words:
                found.append(
                    Finding(
                        "user_turn_length_outside_style",
                        turn,
                        f"$.turn_records[{turn - 1}].user_message",
                        f"turn {turn}: the user message has {words} "
                        f"word{'' if words == 1 else 's'}; style {style.index} ({style.code}) "
                        f"allows {style.min_words}–{style.max_words}",
                    )
                )
    return found
