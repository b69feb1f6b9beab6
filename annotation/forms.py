"""Forms: creating and importing studies (staff), and one answer form per study kind.

Answer forms turn what the page posts into an ``AnswerInput``: a pairwise choice arrives as a
screen position ("1", "2", "tie") and is mapped back to Case A / B here, on the server, from
the order this annotator was shown — the page itself never knows which side is which.
"""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model

from annotation.kinds import (
    AUDIT_CHECKS,
    AuditDecision,
    FailureMode,
    PairChoice,
    StudyKind,
)
from annotation.models import Assignment, Study
from annotation.services.assignments import AnswerInput
from annotation.services.studies import INSTRUCTIONS_MAX_CHARS, MAX_ITEMS, SEED_MAX, StudySpec
from benchmark.models import Condition, DialogueStatus, EvaluationRun, ModelEndpoint, TriggerType
from core.roles import ANNOTATOR, RESEARCHER

VERDICTS = (("PASS", "Pass"), ("PARTIAL", "Partial"), ("FAIL", "Fail"))
CONFIDENCE = tuple((n, str(n)) for n in range(1, 6))

# The selection fields each kind uses (the creation form shows only these).
KIND_FIELDS = {
    StudyKind.DIALOGUE_AUDIT: ("dialogue_status", "adjudicators"),
    StudyKind.PAIRWISE: ("run", "endpoints", "trigger_type"),
    StudyKind.DIRECT_RATING: ("run", "endpoints", "trigger_type", "condition"),
    StudyKind.FAILURE_MODE: ("run", "endpoints", "condition"),
    StudyKind.ADJUDICATION: ("run", "endpoints", "trigger_type", "condition"),
}
COMMON_FIELDS = (
    "kind",
    "name",
    "instructions",
    "overlap",
    "reason_required",
    "lease_minutes",
    "annotators",
)
TAIL_FIELDS = ("max_items", "seed", "gold")


# The largest id either database can compare with (a 64-bit integer).
LARGEST_ID = 2**63 - 1


class ModelIdsField(forms.ModelMultipleChoiceField):
    """A multiple choice of rows by id. A value no id can be is refused before the query (a
    400-digit number made the ``IN`` lookup raise OverflowError on SQLite: a 500), and an id
    in other digits (Arabic-Indic, full-width) is read as the number it writes, as Django's
    single-choice and integer fields read it, rather than refused as an unknown choice."""

    def _check_values(self, value):
        ids = []
        for pk in value:
            try:
                number = int(str(pk))
            except ValueError:
                ids.append(pk)  # not a number at all: the parent names it as an invalid value
                continue
            if not 0 < number <= LARGEST_ID:
                raise forms.ValidationError(
                    self.error_messages["invalid_pk_value"],
                    code="invalid_pk_value",
                    params={"pk": str(pk)[:40]},
                )
            ids.append(str(number))
        return super()._check_values(ids)


def annotator_choices(*groups: str):
    """Active members of the given role groups (default: annotators)."""
    return (
        get_user_model()
        .objects.filter(is_active=True, groups__name__in=groups or (ANNOTATOR,))
        .order_by("username")
        .distinct()
    )


