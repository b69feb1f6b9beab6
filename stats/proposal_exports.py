"""Reward-model training data from proposal-review studies (docs/exports.md, "Reward-model
training data"), as the Proactive Agent paper trains its reward model on majority-voted
accept / reject labels (seed 003): JSON Lines, streamed.

- ``labels`` — one line per proposal that has at least one counted decision: the context, the
  proposal, its source, its majority label (``accepted``, ``rejected`` or ``tied``:
  ``stats.compute.proposals.majority_codes``, the tables' rule), its votes and number of
  annotators, and how many of the context's annotators rejected everything ("reject all").
- ``pairs`` — one line per (accepted, rejected) pair of proposals of the same context: a
  preference pair, ``chosen`` over ``rejected``.

What counts is what the tables count: live answers only; raters a study excludes left out
unless ``include_excluded``. Contexts are read ``CHUNK`` at a time by id (keyset pagination),
each chunk's answers in one more query, and each context is serialised once for all its lines,
so memory stays flat whatever the study's size.

``votes_rows`` is the raw per-decision export (``proposal-votes``, registered in
``stats/exports.py``): one row per decision of every answer, retracted ones flagged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
from django.db.models import Q

from annotation.kinds.proposal_review import KIND as PROPOSAL_REVIEW
from annotation.models import Answer, Study, StudyItem
from benchmark.vocabulary import PROPOSAL_LABEL_OF_CODE, ProposalDecision, ProposalLabel
from stats.compute.proposals import majority_codes
from stats.tables import Column

CHUNK = 500  # contexts per query
FORMATS = ("labels", "pairs")
LABEL_KEYS = (
    "study_id",
    "context_id",
    "proposal_id",
    "proposal",
    "source",
    "label",
    "votes",
    "n_annotators",
    "context_reject_all",
    "context",
)
PAIR_KEYS = ("study_id", "context_id", "chosen", "rejected", "context")


class ExportInputError(ValueError):
    """The export cannot be made as asked (the message says why)."""


def check_study(study_id: int | None) -> None:
    """``LookupError`` when there is no such study, ``ExportInputError`` when it is not a
    proposal-review study; nothing when ``study_id`` is None (every such study)."""
    if study_id is None:
        return
    study = Study.objects.filter(pk=study_id).first()
    if study is None:
        raise LookupError(f"no study {study_id}")
    if study.kind != PROPOSAL_REVIEW.key:
        raise ExportInputError(
            f"study {study_id} is a {study.get_kind_display().lower()} study: the reward-model "
            "export reads proposal-review studies"
        )


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _context(payload: dict) -> dict:
    """What the annotators saw before the proposals: the events, or the conversation."""
    if payload.get("events"):
        return {"events": payload["events"]}
    return {"conversation": payload.get("conversation") or []}


def _items(study_id: int | None) -> Iterator[list[tuple]]:
    """The proposal-review items, CHUNK at a time, in id order."""
    items = StudyItem.objects.filter(study__kind=PROPOSAL_REVIEW.key)
    if study_id is not None:
        items = items.filter(study_id=study_id)
    last = 0
    while True:
        chunk = list(
            items.filter(pk__gt=last)
            .order_by("pk")
            .values_list("pk", "study_id", "key", "payload")[:CHUNK]
        )
        if not chunk:
            return
        yield chunk
        last = chunk[-1][0]


def _decisions(item_ids: list[int], include_excluded: bool) -> dict[int, list[dict]]:
    """Each item's counted answers' details (live; excluded raters' left out unless asked)."""
    answers = Answer.objects.filter(assignment__item_id__in=item_ids, retracted_at__isnull=True)
    if not include_excluded:
        answers = answers.filter(assignment__rater__excluded=False)
    out: dict[int, list[dict]] = {}
    for item_id, details in answers.values_list("assignment__item_id", "details"):
        out.setdefault(item_id, []).append(details or {})
    return out


def _proposals(payload: dict, answers: list[dict]) -> list[tuple[dict, int, int, str]]:
    """(proposal, accepts, rejects, label) for each decided proposal of one context."""
    counts: dict[str, list[int]] = {}
    for details in answers:
        for pid, decision in (details.get("decisions") or {}).items():
            counts.setdefault(pid, [0, 0])[decision == ProposalDecision.ACCEPT] += 1
    decided = [(p, counts[p["id"]]) for p in payload.get("proposals") or [] if p["id"] in counts]
    if not decided:
        return []
    codes = majority_codes(np.array([c for _, c in decided], dtype=np.int64))
    return [
        (p, accepts, rejects, PROPOSAL_LABEL_OF_CODE.get(code, ProposalLabel.TIED.value))
        for (p, (rejects, accepts)), code in zip(decided, codes.tolist(), strict=True)
    ]


def _votes(accepts: int, rejects: int) -> str:
    return f'{{"accept": {accepts}, "reject": {rejects}}}'


def reward_lines(
    what: str, *, study_id: int | None = None, include_excluded: bool = False
) -> Iterator[str]:
    """The ``labels`` or ``pairs`` export as text chunks of JSON lines (one chunk per CHUNK
    contexts). Each line is assembled from its values' JSON, the context's written once."""
    if what not in FORMATS:
        raise ExportInputError(f"the reward-model export is {' or '.join(FORMATS)}, not {what!r}")
    for chunk in _items(study_id):
        answers = _decisions([row[0] for row in chunk], include_excluded)
        lines = []
        for item_id, study, key, payload in chunk:
            proposals = _proposals(payload or {}, answers.get(item_id, []))
            if not proposals:
                continue
            head = f'{{"study_id": {study}, "context_id": {_dump(key)}, '
            context = _dump(_context(payload))
            if what == "labels":
                reject_all = sum(bool(d.get("reject_all")) for d in answers[item_id])
                lines += [
                    f'{head}"proposal_id": {_dump(p["id"])}, "proposal": {_dump(p["text"])}, '
                    f'"source": {_dump(p["source"])}, "label": "{label}", '
                    f'"votes": {_votes(accepts, rejects)}, "n_annotators": {accepts + rejects}, '
                    f'"context_reject_all": {reject_all}, "context": {context}}}\n'
                    for p, accepts, rejects, label in proposals
                ]
                continue
            sides = {
                label: [
                    f'{{"proposal_id": {_dump(p["id"])}, "proposal": {_dump(p["text"])}, '
                    f'"source": {_dump(p["source"])}, "votes": {_votes(accepts, rejects)}}}'
                    for p, accepts, rejects, this in proposals
                    if this == label
                ]
                for label in (ProposalLabel.ACCEPTED, ProposalLabel.REJECTED)
            }
            lines += [
                f'{head}"chosen": {chosen}, "rejected": {rejected}, "context": {context}}}\n'
                for chosen in sides[ProposalLabel.ACCEPTED]
                for rejected in sides[ProposalLabel.REJECTED]
            ]
        if lines:
            yield "".join(lines)


# --- The raw per-decision export --------------------------------------------------------------


def _c(name: str, kind: str, description: str) -> Column:
    return Column(name, kind, description)


VOTE_COLUMNS = (
    _c("answer_id", "int", "The answer's id (one answer per annotator per context)."),
    _c("study_id", "int", "The proposal-review study."),
    _c("item_id", "int", "The study item (one context)."),
    _c("context_id", "str", "The context's id (the import's context_id, or dialogue#turn)."),
    _c("proposal_id", "str", "The proposal's id within its context."),
    _c("source", "str", "The model that proposed it."),
    _c("position", "int", "Where it was shown to this annotator: Proposal 1, 2, ..."),
    _c("decision", "str", "accept or reject."),
    _c("reject_all", "bool", "The annotator rejected every proposal at once ('reject all')."),
    _c("rater_id", "int", "The rater: one per person per study."),
    _c("annotator", "str", "The rater's username."),
    _c("rater_excluded", "bool", "The study excludes this rater from statistics (now)."),
    _c("time_on_item_s", "float", "Seconds on the context."),
    _c("submitted_at", "str", "When the answer was submitted (ISO 8601, UTC)."),
    _c("retracted", "bool", "Withdrawn (undone or late): it counts in no statistic."),
    _c("retraction_reason", "str", "undo or lapsed."),
)


def votes_rows(filters: dict[str, Any]) -> Iterator[tuple]:
    """One row per decision (``VOTE_COLUMNS``) of every proposal-review answer, in answer id
    order; ``filters["study"]`` limits it to one study."""
    answers = Answer.objects.filter(assignment__item__study__kind=PROPOSAL_REVIEW.key)
    if filters.get("study") is not None:
        answers = answers.filter(Q(assignment__item__study_id=filters["study"]))
    values = answers.order_by("id").values_list(
        "id",
        "assignment__item__study_id",
        "assignment__item_id",
        "assignment__item__key",
        "assignment__item__payload__proposals",
        "details",
        "display",
        "assignment__rater_id",
        "assignment__rater__user__username",
        "assignment__rater__excluded",
        "time_on_item_s",
        "submitted_at",
        "retracted_at",
        "retraction_reason",
    )
    for row in values.iterator(chunk_size=2000):
        details, display = row[5] or {}, row[6] or {}
        sources = {p["id"]: p.get("source", "") for p in row[4] or []}
        order = display.get("order") or []
        for pid, decision in (details.get("decisions") or {}).items():
            yield (
                *row[:4],
                pid,
                sources.get(pid, ""),
                order.index(pid) + 1 if pid in order else None,
                decision,
                bool(details.get("reject_all")),
                *row[7:12],
                row[12] is not None,
                row[13],
            )
