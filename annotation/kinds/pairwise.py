"""Pairwise preference (SPEC 2.6): one model's vanilla and rubric-injected replies at the same
trigger, double-blind — which one helps the user more?

The two sides are the release's Case A (vanilla) and Case B (rubric-injected). Their screen
order is random per item and rotates between the item's raters (``StudyKind.display``); the
page only ever knows "Response 1" and "Response 2". An answer is stored de-swapped: label
``A``, ``B`` or ``tie``, with the screen position clicked in ``details["choice"]``.

Its answers are battles too (``selectors.study_battles``, the battles export): source A is
``<model> · vanilla``, source B ``<model> · rubric-injected`` (``selection.source_label``),
and A / B / tie are ``model_a`` / ``model_b`` / ``tie``.
"""

from __future__ import annotations

from collections import defaultdict

from django import forms
from django.db import models

from annotation.forms import AnswerForm, confidence_field
from annotation.kinds.base import BattleSides, Shortcut, StudyKind, SummaryLine
from annotation.kinds.registry import register
from annotation.kinds.selection import endpoint_names, run_units, source_label, unit_key
from annotation.selectors import reply_context
from annotation.services.assignments import AnswerInput
from annotation.services.studies import ItemDraft
from benchmark.models import Condition, EvaluationUnit
from benchmark.vocabulary import BattleWinner


class PairChoice(models.TextChoices):
    """What the annotator clicked, by screen position (never by condition)."""

    FIRST = "1", "Response 1"
    SECOND = "2", "Response 2"
    TIE = "tie", "Tie"


class Case(models.TextChoices):
    """The release's names for the two sides of a pairwise item."""

    A = "A", "Case A (vanilla)"
    B = "B", "Case B (rubric-injected)"
    TIE = "tie", "Tie"


# A pairwise answer as a battle between its two sources.
CASE_WINNERS: dict[str, str] = {
    Case.A: BattleWinner.MODEL_A.value,
    Case.B: BattleWinner.MODEL_B.value,
    Case.TIE: BattleWinner.TIE.value,
}

CHOICE_KEYS: dict[str, tuple[str, ...]] = {
    PairChoice.FIRST: ("1",),
    PairChoice.SECOND: ("2",),
    PairChoice.TIE: ("0", "t"),
}


class PairwiseAnswerForm(AnswerForm):
    """A choice arrives as a screen position and is mapped back to Case A / B here, on the
    server, from the order this annotator was shown."""

    choice = forms.ChoiceField(
        choices=PairChoice.choices,
        widget=forms.RadioSelect,
        error_messages={"required": "Choose Response 1, Response 2 or Tie (keys 1, 2, 0)."},
    )
    confidence = confidence_field()
    keys = {"choice": CHOICE_KEYS}

    def to_input(self) -> AnswerInput:
        choice = self.cleaned_data["choice"]
        order = self.assignment.display["order"]  # e.g. ["B", "A"]: Response 1 is Case B
        label = Case.TIE if choice == PairChoice.TIE else order[int(choice) - 1]
        return AnswerInput(
            label=str(label),
            confidence=self.cleaned_data["confidence"],
            note=self.cleaned_data["note"].strip(),
            details={"choice": choice},
        )


class Pairwise(StudyKind):
    key = "pairwise"
    label = "Pairwise preference"
    order = 10
    labels = tuple(Case.values)
    answer_form = PairwiseAnswerForm
    template = "annotation/items/pairwise.html"
    shortcuts = (
        Shortcut("1", "Response 1 is better"),
        Shortcut("2", "Response 2 is better"),
        Shortcut(" or ".join(CHOICE_KEYS[PairChoice.TIE]), "tie"),
        Shortcut("Shift+1…5", "confidence 1–5"),
    )
    empty_selection = (
        "The run has no trigger of this selection with both a vanilla and a rubric-injected "
        "reply (finished, sample 0) from the chosen models."
    )
    tables = (
        "preference",
        "preference-raters",
        "arena-ranking",
        "arena-pairs",
        "pairwise-judge-human",
        "human-agreement",
    )
    release_judge_field = "judge_score_case_a"
    has_positions = True
    battles = True

    def answer_shown(self, answer) -> str:
        choice = answer.details.get("choice")
        return "Tie" if choice == PairChoice.TIE else f"Response {choice}"

    def expected_shown(self, expected, assignment) -> str:
        order = list(assignment.display.get("order") or [])
        if expected == Case.TIE or expected not in order:
            return "Tie"
        return f"Response {order.index(expected) + 1}"

    def check(self, spec, errors) -> None:
        if spec.run is not None:
            missing = {Condition.VANILLA, Condition.RUBRIC_INJECTED} - set(spec.run.conditions)
            if missing:
                errors["run"].append(
                    f"This run has no {' or '.join(sorted(missing))} replies to compare."
                )

    def select(self, spec) -> list[ItemDraft]:
        pairs: dict[tuple[int, int], dict[str, EvaluationUnit]] = defaultdict(dict)
        for unit in run_units(spec).filter(sample_index=0):
            pairs[(unit.trigger_id, unit.endpoint_id)][unit.condition] = unit
        drafts = []
        for pair in pairs.values():
            a, b = pair.get(Condition.VANILLA), pair.get(Condition.RUBRIC_INJECTED)
            if a is None or b is None:
                continue
            drafts.append(
                ItemDraft(
                    key=unit_key(a, with_condition=False),
                    dialogue_id=a.trigger.turn.dialogue_id,
                    trigger_id=a.trigger_id,
                    unit_id=a.pk,
                    unit_b_id=b.pk,
                    names=endpoint_names(a.endpoint),
                    sides=(Case.A.value, Case.B.value),
                )
            )
        return drafts

    def item_view(self, assignment, study) -> dict:
        item = assignment.item
        context = reply_context(item)
        by_case = {
            Case.A: context.replies.get(item.unit_id, ""),
            Case.B: context.replies.get(item.unit_b_id, ""),
        }
        return {
            "conversation": context.conversation,
            "responses": [
                {"number": n, "text": by_case[case]}
                for n, case in enumerate(assignment.display["order"], start=1)
            ],
        }

    def form_initial(self, answer, assignment) -> dict:
        initial = super().form_initial(answer, assignment)
        if answer is not None:
            initial["choice"] = answer.details.get("choice")
        return initial

    def summary(self, items, counted) -> list[SummaryLine]:
        decided = [v for v in counted if v.label in (Case.A, Case.B)]
        ties = sum(v.label == Case.TIE for v in counted)
        return [
            SummaryLine(
                "Rubric-injected preferred",
                sum(v.label == Case.B for v in decided),
                rest=f"of {len(decided)}",
                detail=f"(ties {ties})",
            )
        ]

    def battle_sides(self, item) -> BattleSides:
        # An imported release item has no reply of the Workbench's: its record names the model.
        model = item.model or "unknown"
        return BattleSides(
            source_label(model, condition=Condition.VANILLA),
            source_label(model, condition=Condition.RUBRIC_INJECTED),
            item.dialogue or item.key,
            item.trigger_turn if item.trigger_turn is not None else item.release_turn,
        )

    def battle_winner(self, label: str) -> str:
        return CASE_WINNERS[label]

    def vote_values(self, details, display) -> dict:
        order = display.get("order") or []
        return {
            "position_chosen": details.get("choice", ""),
            "injected_on_left": bool(order) and order[0] == Case.B,
        }


KIND = register(Pairwise())
