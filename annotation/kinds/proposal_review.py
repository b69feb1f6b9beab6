"""Proposal review (Proactive Agent, seed 003; SPEC 3): what the user has been doing — an
event timeline, or a conversation up to a trigger — and one or more proactive tasks that models
proposed there. The annotator accepts or rejects each proposal, or rejects them all at once
("no help is the right answer here"); k annotators per context, 3 by default, as the seed's
three annotators.

Where items come from: a documented JSONL file (``annotation/services/proposals.py``,
``manage.py import_proposals``, the admin), or a run — the replies of the chosen models at each
trigger are that trigger's proposals, the conversation up to it the context. Either way the
item's ``payload`` freezes what is shown: ``events`` or ``conversation``, and ``proposals``
(``id``, ``text``, ``source``: the model), plus ``silent``, the models that proposed nothing
there (their decisions count in the precision / recall table). Sources never reach the page:
proposals are "Proposal 1…n" in an order that rotates between an item's raters
(``StudyKind.display`` over the proposal ids), and the form speaks in screen positions only.

An answer stores each proposal's decision by proposal id (``details["decisions"]``) and
whether it was "reject all" (``details["reject_all"]``); its label says what it amounts to
(``ReviewLabel``). What a proposal's annotators decide together — its majority label — is the
statistics' business (``stats/compute/proposals.py``, docs/statistics.md). The votes export
has no column of this kind's own: each decision is a row of the ``proposal-votes`` export.
"""

from __future__ import annotations

from collections import defaultdict

from django import forms
from django.db import models

from annotation.forms import AnswerForm
from annotation.kinds.base import Shortcut, StudyKind, SummaryLine
from annotation.kinds.dialogue_audit import MOVE_KEYS, ROW_KEYS
from annotation.kinds.registry import register
from annotation.kinds.selection import endpoint_names, run_units
from annotation.metrics import Vote, percent_agreement
from annotation.models import Answer
from annotation.services.assignments import AnswerInput
from annotation.services.studies import ItemDraft
from benchmark.evaluation.requests import conversation_until
from benchmark.models import Condition, Turn
from benchmark.vocabulary import ProposalDecision

DEFAULT_OVERLAP = 3  # the seed's three annotators per proposal
MAX_PROPOSALS = 20  # per context: a screen, not a list to scroll through


class ReviewLabel(models.TextChoices):
    """What one answer amounts to, for the context as a whole (the label agreement, gold and
    the study page read; each proposal's own decision is in ``details``)."""

    REJECT_ALL = "reject_all", "Reject all (no help needed)"
    NONE_ACCEPTED = "none_accepted", "Each proposal rejected"
    SOME_ACCEPTED = "some_accepted", "At least one proposal accepted"


# Accept first: the columns' order on screen. Keys answer the current row, then move on.
DECISION_CHOICES = (
    (ProposalDecision.ACCEPT.value, ProposalDecision.ACCEPT.label),
    (ProposalDecision.REJECT.value, ProposalDecision.REJECT.label),
)
DECISION_KEYS: dict[str, tuple[str, ...]] = {
    ProposalDecision.ACCEPT: ("y",),
    ProposalDecision.REJECT: ("n",),
}
REJECT_ALL_KEY = "0"
ANSWER_KEYS = " / ".join(keys[0] for keys in DECISION_KEYS.values())


def proposal_field(position: int) -> str:
    """The form field of the proposal shown in ``position`` (1, 2, …): a screen position,
    never the proposal's id or source."""
    return f"proposal_{position}"


