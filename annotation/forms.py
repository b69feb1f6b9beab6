"""Forms: creating and importing studies (staff), and the base of every kind's answer form
(each kind's own form lives in its module, ``annotation/kinds/``).

An answer form turns what the page posts into an ``AnswerInput``, on the server: the page
itself never knows which side of a pair is which, or which judge is which.
"""

from __future__ import annotations

from typing import cast

from django import forms
from django.contrib.auth import get_user_model
from django.http import QueryDict

from annotation import kinds
from annotation.models import Assignment, FlagCategory, Study
from annotation.services.assignments import SKIP_REASON_MAX_CHARS, AnswerInput
from annotation.services.flags import FLAG_NOTE_MAX_CHARS
from annotation.services.onboarding import OnboardingSpec
from annotation.services.studies import (
    INSTRUCTIONS_MAX_CHARS,
    MAX_ITEMS,
    SEED_MAX,
    TIME_LIMIT_MAX_S,
    TIME_LIMIT_MIN_S,
    StudySpec,
)
from benchmark.models import Condition, DialogueStatus, EvaluationRun, ModelEndpoint, TriggerType
from core.forms import FastCopyFormMetaclass, ModelIdsField
from core.roles import ANNOTATOR, RESEARCHER

CONFIDENCE = tuple((n, str(n)) for n in range(1, 6))

# Around each kind's own selection fields (``StudyKind.selection_fields``).
COMMON_FIELDS = (
    "kind",
    "name",
    "instructions",
    "overlap",
    "reason_required",
    "lease_minutes",
    "item_time_limit_s",
    "annotators",
    "participation_enabled",
)
TAIL_FIELDS = ("max_items", "seed", "gold")


def annotator_choices(*groups: str):
    """Active members of the given role groups (default: annotators)."""
    return (
        get_user_model()
        .objects.filter(is_active=True, groups__name__in=groups or (ANNOTATOR,))
        .order_by("username")
        .distinct()
    )


