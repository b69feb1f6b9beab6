"""The per-trigger sample viewer's read side (docs/statistics.md, "Per-trigger sample viewer"):
a run's triggers filtered by the replies at them, and one trigger with every model's reply in
both conditions, each judge's verdict and evidence, the disagreement and its adjudication, and
the failure-mode labels (the LLM classifier's and people's).

A trigger is in the filtered list when at least one of its replies matches every reply filter
(model, condition, verdict, disagreement, evidence) and the trigger matches the type filter.
The verdict filter reads the chosen verdict source as the dashboard does
(``selectors.VerdictSource``). Each function reads in a fixed number of queries, however many
models, judges or labels there are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.db.models import Count, Q, QuerySet

from annotation.kinds.failure_mode import FailureModeKind
from annotation.models import Answer
from benchmark.evaluation.requests import conversation_until
from benchmark.models import (
    Condition,
    EvaluationRun,
    EvaluationUnit,
    EvidenceStatus,
    Judgment,
    JudgmentState,
    Trigger,
    TriggerType,
    Turn,
)
from benchmark.vocabulary import FailureMode, Verdict
from stats import selectors

DISAGREEMENT_CHOICES = [
    ("any", "Judges disagree"),
    ("unresolved", "Disagree, not adjudicated"),
    ("resolved", "Disagree, adjudicated"),
    ("none", "Judges agree"),
]
EVIDENCE_CHOICES = [("not_found", "Some evidence not found in the reply")]
FILTER_NAMES = ("model", "type", "condition", "verdicts", "verdict", "disagreement", "evidence")
JUDGE_LETTERS = "abc"  # evidence colours in app.css; further judges share the last


class TriggerFilterForm(forms.Form):
    """The viewer's filters as GET parameters; all optional. A value that is not one of a
    field's choices is refused (the views answer 400 naming the field)."""

    model = forms.ChoiceField(required=False)
    type = forms.ChoiceField(required=False, choices=[("", "Any type"), *TriggerType.choices])
    condition = forms.ChoiceField(
        required=False, choices=[("", "Both conditions"), *Condition.choices]
    )
    verdicts = forms.ChoiceField(required=False, label="Verdict source")
    verdict = forms.ChoiceField(required=False, choices=[("", "Any verdict"), *Verdict.choices])
    disagreement = forms.ChoiceField(
        required=False, choices=[("", "Any agreement"), *DISAGREEMENT_CHOICES]
    )
    evidence = forms.ChoiceField(required=False, choices=[("", "Any evidence"), *EVIDENCE_CHOICES])

    def __init__(self, data, *, run: EvaluationRun, **kwargs):
        super().__init__(data, **kwargs)
        self.run = run
        endpoints = run.endpoints.order_by("name").values_list("name", "display_name")
        model = self.fields["model"]
        assert isinstance(model, forms.ChoiceField)
        model.choices = [("", "Every model"), *endpoints]
        verdicts = self.fields["verdicts"]
        assert isinstance(verdicts, forms.ChoiceField)
        verdicts.choices = [
            ("primary", "Primary judge"),
            ("adjudicated", "Adjudicated (else primary)"),
            *((name, f"Judge: {name}") for name in selectors.run_judge_names(run)),
        ]

    def error_message(self) -> str:
        return "; ".join(
            f"{name}: {' '.join(str(e) for e in errors)}" for name, errors in self.errors.items()
        )

    def query(self) -> dict[str, str]:
        """The filters set, for links that carry them (prev / next, back to the list); the
        default verdict source (primary) is left out."""
        return {
            k: v
            for k, v in self.cleaned_data.items()
            if k in FILTER_NAMES and v and not (k == "verdicts" and v == "primary")
        }


def _verdict_q(run: EvaluationRun, source: selectors.VerdictSource, verdict: str) -> Q:
    """Units whose verdict from ``source`` is ``verdict``."""
    judge = selectors.judge_name_for(run, source)
    by_judge = Q(
        id__in=Judgment.objects.filter(
            unit__run=run, judge_name=judge, state=JudgmentState.DONE, verdict=verdict
        ).values("unit_id")
    )
    if source.kind != "adjudicated":
        return by_judge
    unadjudicated = Q(disagreement__isnull=True) | Q(disagreement__final_verdict="")
    return Q(disagreement__final_verdict=verdict) | (by_judge & unadjudicated)


def matching_units(run: EvaluationRun, filters: dict[str, str]) -> QuerySet[EvaluationUnit]:
    """The run's units matching the reply filters (and the trigger type filter)."""
    units = EvaluationUnit.objects.filter(run=run)
    if filters.get("model"):
        units = units.filter(endpoint__name=filters["model"])
    if filters.get("type"):
        units = units.filter(trigger__type=filters["type"])
    if filters.get("condition"):
        units = units.filter(condition=filters["condition"])
    if filters.get("verdict"):
        source = selectors.VerdictSource.parse(filters.get("verdicts"))
        units = units.filter(_verdict_q(run, source, filters["verdict"]))
    disagreement = filters.get("disagreement")
    if disagreement == "any":
        units = units.filter(disagreement__isnull=False)
    elif disagreement == "unresolved":
        units = units.filter(disagreement__isnull=False, disagreement__final_verdict="")
    elif disagreement == "resolved":
        units = units.filter(disagreement__isnull=False).exclude(disagreement__final_verdict="")
    elif disagreement == "none":
        units = units.filter(disagreement__isnull=True)
    if filters.get("evidence") == EvidenceStatus.NOT_FOUND:
        units = units.filter(
            id__in=Judgment.objects.filter(
                unit__run=run, evidence_status=EvidenceStatus.NOT_FOUND
            ).values("unit_id")
        )
    return units