class ProposalReviewForm(AnswerForm):
    """One accept / reject field per proposal on screen, or the "reject all" button (a submit
    button of its own: its value arrives only when it was pressed). Positions are mapped back
    to proposal ids here, on the server, from the order this annotator was shown."""

    note_label = "Note"
    reject_all = forms.BooleanField(required=False, widget=forms.HiddenInput)
    row_keys = {way: " ".join(keys) for way, keys in ROW_KEYS.items()}
    rows_hint = f"{MOVE_KEYS} to move, {ANSWER_KEYS} to accept / reject"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.order: list[str] = list(self.assignment.display.get("order") or [])
        self.keys = {}
        for position in range(1, len(self.order) + 1):
            name = proposal_field(position)
            self.fields[name] = forms.ChoiceField(
                choices=DECISION_CHOICES,
                widget=forms.RadioSelect,
                required=False,  # not when "reject all" was pressed: ``clean`` decides
                label=f"Proposal {position}",
            )
            self.keys[name] = DECISION_KEYS

    def proposal_rows(self) -> list[tuple[int, str, forms.BoundField]]:
        """(position, text, its field) for each proposal on screen."""
        texts = proposal_texts(self.assignment.item.payload)
        return [
            (position, texts.get(pid, ""), self[proposal_field(position)])
            for position, pid in enumerate(self.order, start=1)
        ]

    def clean(self) -> dict:
        data = super().clean() or {}
        if data.get("reject_all"):
            return data  # every proposal rejected: what the rows say is not asked, nor kept
        for position in range(1, len(self.order) + 1):
            if not data.get(proposal_field(position)):
                self.add_error(
                    proposal_field(position),
                    f"Proposal {position}: accept or reject it ({ANSWER_KEYS}), "
                    f"or reject all ({REJECT_ALL_KEY}).",
                )
        return data

    def to_input(self) -> AnswerInput:
        data = self.cleaned_data
        reject_all = bool(data.get("reject_all"))
        decisions = {
            pid: ProposalDecision.REJECT.value
            if reject_all
            else str(data[proposal_field(position)])
            for position, pid in enumerate(self.order, start=1)
        }
        if reject_all:
            label = ReviewLabel.REJECT_ALL
        elif ProposalDecision.ACCEPT in decisions.values():
            label = ReviewLabel.SOME_ACCEPTED
        else:
            label = ReviewLabel.NONE_ACCEPTED
        return AnswerInput(
            label=label.value,
            note=data["note"].strip(),
            details={"decisions": decisions, "reject_all": reject_all},
        )


def proposal_texts(payload: dict) -> dict[str, str]:
    """Proposal id → its text, from an item's payload."""
    return {p["id"]: p.get("text", "") for p in payload.get("proposals") or []}


def _events(payload: dict) -> list[dict]:
    """The timeline: each event's time (ISO 8601, shown with a space for the "T"), kind and
    text."""
    return [
        {
            "time": e.get("time", ""),
            "shown": e.get("time", "").replace("T", " "),
            "kind": e.get("kind", ""),
            "text": e.get("text", ""),
        }
        for e in payload.get("events") or []
    ]