class StudyCreateForm(forms.Form):
    kind = forms.ChoiceField(choices=StudyKind.choices)
    name = forms.CharField(
        max_length=200, help_text="Annotators see it: never name a model, judge or condition."
    )
    instructions = forms.CharField(
        required=False,
        max_length=INSTRUCTIONS_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Shown above every item. Same rule as the name.",
    )
    overlap = forms.IntegerField(
        min_value=1,
        max_value=20,
        initial=2,
        label="Annotators per item (k)",
        help_text="A dialogue audit has 2 (and a third when they split).",
    )
    reason_required = forms.BooleanField(
        required=False, label="Reason required", help_text="Direct rating always requires one."
    )
    lease_minutes = forms.IntegerField(
        min_value=1,
        max_value=24 * 60,
        initial=30,
        help_text="An item held this long without an answer may go to someone else.",
    )
    annotators = ModelIdsField(queryset=annotator_choices(), widget=forms.CheckboxSelectMultiple)
    adjudicators = ModelIdsField(
        queryset=annotator_choices(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Who may be the third auditor when two split (default: any annotator); "
        "researchers may be chosen too.",
    )
    run = forms.ModelChoiceField(
        queryset=EvaluationRun.objects.order_by("-created_at"),
        required=False,
        help_text="The evaluation run the replies come from.",
    )
    endpoints = ModelIdsField(
        queryset=ModelEndpoint.objects.all(),
        required=False,
        label="Models",
        widget=forms.CheckboxSelectMultiple,
        help_text="Leave all unticked for every model of the run.",
    )
    trigger_type = forms.ChoiceField(
        choices=[("", "Any"), *TriggerType.choices], required=False, initial=TriggerType.RECOVERY
    )
    condition = forms.ChoiceField(choices=[("", "Any"), *Condition.choices], required=False)
    dialogue_status = forms.ChoiceField(
        choices=[("", "Any"), *DialogueStatus.choices],
        required=False,
        initial=DialogueStatus.DRAFT,
        label="Dialogues in status",
    )
    max_items = forms.IntegerField(
        min_value=1,
        max_value=MAX_ITEMS,
        required=False,
        label="At most this many items",
        help_text="A seeded random sample; empty = every item of the selection.",
    )
    seed = forms.IntegerField(
        min_value=0,
        max_value=SEED_MAX,
        required=False,
        help_text="For the sample and the order (empty = random).",
    )
    gold = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}),
        label="Gold items",
        help_text=(
            "One per line: the item key, a space, the expected answer (pairwise A / B / tie, "
            "audit pass / fail, verdicts PASS / PARTIAL / FAIL, failure modes by name)."
        ),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Querysets are evaluated per form, so new users and runs appear without a restart.
        self.fields["annotators"].queryset = annotator_choices()
        # A split audit may well be settled by a researcher.
        self.fields["adjudicators"].queryset = annotator_choices(ANNOTATOR, RESEARCHER)

    def chosen_kind(self) -> str:
        raw = self.data.get("kind") if self.is_bound else self.initial.get("kind")
        return raw if raw in StudyKind.values else StudyKind.PAIRWISE

    def visible_fields_for_kind(self):
        kind = self.chosen_kind()
        names = (*COMMON_FIELDS, *KIND_FIELDS[kind], *TAIL_FIELDS)
        return [self[name] for name in names]

    def to_spec(self) -> StudySpec:
        data = self.cleaned_data
        kind = data["kind"]
        used = set(KIND_FIELDS[kind])
        return StudySpec(
            kind=kind,
            name=data["name"],
            instructions=data["instructions"],
            overlap=data["overlap"],
            reason_required=data["reason_required"],
            lease_minutes=data["lease_minutes"],
            annotators=list(data["annotators"]),
            adjudicators=list(data["adjudicators"]) if "adjudicators" in used else [],
            run=data["run"] if "run" in used else None,
            endpoints=list(data["endpoints"]) if "endpoints" in used else [],
            trigger_type=data["trigger_type"] if "trigger_type" in used else "",
            condition=data["condition"] if "condition" in used else "",
            dialogue_status=data["dialogue_status"] if "dialogue_status" in used else "",
            max_items=data["max_items"],
            seed=data["seed"],
            gold=data["gold"],
        )


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, list | tuple):
            if not data and self.required:  # no file at all: the parent never sees one
                raise forms.ValidationError(self.error_messages["required"], code="required")
            return [single(d, initial) for d in data]
        return [single(data, initial)]


class StudyImportForm(forms.Form):
    kind = forms.ChoiceField(
        choices=[("direct", "Study 1: direct ratings"), ("pairwise", "Study 2: pairwise")]
    )
    items = forms.FileField(help_text="sample_items.json (a JSON array of items)")
    ratings = MultipleFileField(help_text="The raters' files (A01.jsonl …, or P01.jsonl …)")
    name = forms.CharField(max_length=200, required=False)


class ExclusionForm(forms.Form):
    excluded = forms.BooleanField(required=False)
    reason = forms.CharField(required=False, max_length=2000)


# --- Answers ----------------------------------------------------------------------------------


class AnswerForm(forms.Form):
    """What every answer carries. Each subclass adds its kind's fields and ``to_input()``."""

    note_label = "Reason"
    idempotency_key = forms.RegexField(
        regex=r"^[A-Za-z0-9_-]{8,64}$",
        widget=forms.HiddenInput,
        error_messages={"invalid": "The form is damaged: reload the page."},
    )
    elapsed_ms = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)
    note = forms.CharField(required=False, max_length=10_000, widget=forms.Textarea)

    def __init__(self, *args, study: Study, assignment: Assignment, **kwargs):
        super().__init__(*args, **kwargs)
        self.study, self.assignment = study, assignment
        self.fields["note"].label = self.note_label
        self.fields["note"].required = study.reason_required
        self.fields["note"].error_messages["required"] = (
            f"{self.note_label}: this study asks for one (press r to type it)."
        )