TRIGGER_ORDER = ("turn__dialogue__unique_id_eval", "turn__index", "id")


def trigger_rows(run: EvaluationRun, filters: dict[str, str]) -> list[dict[str, Any]]:
    """The filtered triggers in reading order (dialogue, turn), each with how many of its
    replies match: one query."""
    return list(
        Trigger.objects.filter(units__in=matching_units(run, filters))
        .annotate(matching=Count("units", distinct=True))
        .order_by(*TRIGGER_ORDER)
        .values("id", "type", "turn__index", "turn__dialogue__unique_id_eval", "matching")
    )


def trigger_ids(run: EvaluationRun, filters: dict[str, str]) -> list[int]:
    """The filtered triggers' ids, in the list's order: one query."""
    return list(
        Trigger.objects.filter(id__in=matching_units(run, filters).values("trigger_id"))
        .order_by(*TRIGGER_ORDER)
        .values_list("id", flat=True)
    )


@dataclass
class JudgeView:
    name: str
    css: str
    judgment: Judgment


@dataclass
class ReplyView:
    unit: EvaluationUnit
    matches: bool
    judges: list[JudgeView]
    marks: list[tuple[str, str]]  # (css class, quote) to highlight in the reply
    classifications: list
    human_labels: list[dict[str, str]] = field(default_factory=list)


@dataclass
class TriggerSample:
    trigger: Trigger
    conversation: list[dict[str, Any]]
    replies: list[ReplyView]
    judges: list[tuple[str, str]]  # (judge name, css class of its evidence marks)


def trigger_sample(run: EvaluationRun, trigger: Trigger, filters: dict[str, str]) -> TriggerSample:
    """One trigger of ``run``: the conversation up to it, every reply at it (model, then
    condition) with its judgments, disagreement and failure-mode labels, and the conversation's
    turn images. Six queries."""
    turns = list(
        Turn.objects.filter(dialogue_id=trigger.turn.dialogue_id, index__lte=trigger.turn.index)
        .order_by("index")
        .only("index", "user_message", "assistant_response")
        .prefetch_related("images")
    )
    by_index = {turn.index: turn for turn in turns}
    conversation = [
        {
            "role": m.role,
            "text": m.content,
            "turn": turn_of,
            # A user message's turn images (multimodal turns), shown as on the dialogue page.
            "images": list(by_index[turn_of].images.all()) if m.role == "user" else [],
        }
        for m, turn_of in _with_turns(conversation_until(trigger, turns), turns)
    ]
    units = list(
        EvaluationUnit.objects.filter(run=run, trigger=trigger)
        .select_related("endpoint", "disagreement__resolved_by")
        .prefetch_related("judgments", "failure_mode_classifications")
        .order_by("endpoint__display_name", "endpoint__name", "condition", "sample_index")
    )
    matching = set(
        matching_units(run, filters).filter(trigger=trigger).values_list("id", flat=True)
    )
    judge_names = sorted({j.judge_name for u in units for j in u.judgments.all()})
    letters = {
        name: JUDGE_LETTERS[min(i, len(JUDGE_LETTERS) - 1)] for i, name in enumerate(judge_names)
    }
    labels: dict[int | None, list[dict[str, str]]] = {}
    for answer in (
        Answer.objects.counted()
        .filter(
            assignment__item__unit__in=[u.pk for u in units],
            assignment__item__study__kind=FailureModeKind.key,
        )
        .select_related("assignment__rater__user", "assignment__item__study")
        .order_by("id")
    ):
        item = answer.assignment.item
        labels.setdefault(item.unit_id, []).append(
            {
                "label": _mode_label(answer.label),
                "rater": str(answer.assignment.rater),
                "note": answer.note,
                "study": f"{item.study.pk} · {item.study.name}",
            }
        )
    replies = []
    for unit in units:
        judges = [
            JudgeView(j.judge_name, f"judge-{letters[j.judge_name]}", j)
            for j in sorted(unit.judgments.all(), key=lambda j: j.judge_name)
        ]
        classifications = sorted(
            unit.failure_mode_classifications.all(), key=lambda c: c.classifier_name
        )
        marks = [(j.css, j.judgment.evidence) for j in judges if j.judgment.evidence]
        marks += [("fm-quote", c.quote) for c in classifications if c.quote]
        replies.append(
            ReplyView(
                unit=unit,
                matches=unit.pk in matching,
                judges=judges,
                marks=marks,
                classifications=classifications,
                human_labels=labels.get(unit.pk, []),
            )
        )
    return TriggerSample(
        trigger, conversation, replies, [(n, f"judge-{letters[n]}") for n in judge_names]
    )


def _with_turns(messages, turns):
    """Each message with the index of the turn it belongs to (user, then assistant per turn)."""
    index = iter(t.index for t in turns for _ in range(2))
    return [(m, next(index)) for m in messages]


def _mode_label(value: str) -> str:
    return FailureMode(value).label if value in FailureMode.values else value