class ProposalReview(StudyKind):
    key = "proposal_review"
    label = "Proposal review"
    order = 60
    labels = tuple(ReviewLabel.values)
    answer_form = ProposalReviewForm
    template = "annotation/items/proposal_review.html"
    shortcuts = (
        Shortcut(MOVE_KEYS, "next / previous proposal"),
        Shortcut(ANSWER_KEYS, "accept / reject the current proposal (then the next one)"),
        Shortcut(REJECT_ALL_KEY, "reject all: no help is the right answer here (submits)"),
    )
    selection_fields = ("run", "endpoints", "trigger_type", "condition")
    empty_selection = "The run has no finished reply (sample 0) matching this selection."
    default_overlap = DEFAULT_OVERLAP
    tables = ("proposal-acceptance", "proposal-decisions", "proposal-agreement", "human-agreement")

    def answer_shown(self, answer: Answer) -> str:
        details = answer.details or {}
        if details.get("reject_all"):
            return ReviewLabel.REJECT_ALL.label
        decisions = details.get("decisions") or {}
        order = (answer.display or {}).get("order") or list(decisions)
        accepted = [
            str(n)
            for n, pid in enumerate(order, start=1)
            if decisions.get(pid) == ProposalDecision.ACCEPT
        ]
        if not accepted:
            return ReviewLabel.NONE_ACCEPTED.label
        plural = "s" if len(accepted) > 1 else ""
        return f"Accepted proposal{plural} {', '.join(accepted)} of {len(order)}"

    # --- From a run ------------------------------------------------------------------------

    def check(self, spec, errors) -> None:
        if spec.run is not None and not spec.condition and len(spec.run.conditions) > 1:
            errors["condition"].append(
                "Choose one condition: a context's proposals are the models' replies in one "
                "condition."
            )

    def select(self, spec) -> list[ItemDraft]:
        """One item per trigger: the conversation up to it, and each chosen model's reply
        there (sample 0, the chosen condition) as a proposal."""
        units = run_units(spec).filter(sample_index=0)
        condition = spec.condition or (spec.run.conditions[0] if spec.run.conditions else "")
        units = units.filter(condition=condition or Condition.VANILLA)
        by_trigger: dict[int, list] = defaultdict(list)
        for unit in units:
            by_trigger[unit.trigger_id].append(unit)
        turns: dict[int, list] = defaultdict(list)
        for turn in Turn.objects.filter(
            dialogue_id__in={u[0].trigger.turn.dialogue_id for u in by_trigger.values()}
        ).order_by("dialogue_id", "index"):
            turns[turn.dialogue_id].append(turn)
        drafts = []
        for replies in by_trigger.values():
            replies.sort(key=lambda u: u.endpoint.name)
            trigger = replies[0].trigger
            dialogue = trigger.turn.dialogue
            key = f"{dialogue.unique_id_eval}#t{trigger.turn.index}"
            proposals = [
                {"id": f"p{n}", "text": unit.reply, "source": unit.endpoint.name}
                for n, unit in enumerate(replies, start=1)
            ]
            messages = conversation_until(trigger, turns[dialogue.pk])
            drafts.append(
                ItemDraft(
                    key=key,
                    dialogue_id=dialogue.pk,
                    trigger_id=trigger.pk,
                    payload={
                        "context_id": key,
                        "conversation": [{"role": m.role, "text": m.content} for m in messages],
                        "proposals": proposals,
                        "silent": [],
                    },
                    names=tuple(n for unit in replies for n in endpoint_names(unit.endpoint)),
                    sides=tuple(p["id"] for p in proposals),
                )
            )
        return drafts

    # --- Showing ---------------------------------------------------------------------------

    def item_view(self, assignment, study) -> dict:
        """The context and the proposals' texts by screen position: never a source or an id."""
        payload = assignment.item.payload
        texts = proposal_texts(payload)
        order = assignment.display.get("order") or []
        return {
            "events": _events(payload),
            "conversation": payload.get("conversation") or [],
            "proposals": [
                {"number": n, "text": texts.get(pid, "")} for n, pid in enumerate(order, start=1)
            ],
        }

    def form_initial(self, answer, assignment) -> dict:
        initial = super().form_initial(answer, assignment)
        if answer is not None:
            decisions = (answer.details or {}).get("decisions") or {}
            for position, pid in enumerate(assignment.display.get("order") or [], start=1):
                if pid in decisions:
                    initial[proposal_field(position)] = decisions[pid]
        return initial

    # --- The study page --------------------------------------------------------------------

    def summary(self, items, counted) -> list[SummaryLine]:
        """Reject-all answers, the share of accept decisions and agreement per proposal so far
        (pairs of decisions on the same proposal that agree, averaged over proposals with two
        or more: ``annotation.metrics.percent_agreement``). A proposal's majority label is the
        statistics' (the proposal-review tables)."""
        if not counted:
            return []
        counted_pairs = {(v.item, v.rater) for v in counted}
        decisions: list[Vote] = []
        proposal_ids: dict[tuple[int, str], int] = {}
        for item, rater, details in Answer.objects.filter(
            assignment__item_id__in={v.item for v in counted}, retracted_at__isnull=True
        ).values_list("assignment__item_id", "assignment__rater_id", "details"):
            if (item, rater) not in counted_pairs:
                continue
            for pid, decision in ((details or {}).get("decisions") or {}).items():
                proposal = proposal_ids.setdefault((item, pid), len(proposal_ids))
                decisions.append(Vote(item=proposal, rater=rater, label=decision, seconds=0.0))
        accepted = sum(d.label == ProposalDecision.ACCEPT for d in decisions)
        agreement, n_proposals = percent_agreement(decisions)
        reject_all = sum(v.label == ReviewLabel.REJECT_ALL for v in counted)
        return [
            SummaryLine(
                "Proposal decisions",
                f"{accepted / len(decisions):.0%}" if decisions else "—",
                rest=f"accepted of {len(decisions)}",
                detail=f"({reject_all} of {len(counted)} answers were “reject all”)",
            ),
            SummaryLine(
                "Agreement per proposal so far",
                f"{agreement:.0%}" if agreement is not None else "—",
                detail=f"over {n_proposals} proposal(s) with 2+ decisions",
            ),
        ]


KIND = register(ProposalReview())