def _confidence_field() -> forms.TypedChoiceField:
    return forms.TypedChoiceField(
        choices=CONFIDENCE,
        coerce=int,
        widget=forms.RadioSelect,
        error_messages={"required": "Confidence: choose 1 to 5 (Shift+1 … Shift+5)."},
    )


class PairwiseAnswerForm(AnswerForm):
    choice = forms.ChoiceField(
        choices=PairChoice.choices,
        widget=forms.RadioSelect,
        error_messages={"required": "Choose Response 1, Response 2 or Tie (keys 1, 2, 0)."},
    )
    confidence = _confidence_field()

    def to_input(self) -> AnswerInput:
        choice = self.cleaned_data["choice"]
        order = self.assignment.display["order"]  # e.g. ["B", "A"]: Response 1 is Case B
        label = "tie" if choice == PairChoice.TIE else order[int(choice) - 1]
        return AnswerInput(
            label=label,
            confidence=self.cleaned_data["confidence"],
            note=self.cleaned_data["note"].strip(),
            details={"choice": choice},
        )


class VerdictAnswerForm(AnswerForm):
    verdict = forms.ChoiceField(
        choices=VERDICTS,
        widget=forms.RadioSelect,
        error_messages={"required": "Choose Pass, Partial or Fail (keys p, a, f)."},
    )

    def to_input(self) -> AnswerInput:
        return AnswerInput(
            label=self.cleaned_data["verdict"],
            confidence=self.cleaned_data.get("confidence"),
            note=self.cleaned_data["note"].strip(),
        )


class DirectAnswerForm(VerdictAnswerForm):
    note_label = "Rationale"
    confidence = _confidence_field()


class AdjudicationAnswerForm(VerdictAnswerForm):
    note_label = "Note"


class FailureModeAnswerForm(AnswerForm):
    note_label = "Note"
    label = forms.ChoiceField(
        choices=FailureMode.choices,
        widget=forms.RadioSelect,
        error_messages={"required": "Choose a failure mode (keys 1–5)."},
    )

    def clean(self):
        data = super().clean()
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


class AuditAnswerForm(AnswerForm):
    note_label = "Overall note"
    decision = forms.ChoiceField(
        choices=AuditDecision.choices,
        widget=forms.RadioSelect,
        label="Overall",
        error_messages={"required": "Overall: choose Pass or Fail (keys p, f)."},
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for key, question in AUDIT_CHECKS:
            self.fields[f"check_{key}"] = forms.ChoiceField(
                choices=(("yes", "Yes"), ("no", "No")),
                widget=forms.RadioSelect,
                label=question,
                error_messages={"required": f"{question.split(':')[0]}: answer yes or no."},
            )
            self.fields[f"note_{key}"] = forms.CharField(
                required=False, max_length=2000, label="Note"
            )

    def check_rows(self):
        return [(self[f"check_{key}"], self[f"note_{key}"]) for key, _ in AUDIT_CHECKS]

    def to_input(self) -> AnswerInput:
        data = self.cleaned_data
        checks = {
            key: {"ok": data[f"check_{key}"] == "yes", "note": data[f"note_{key}"].strip()}
            for key, _ in AUDIT_CHECKS
        }
        return AnswerInput(
            label=data["decision"], note=data["note"].strip(), details={"checks": checks}
        )


ANSWER_FORMS: dict[str, type[AnswerForm]] = {
    StudyKind.PAIRWISE: PairwiseAnswerForm,
    StudyKind.DIRECT_RATING: DirectAnswerForm,
    StudyKind.ADJUDICATION: AdjudicationAnswerForm,
    StudyKind.FAILURE_MODE: FailureModeAnswerForm,
    StudyKind.DIALOGUE_AUDIT: AuditAnswerForm,
}


def answer_form_initial(kind: str, answer) -> dict:
    """A retracted answer as form values, so an undone item comes back as it was answered."""
    if answer is None:
        return {}
    initial = {"note": answer.note, "confidence": answer.confidence}
    if kind == StudyKind.PAIRWISE:
        initial["choice"] = answer.details.get("choice")
    elif kind == StudyKind.FAILURE_MODE:
        initial["label"] = answer.label
    elif kind == StudyKind.DIALOGUE_AUDIT:
        initial["decision"] = answer.label
        for key, check in (answer.details.get("checks") or {}).items():
            initial[f"check_{key}"] = "yes" if check.get("ok") else "no"
            initial[f"note_{key}"] = check.get("note", "")
    else:
        initial["verdict"] = answer.label
    return initial
