"""HALO response diagnosis (SPEC 3; seeds/004): at a **checkpoint** — a context (a conversation up
to a trigger, or an imported event prefix) and the replies of several sources there — one
annotator judges every reply (the paired protocol: model differences are not confounded with
who judged), k annotators per checkpoint.

Per reply: the action level L0–L3 (pre-filled where ``annotation.heuristics.suggest_action_level``
can infer it, confirmed or changed; the answer records which), acceptable yes / no; for a
rejected intervention (L1–L3) its timing and its intensity, two independent questions; for any
rejected reply optional other issues, each with a note. A rejected L0 is inaction, an accepted
L0 justified restraint: derived and shown, never asked. A question that does not apply is hidden
in the page and, whatever is posted, never stored.

Blinding: the page knows "Reply 1 … n" only. The replies' base order is random per checkpoint
and rotates by one place for each next annotator (``StudyKind.display``), so the checkpoint's
annotators see each reply at different positions; the form posts positions and the server maps
them back to the checkpoint's responses from the order this annotator was shown.

An answer's ``label`` summarises the checkpoint — none / some / all of its replies acceptable —
for the study page's agreement and rater figures; the statistics read the per-reply fields
(``details["replies"]``, docs/annotation.md, "HALO diagnosis").
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django import forms
from django.db import models

from annotation.forms import AnswerForm
from annotation.heuristics import suggest_action_level
from annotation.kinds.base import Shortcut, StudyKind, SummaryLine
from annotation.kinds.registry import register
from annotation.kinds.selection import endpoint_names, run_units
from annotation.metrics import Vote, percent_agreement
from annotation.models import Answer
from annotation.selectors import reply_context
from annotation.services.assignments import AnswerInput
from annotation.services.studies import ItemDraft
from benchmark.models import EvaluationUnit
from benchmark.vocabulary import (
    ACTION_LEVEL_DEFINITIONS,
    INTENSITY_DEFINITIONS,
    OVER_PROACTIVE,
    TIMING_DEFINITIONS,
    UNDER_PROACTIVE,
    ActionLevel,
    Intensity,
    OtherIssue,
    Restraint,
    Timing,
    restraint_of,
)


class AcceptedReplies(models.TextChoices):
    """An answer's label: how many of the checkpoint's replies the annotator accepted."""

    NONE = "none", "No reply acceptable"
    SOME = "some", "Some replies acceptable"
    ALL = "all", "Every reply acceptable"


class Acceptable(models.TextChoices):
    YES = "yes", "Acceptable"
    NO = "no", "Not acceptable"


LEVEL_KEYS: dict[str, tuple[str, ...]] = {
    level.value: (str(n),) for n, level in enumerate(ActionLevel)
}
ACCEPTABLE_KEYS: dict[str, tuple[str, ...]] = {Acceptable.YES: ("y",), Acceptable.NO: ("n",)}
TIMING_KEYS: dict[str, tuple[str, ...]] = {
    Timing.PREMATURE: ("p",),
    Timing.BELATED: ("b",),
    Timing.APPROPRIATE: ("a",),
}
INTENSITY_KEYS: dict[str, tuple[str, ...]] = {
    Intensity.INSUFFICIENT: ("i",),
    Intensity.EXCESSIVE: ("e",),
    Intensity.APPROPRIATE: ("a",),
}
ISSUE_KEYS: dict[str, str] = {
    OtherIssue.UNSUPPORTED: "e",
    OtherIssue.IRRELEVANT: "i",
    OtherIssue.CONTRADICTION: "c",
}
ROW_KEYS = {"next": ("j", "arrowdown"), "previous": ("k", "arrowup")}
INTERVENTIONS = tuple(level.value for level in ActionLevel if level != ActionLevel.L0)
ISSUE_NOTE_MAX = 2000


def _keys(keys: dict[str, tuple[str, ...]]) -> str:
    return " / ".join(k[0] for k in keys.values())


def applies_timing(level: str, acceptable: bool) -> bool:
    """Timing and intensity are asked of a rejected intervention (L1–L3) only."""
    return not acceptable and level in INTERVENTIONS


class HaloAnswerForm(AnswerForm):
    """One set of questions per reply, by screen position (``level_1``, ``acceptable_1``, …);
    the positions are mapped back to the checkpoint's responses here, on the server."""

    note_label = "Note on the checkpoint"
    row_keys = {way: " ".join(keys) for way, keys in ROW_KEYS.items()}
    rows_hint = (
        f"{ROW_KEYS['next'][0]} / {ROW_KEYS['previous'][0]} move between questions; "
        "each question's keys answer it"
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.order: list[str] = list(self.assignment.display.get("order") or [])
        self.keys = {}
        for n in range(1, len(self.order) + 1):
            what = f"Reply {n}"
            self.fields[f"level_{n}"] = forms.ChoiceField(
                choices=ActionLevel.choices,
                widget=forms.RadioSelect,
                label="Action level",
                error_messages={"required": f"{what}: choose its action level (keys 0–3)."},
            )
            self.fields[f"acceptable_{n}"] = forms.ChoiceField(
                choices=Acceptable.choices,
                widget=forms.RadioSelect,
                label="Acceptable?",
                error_messages={"required": f"{what}: acceptable or not (keys y, n)."},
            )
            self.fields[f"timing_{n}"] = forms.ChoiceField(
                choices=Timing.choices, widget=forms.RadioSelect, required=False, label="Timing"
            )
            self.fields[f"intensity_{n}"] = forms.ChoiceField(
                choices=Intensity.choices,
                widget=forms.RadioSelect,
                required=False,
                label="Intensity",
            )
            for issue in OtherIssue:
                self.fields[f"issue_{issue.value}_{n}"] = forms.BooleanField(
                    required=False, label=issue.label
                )
                self.fields[f"issue_{issue.value}_note_{n}"] = forms.CharField(
                    required=False, max_length=ISSUE_NOTE_MAX, label=f"{issue.label}: note"
                )
            self.keys[f"level_{n}"] = LEVEL_KEYS
            self.keys[f"acceptable_{n}"] = ACCEPTABLE_KEYS
            self.keys[f"timing_{n}"] = TIMING_KEYS
            self.keys[f"intensity_{n}"] = INTENSITY_KEYS

    def reply_fields(self, n: int) -> dict[str, Any]:
        """Reply ``n``'s bound fields, for the template."""
        return {
            "level": self[f"level_{n}"],
            "acceptable": self[f"acceptable_{n}"],
            "timing": self[f"timing_{n}"],
            "intensity": self[f"intensity_{n}"],
            "issues": [
                {
                    "value": issue.value,
                    "label": issue.label,
                    "key": ISSUE_KEYS[issue.value],
                    "field": self[f"issue_{issue.value}_{n}"],
                    "note": self[f"issue_{issue.value}_note_{n}"],
                }
                for issue in OtherIssue
            ],
        }

    def clean(self) -> dict:
        data = super().clean() or {}
        for n in range(1, len(self.order) + 1):
            level, acceptable = data.get(f"level_{n}"), data.get(f"acceptable_{n}")
            if not level or not acceptable:
                continue  # their own errors say so
            rejected = acceptable == Acceptable.NO
            if applies_timing(level, not rejected):
                if not data.get(f"timing_{n}"):
                    self.add_error(
                        f"timing_{n}",
                        f"Reply {n}: its timing — premature, belated or appropriate "
                        f"(keys {', '.join(k[0] for k in TIMING_KEYS.values())}).",
                    )
                if not data.get(f"intensity_{n}"):
                    self.add_error(
                        f"intensity_{n}",
                        f"Reply {n}: its intensity — insufficient, excessive or appropriate "
                        f"(keys {', '.join(k[0] for k in INTENSITY_KEYS.values())}).",
                    )
            if rejected:
                for issue in OtherIssue:
                    note = (data.get(f"issue_{issue.value}_note_{n}") or "").strip()
                    if data.get(f"issue_{issue.value}_{n}") and not note:
                        self.add_error(
                            f"issue_{issue.value}_note_{n}",
                            f"Reply {n}: {issue.label.lower()}: a note must say what.",
                        )
        return data

    def to_input(self) -> AnswerInput:
        """Every reply's answers by response, in the checkpoint's order; what does not apply
        (timing and intensity of an accepted reply or of an L0, other issues of an accepted
        reply) is dropped here, whatever was posted."""
        data = self.cleaned_data
        suggested = suggestions(self.assignment.item.payload)
        by_response = {}
        for n, response in enumerate(self.order, start=1):
            level, acceptable = data[f"level_{n}"], data[f"acceptable_{n}"] == Acceptable.YES
            reply: dict[str, Any] = {
                "response": response,
                "position": n,
                "level": level,
                "suggested": suggested.get(response, ""),
                "level_changed": bool(suggested.get(response)) and level != suggested[response],
                "acceptable": acceptable,
            }
            if applies_timing(level, acceptable):
                reply["timing"] = data[f"timing_{n}"]
                reply["intensity"] = data[f"intensity_{n}"]
            if not acceptable:
                reply["issues"] = {
                    issue.value: data[f"issue_{issue.value}_note_{n}"].strip()
                    for issue in OtherIssue
                    if data[f"issue_{issue.value}_{n}"]
                }
            by_response[response] = reply
        replies = [by_response[r] for r in response_ids(self.assignment.item.payload)]
        accepted = sum(r["acceptable"] for r in replies)
        label = (
            AcceptedReplies.ALL
            if accepted == len(replies)
            else AcceptedReplies.NONE
            if accepted == 0
            else AcceptedReplies.SOME
        )
        return AnswerInput(
            label=str(label), note=data["note"].strip(), details={"replies": replies}
        )


# --- The item's payload (server-side only: it names the sources) ------------------------------


def response_ids(payload: dict) -> list[str]:
    """The checkpoint's responses, in its canonical order."""
    return [source["id"] for source in payload.get("sources") or []]


def suggestions(payload: dict) -> dict[str, str]:
    """Response id → its suggested level ("" when none)."""
    return {
        source["id"]: (source.get("suggested") or {}).get("level", "")
        for source in payload.get("sources") or []
    }


def source_entry(
    response: str,
    source: str,
    text: str,
    *,
    unit: int | None = None,
    reasoning_tokens: int | None = None,
    retrieval_rounds: int | None = None,
    level: str | None = None,
    action: str | None = None,
    has_action: bool = False,
) -> dict:
    """One response of a checkpoint's payload, with its suggested level (if any)."""
    suggestion = suggest_action_level(text, level=level, action=action, has_action=has_action)
    return {
        "id": response,
        "source": source,
        "unit": unit,
        "reasoning_tokens": reasoning_tokens,
        "retrieval_rounds": retrieval_rounds,
        "suggested": (
            {"level": str(suggestion.label), "reason": suggestion.reason} if suggestion else None
        ),
    }


def _retrieval_rounds(unit: EvaluationUnit) -> int | None:
    rounds = (unit.extra or {}).get("retrieval_rounds")
    return rounds if isinstance(rounds, int) and not isinstance(rounds, bool) else None


class HaloDiagnosis(StudyKind):
    key = "halo"
    label = "HALO response diagnosis"
    order = 60
    labels = tuple(AcceptedReplies.values)
    ordinal = True
    answer_form = HaloAnswerForm
    template = "annotation/items/halo.html"
    shortcuts = (
        Shortcut(" / ".join(k[0] for k in ROW_KEYS.values()), "next / previous question"),
        Shortcut(_keys(LEVEL_KEYS), "action level L0 observe … L3 execute"),
        Shortcut(_keys(ACCEPTABLE_KEYS), "acceptable / not acceptable"),
        Shortcut(_keys(TIMING_KEYS), "timing: premature / belated / appropriate"),
        Shortcut(_keys(INTENSITY_KEYS), "intensity: insufficient / excessive / appropriate"),
        Shortcut(
            " / ".join(ISSUE_KEYS.values()),
            "other issues: unsupported by evidence / irrelevant action / factual "
            "contradiction (on or off; its note box opens)",
        ),
    )
    selection_fields = ("run", "endpoints", "trigger_type", "condition")
    empty_selection = (
        "The run has no finished reply (sample 0) of the chosen models at a trigger of this "
        "selection."
    )
    tables = (
        "halo-acceptability",
        "halo-proactivity",
        "halo-timing-intensity",
        "halo-levels",
        "halo-paired",
        "halo-effort",
        "halo-effort-correlation",
        "halo-agreement",
    )

    def answer_shown(self, answer) -> str:
        replies = answer.details.get("replies") or []
        accepted = sum(bool(r.get("acceptable")) for r in replies)
        return f"{accepted} of {len(replies)} replies acceptable"

    def select(self, spec) -> list[ItemDraft]:
        """One checkpoint per trigger (and condition): the chosen models' finished replies
        there (sample 0), each with its suggested level and its effort."""
        units = run_units(spec).filter(sample_index=0)
        if spec.condition:
            units = units.filter(condition=spec.condition)
        checkpoints: dict[tuple[int, str], list[EvaluationUnit]] = defaultdict(list)
        for unit in units:
            checkpoints[(unit.trigger_id, unit.condition)].append(unit)
        drafts = []
        for (trigger_id, condition), group in checkpoints.items():
            group.sort(key=lambda u: u.endpoint.name)
            turn = group[0].trigger.turn
            key = f"{turn.dialogue.unique_id_eval}#t{turn.index}#{condition}"
            sources = [
                source_entry(
                    f"r{n}",
                    unit.endpoint.name,
                    unit.reply,
                    unit=unit.pk,
                    reasoning_tokens=unit.reasoning_tokens,
                    retrieval_rounds=_retrieval_rounds(unit),
                )
                for n, unit in enumerate(group, start=1)
            ]
            drafts.append(
                ItemDraft(
                    key=key,
                    dialogue_id=turn.dialogue_id,
                    trigger_id=trigger_id,
                    payload={"checkpoint": key, "sources": sources},
                    names=tuple(n for u in group for n in endpoint_names(u.endpoint)),
                    sides=tuple(s["id"] for s in sources),
                )
            )
        return drafts

    def item_view(self, assignment, study) -> dict:
        item = assignment.item
        payload = item.payload
        sources = {s["id"]: s for s in payload.get("sources") or []}
        view: dict[str, Any] = {"conversation": [], "events": payload.get("context") or []}
        if item.trigger_id is not None:  # made from a run: the conversation and the units
            units = tuple(s["unit"] for s in sources.values())
            context = reply_context(item, units)
            view["conversation"] = context.conversation
            texts = {rid: context.replies.get(s["unit"], "") for rid, s in sources.items()}
        else:
            texts = payload.get("texts") or {}
        view["replies"] = [
            {
                "number": n,
                "text": texts.get(response, ""),
                # Never empty: the template reads suggested.level, and a key missing from a
                # dict cost the template engine a dir() of it and three exceptions.
                "suggested": sources[response].get("suggested") or {"level": "", "reason": ""},
            }
            for n, response in enumerate(assignment.display.get("order") or [], start=1)
        ]
        view["levels"] = [
            (level.value, LEVEL_KEYS[level.value][0], level.label, definition)
            for level, definition in ACTION_LEVEL_DEFINITIONS.items()
        ]
        view["timings"] = [(t.label, d) for t, d in TIMING_DEFINITIONS.items()]
        view["intensities"] = [(i.label, d) for i, d in INTENSITY_DEFINITIONS.items()]
        view["interventions"] = ",".join(INTERVENTIONS)
        view["restraint"] = {r.value: r.label for r in Restraint}
        return view

    def form_initial(self, answer, assignment) -> dict:
        """An undone answer as it was given; else each reply's suggested level (pre-selected:
        moving on confirms it)."""
        initial = super().form_initial(answer, assignment)
        order = list(assignment.display.get("order") or [])
        if answer is None:
            suggested = suggestions(assignment.item.payload)
            for n, response in enumerate(order, start=1):
                if suggested.get(response):
                    initial[f"level_{n}"] = suggested[response]
            return initial
        given = {r.get("response"): r for r in answer.details.get("replies") or []}
        for n, response in enumerate(order, start=1):
            reply = given.get(response) or {}
            initial[f"level_{n}"] = reply.get("level")
            if "acceptable" in reply:
                initial[f"acceptable_{n}"] = Acceptable.YES if reply["acceptable"] else "no"
            initial[f"timing_{n}"] = reply.get("timing")
            initial[f"intensity_{n}"] = reply.get("intensity")
            for issue, note in (reply.get("issues") or {}).items():
                initial[f"issue_{issue}_{n}"] = True
                initial[f"issue_{issue}_note_{n}"] = note
        return initial

    def summary(self, items, counted) -> list[SummaryLine]:
        """Acceptable replies, the over- / under-proactive split of the rejected ones, and
        percent agreement per question so far (replies with two or more judgements): one
        query for the counted answers' per-reply fields."""
        wanted = {(v.item, v.rater) for v in counted}
        if not wanted:
            return []
        rows = Answer.objects.filter(
            assignment__item_id__in={item for item, _ in wanted}, retracted_at__isnull=True
        ).values_list("assignment__item_id", "assignment__rater_id", "details")
        judged = rejected = accepted = over = under = 0
        units: dict[tuple[int, str], int] = {}
        votes: dict[str, list[Vote]] = defaultdict(list)
        for item, rater, details in rows:
            if (item, rater) not in wanted:
                continue
            for reply in (details or {}).get("replies") or []:
                judged += 1
                accepted += bool(reply.get("acceptable"))
                unit = units.setdefault((item, reply.get("response", "")), len(units))
                for question in ("level", "acceptable", "timing", "intensity"):
                    if question in reply:
                        votes[question].append(Vote(unit, rater, str(reply[question]), 0.0))
                if reply.get("acceptable"):
                    continue
                rejected += 1
                found = {reply.get("timing"), reply.get("intensity")}
                found.add(restraint_of(reply.get("level", ""), False))
                over += bool(found & set(OVER_PROACTIVE))
                under += bool(found & set(UNDER_PROACTIVE))
        agreement = []
        for question in ("level", "acceptable", "timing", "intensity"):
            share, n = percent_agreement(votes[question])
            if n:
                agreement.append(f"{question} {share:.0%}")
        lines = [
            SummaryLine(
                "Replies judged acceptable",
                accepted,
                rest=f"of {judged}",
                detail=f"({accepted / judged:.0%})" if judged else "",
            ),
            SummaryLine(
                "Rejected replies over- / under-proactive",
                f"{over} / {under}",
                rest=f"of {rejected}",
                detail="(a reply premature and insufficient is both)",
            ),
        ]
        if agreement:
            lines.append(
                SummaryLine(
                    "Agreement per question so far",
                    ", ".join(agreement),
                    detail="(percent agreement over replies with 2+ judgements)",
                )
            )
        return lines


KIND = register(HaloDiagnosis())