class StudyCreateForm(forms.Form):
    kind = forms.ChoiceField(choices=kinds.kind_choices)
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
    item_time_limit_s = forms.IntegerField(
        min_value=TIME_LIMIT_MIN_S,
        max_value=TIME_LIMIT_MAX_S,
        required=False,
        label="Time limit per item (seconds)",
        help_text="Optional. Annotators see a timer; when it runs out the item goes back to the "
        "pool as a skip (time limit) and the next one is offered.",
    )
    annotators = ModelIdsField(
        queryset=annotator_choices(), required=False, widget=forms.CheckboxSelectMultiple
    )
    participation_enabled = forms.BooleanField(
        required=False,
        label="Open to crowd participants",
        help_text="A participation link (e.g. for Prolific) makes an account for this study only "
        "for each participant; then no annotator need be chosen. Completion code and URL: on "
        "the study's page.",
    )
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
    runs = ModelIdsField(
        queryset=EvaluationRun.objects.order_by("-created_at"),
        required=False,
        label="Runs",
        widget=forms.CheckboxSelectMultiple,
        help_text="The evaluation runs the replies come from: one, or several to compare runs.",
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
    conditions = forms.MultipleChoiceField(
        choices=Condition.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Leave all unticked for every condition of the runs.",
    )
    per_pair = forms.IntegerField(
        min_value=1,
        max_value=MAX_ITEMS,
        required=False,
        label="Comparisons per pair of sources",
        help_text="At most this many items per pair, each at another trigger; empty = every "
        "trigger both sources replied at. Pairs are filled in rounds, so all get about as many.",
    )
    reveal_judge_verdict = forms.BooleanField(
        required=False,
        label="Show the judge's verdict after each answer",
        help_text="Off by default: seeing it can anchor the next ratings. Once shown, the "
        "answer it follows is final (Undo is refused).",
    )
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
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Querysets are evaluated per form, so new users and runs appear without a restart.
        cast(ModelIdsField, self.fields["annotators"]).queryset = annotator_choices()
        # A split audit may well be settled by a researcher.
        adjudicators = cast(ModelIdsField, self.fields["adjudicators"])
        adjudicators.queryset = annotator_choices(ANNOTATOR, RESEARCHER)
        if not self.is_bound:  # k starts at the chosen kind's own default
            self.fields["overlap"].initial = kinds.get(self.chosen_kind()).default_overlap
        answers = "; ".join(
            f"{kind.label.lower()}: {' / '.join(kind.labels)}" for kind in kinds.all_kinds()
        )
        self.fields[
            "gold"
        ].help_text = f"One per line: the item key, a space, the expected answer ({answers})."

    def clean(self):
        data = super().clean() or {}
        # Annotators are required unless crowd participants join by the link instead.
        crowd = data.get("participation_enabled")
        if not data.get("annotators") and not crowd and "annotators" not in self.errors:
            self.add_error(
                "annotators", "This field is required (or open the study to crowd participants)."
            )
        return data

    def chosen_kind(self) -> str:
        """The kind whose fields to show: the one chosen, else the first of the menu."""
        raw = self.data.get("kind") if self.is_bound else self.initial.get("kind")
        if isinstance(raw, str) and kinds.find(raw) is not None:
            return raw
        return kinds.all_kinds()[0].key

    def visible_fields_for_kind(self):
        kind = kinds.get(self.chosen_kind())
        names = (*COMMON_FIELDS, *kind.selection_fields, *TAIL_FIELDS)
        return [self[name] for name in names]

    def to_spec(self) -> StudySpec:
        data = self.cleaned_data
        kind = data["kind"]
        used = set(kinds.get(kind).selection_fields)
        return StudySpec(
            kind=kind,
            name=data["name"],
            instructions=data["instructions"],
            overlap=data["overlap"],
            reason_required=data["reason_required"],
            lease_minutes=data["lease_minutes"],
            item_time_limit_s=data["item_time_limit_s"],
            annotators=list(data["annotators"]),
            participation_enabled=data["participation_enabled"],
            adjudicators=list(data["adjudicators"]) if "adjudicators" in used else [],
            run=data["run"] if "run" in used else None,
            runs=list(data["runs"]) if "runs" in used else [],
            endpoints=list(data["endpoints"]) if "endpoints" in used else [],
            trigger_type=data["trigger_type"] if "trigger_type" in used else "",
            condition=data["condition"] if "condition" in used else "",
            conditions=list(data["conditions"]) if "conditions" in used else [],
            per_pair=data["per_pair"] if "per_pair" in used else None,
            reveal_judge_verdict=data["reveal_judge_verdict"]
            if "reveal_judge_verdict" in used
            else False,
            dialogue_status=data["dialogue_status"] if "dialogue_status" in used else "",
            max_items=data["max_items"],
            seed=data["seed"],
            gold=data["gold"],
        )


def kind_switch_data(data: QueryDict) -> QueryDict:
    """The creation form's values after the kind is switched (htmx; the select sends the kind
    it switches from as ``_from_kind``): every value as typed, except k when it was still the
    previous kind's default, which becomes the new kind's (``StudyKind.default_overlap``)."""
    previous, chosen = kinds.find(data.get("_from_kind") or ""), kinds.find(data.get("kind") or "")
    if previous is None or chosen is None:
        return data
    if data.get("overlap", "").strip() in ("", str(previous.default_overlap)):
        data = data.copy()
        data["overlap"] = str(chosen.default_overlap)
    return data


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


class BattleImportForm(forms.Form):
    battles = forms.FileField(
        help_text="JSON Lines in the Chatbot Arena format: model_a, model_b, winner; optional "
        "judge, question_id, turn, tstamp (other keys are ignored)."
    )
    name = forms.CharField(max_length=200, required=False)


class CheckpointImportForm(forms.Form):
    """A HALO checkpoints file and the study it becomes (``annotation.services.checkpoints``)."""

    checkpoints = forms.FileField(help_text="JSON Lines, one checkpoint per line.")
    name = forms.CharField(
        max_length=200, help_text="Annotators see it: never name a model or a source."
    )
    instructions = forms.CharField(
        required=False, max_length=INSTRUCTIONS_MAX_CHARS, widget=forms.Textarea(attrs={"rows": 3})
    )
    annotators = ModelIdsField(queryset=annotator_choices(), widget=forms.CheckboxSelectMultiple)
    overlap = forms.IntegerField(
        min_value=1, max_value=20, initial=2, label="Annotators per checkpoint (k)"
    )
    max_items = forms.IntegerField(
        min_value=1, max_value=MAX_ITEMS, required=False, label="At most this many checkpoints"
    )
    seed = forms.IntegerField(min_value=0, max_value=SEED_MAX, required=False)


class ProposalImportForm(forms.Form):
    """A proposal-review study from a JSONL file of contexts (``services/proposals.py``)."""

    file = forms.FileField(help_text="One context per line (docs/annotation.md, the format).")
    name = forms.CharField(
        max_length=200, help_text="Annotators see it: never name a model of the file."
    )
    instructions = forms.CharField(
        required=False,
        max_length=INSTRUCTIONS_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Shown above every context. Same rule as the name.",
    )
    overlap = forms.IntegerField(
        min_value=1, max_value=20, initial=3, label="Annotators per context (k)"
    )
    annotators = ModelIdsField(queryset=annotator_choices(), widget=forms.CheckboxSelectMultiple)
    lease_minutes = forms.IntegerField(min_value=1, max_value=24 * 60, initial=30)
    reason_required = forms.BooleanField(required=False, label="Reason required")
    seed = forms.IntegerField(
        min_value=0, max_value=SEED_MAX, required=False, help_text="For the hand-out order."
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        cast(ModelIdsField, self.fields["annotators"]).queryset = annotator_choices()


class ExclusionForm(forms.Form):
    excluded = forms.BooleanField(required=False)
    reason = forms.CharField(required=False, max_length=2000)


class SkipForm(forms.Form):
    """Skip the held item: an optional reason (``services.assignments.item_skip``)."""

    reason = forms.CharField(required=False, max_length=SKIP_REASON_MAX_CHARS)


class FlagForm(forms.Form):
    """Flag an item for staff (``services.flags.item_flag``)."""

    category = forms.ChoiceField(
        choices=FlagCategory.choices,
        widget=forms.RadioSelect,
        error_messages={"required": "Choose what is wrong with the item."},
    )
    note = forms.CharField(required=False, max_length=FLAG_NOTE_MAX_CHARS, widget=forms.Textarea)


# --- Answers ----------------------------------------------------------------------------------


class AnswerForm(forms.Form, metaclass=FastCopyFormMetaclass):
    """What every answer carries. Each kind's subclass adds its fields and ``to_input()``.

    ``keys``: per radio field, each option's keyboard keys (``{"verdict": {"PASS": ("p",)}}``):
    the templates write them on the options (``annotation_tags.radios``), the ``?`` overlay
    lists the kind's ``shortcuts``."""

    note_label = "Reason"
    keys: dict[str, dict[str, tuple[str, ...]]] = {}
    idempotency_key = forms.RegexField(
        regex=r"^[A-Za-z0-9_-]{8,64}$",
        widget=forms.HiddenInput,
        error_messages={"invalid": "The form is damaged: reload the page."},
    )
    elapsed_ms = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)
    note = forms.CharField(required=False, max_length=10_000, widget=forms.Textarea)

    def __init__(self, *args, study: Study, assignment: Assignment, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.study, self.assignment = study, assignment
        self.fields["note"].label = self.note_label
        self.fields["note"].required = study.reason_required
        self.fields["note"].error_messages["required"] = (
            f"{self.note_label}: this study asks for one (press r to type it)."
        )

    def to_input(self) -> AnswerInput:
        # Abstract: every kind's form maps its own fields (Django's form metaclass and ABCMeta
        # do not combine, hence no @abstractmethod). The toy kind's test shows one.
        raise NotImplementedError(f"{type(self).__name__} must define to_input()")


def confidence_field() -> forms.TypedChoiceField:
    """Confidence 1–5 (Shift+1 … Shift+5), for the kinds that ask for one."""
    return forms.TypedChoiceField(
        choices=CONFIDENCE,
        coerce=int,
        widget=forms.RadioSelect,
        error_messages={"required": "Confidence: choose 1 to 5 (Shift+1 … Shift+5)."},
    )


# --- Onboarding and participation (staff) ------------------------------------------------------


class OnboardingForm(forms.Form):
    """A study's consent screen, practice items, qualification threshold and participation
    settings (``services.onboarding.study_onboarding_set`` checks them again)."""

    consent_required = forms.BooleanField(
        required=False,
        label="Consent required",
        help_text="The instructions are a consent screen, accepted before the first item "
        "(recorded with the text's SHA-256; changing the text asks again).",
    )
    practice = forms.CharField(
        required=False,
        max_length=200_000,
        widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}),
        label="Practice items",
        help_text="One per line: the item key, a space, the expected answer, optionally "
        "' | ' and an explanation (Markdown). Given first, with feedback; never counted.",
    )
    qualification_percent = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=100,
        label="Qualification threshold (%)",
        help_text="Minimum share of practice items answered as expected; empty = none.",
    )
    participation_enabled = forms.BooleanField(
        required=False,
        label="Participation link on",
        help_text="The link below makes an account for this study only for each participant.",
    )
    completion_code = forms.CharField(required=False, max_length=64)
    completion_url = forms.URLField(
        required=False,
        max_length=500,
        assume_scheme="https",
        help_text="e.g. https://app.prolific.com/submissions/complete?cc=CODE",
    )

    def to_spec(self) -> OnboardingSpec:
        data = self.cleaned_data
        return OnboardingSpec(
            consent_required=data["consent_required"],
            qualification_percent=data["qualification_percent"],
            participation_enabled=data["participation_enabled"],
            completion_code=data["completion_code"].strip(),
            completion_url=data["completion_url"].strip(),
            practice=data["practice"],
        )


class QualificationOverrideForm(forms.Form):
    qualified = forms.BooleanField(required=False)
    reason = forms.CharField(required=False, max_length=2000)


class ConsentForm(forms.Form):
    """The acceptance carries the hash of the text shown, so an acceptance of an older
    version (the text changed while the page was open) is not taken for the new one."""

    text_sha256 = forms.RegexField(regex=r"^[0-9a-f]{64}$", widget=forms.HiddenInput)
    agree = forms.BooleanField(
        required=True, error_messages={"required": "Tick the box to say you agree."}
    )
