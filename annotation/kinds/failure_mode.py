"""Failure-mode labelling (SPEC 2.6): why did a RECOVERY reply that the run's primary judge
failed fail? One of the five modes of ``benchmark.vocabulary.FailureMode``. Each item carries
a transparent heuristic's suggestion (``annotation/heuristics.py``), pre-selected and shown with
its reason; the answer records whether the annotator changed it."""

from __future__ import annotations

from collections import defaultdict

from django import forms

from annotation.forms import AnswerForm
from annotation.heuristics import suggest_failure_mode
from annotation.kinds.base import Shortcut, StudyKind
from annotation.kinds.registry import register
from annotation.kinds.selection import endpoint_names, run_units, unit_key
from annotation.selectors import reply_context
from annotation.services.assignments import AnswerInput
from annotation.services.studies import ItemDraft
from benchmark.models import Judgment, JudgmentState, TriggerType, Turn
from benchmark.vocabulary import FAILURE_MODE_DEFINITIONS, FailureMode, Verdict

# The modes' keys, in order (1–5).
FAILURE_MODE_KEYS: dict[str, tuple[str, ...]] = {
    mode.value: (str(n),) for n, mode in enumerate(FailureMode, start=1)
}


class FailureModeAnswerForm(AnswerForm):
    note_label = "Note"
    label = forms.ChoiceField(
        choices=FailureMode.choices,
        widget=forms.RadioSelect,
        error_messages={"required": "Choose a failure mode (keys 1–5)."},
    )
    keys = {"label": FAILURE_MODE_KEYS}

    def clean(self) -> dict:
        data = super().clean() or {}
        if data.get("label") == FailureMode.OTHER and not (data.get("note") or "").strip():
            self.add_error("note", "Note: describe the failure when you choose “Other”.")
        return data

    def to_input(self) -> AnswerInput:
        suggested = (self.assignment.display.get("suggested") or {}).get("label", "")
        label = self.cleaned_data["label"]
        return AnswerInput(
            label=label,
            note=self.cleaned_data["note"].strip(),
            details={"suggested": suggested, "changed": bool(suggested) and label != suggested},
        )


class FailureModeKind(StudyKind):
    key = "failure_mode"
    label = "Failure-mode labelling"
    order = 50
    labels = tuple(FailureMode.values)
    answer_form = FailureModeAnswerForm
    template = "annotation/items/failure_mode.html"
    shortcuts = tuple(
        Shortcut(keys[0], f"label: {FailureMode(mode).label}")
        for mode, keys in FAILURE_MODE_KEYS.items()
    )
    selection_fields = ("run", "endpoints", "condition")
    empty_selection = "The run's primary judge failed no RECOVERY reply matching this selection."
    tables = ("failure-modes", "human-agreement")

    def answer_shown(self, answer) -> str:
        if answer.label in FailureMode.values:
            return FailureMode(answer.label).label
        return super().answer_shown(answer)

    def check(self, spec, errors) -> None:
        if spec.run is not None and spec.run.primary_judge_id is None:
            errors["run"].append("This run has no primary judge, so no reply has failed.")

    def select(self, spec) -> list[ItemDraft]:
        """RECOVERY replies the run's primary judge failed, each with its suggested label."""
        units = run_units(spec).filter(trigger__type=TriggerType.RECOVERY)
        if spec.condition:
            units = units.filter(condition=spec.condition)
        failed = Judgment.objects.filter(
            judge_id=spec.run.primary_judge_id, state=JudgmentState.DONE, verdict=Verdict.FAIL
        )
        chosen = list(units.filter(id__in=failed.values("unit_id")))
        earlier: dict[int, list[tuple[int, str]]] = defaultdict(list)
        for dialogue_id, index, text in (
            Turn.objects.filter(dialogue_id__in={u.trigger.turn.dialogue_id for u in chosen})
            .order_by("dialogue_id", "index")
            .values_list("dialogue_id", "index", "assistant_response")
        ):
            earlier[dialogue_id].append((index, text))
        drafts = []
        for unit in chosen:
            turn = unit.trigger.turn
            before = [(i, text) for i, text in earlier[turn.dialogue_id] if i < turn.index]
            suggestion = suggest_failure_mode(unit.reply, before)
            drafts.append(
                ItemDraft(
                    key=unit_key(unit),
                    dialogue_id=turn.dialogue_id,
                    trigger_id=unit.trigger_id,
                    unit_id=unit.pk,
                    payload={
                        "suggestion": {"label": suggestion.label, "reason": suggestion.reason}
                    },
                    names=endpoint_names(unit.endpoint),
                )
            )
        return drafts

    def display(self, item, slot) -> dict:
        display = super().display(item, slot)
        suggestion = item.payload.get("suggestion")
        if suggestion:
            display["suggested"] = suggestion
        return display

    def item_view(self, assignment, study) -> dict:
        item = assignment.item
        context = reply_context(item)
        suggestion = assignment.display.get("suggested") or {}
        return {
            "conversation": context.conversation,
            "reply": context.replies.get(item.unit_id, ""),
            "suggestion": {
                "label": suggestion.get("label", ""),
                "name": FailureMode(suggestion["label"]).label if suggestion.get("label") else "",
                "reason": suggestion.get("reason", ""),
            },
            "definitions": [
                (mode.value, FAILURE_MODE_KEYS[mode.value][0], mode.label, definition)
                for mode, definition in FAILURE_MODE_DEFINITIONS.items()
            ],
        }

    def form_initial(self, answer, assignment) -> dict:
        """An undone answer's label, else the suggestion (pre-selected: Enter confirms it)."""
        initial = super().form_initial(answer, assignment)
        if answer is not None:
            initial["label"] = answer.label
        else:
            initial["label"] = (assignment.display.get("suggested") or {}).get("label")
        return initial

    def vote_values(self, details, display) -> dict:
        return {
            "suggested": details.get("suggested") or "",
            "suggestion_changed": details.get("changed"),
        }


KIND = register(FailureModeKind())
