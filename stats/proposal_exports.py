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
unless ``include_excluded``. Two queries, read as they go (server-side cursors on
PostgreSQL) and merged on the item's id — the contexts, and their answers — ``CHUNK`` contexts
to a chunk of text; a context's JSON is written as the database holds it, never parsed, into
each of its lines: memory stays flat whatever the study's size.

``votes_rows`` is the raw per-decision export (``proposal-votes``, registered in
``stats/exports.py``): one row per decision of every answer, retracted ones flagged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
from django.db.models import Q
from django.db.models.fields.json import KT, KeyTextTransform

from annotation.kinds.proposal_review import KIND as PROPOSAL_REVIEW
from annotation.models import Answer, Study, StudyItem
from benchmark.vocabulary import PROPOSAL_LABEL_OF_CODE, ProposalDecision, ProposalLabel
from stats.compute.proposals import majority_codes
from stats.tables import Column

CHUNK = 250  # contexts per chunk of text (about 1 MB)
FETCH = 2000  # rows per round trip of each query
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
REJECTED, ACCEPTED, TIED = (label.value for label in ProposalLabel)


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


def votes_check(filters: dict[str, Any]) -> None:
    """The ``proposal-votes`` raw export's check of its ``study`` filter (``check_study``),
    before anything is streamed."""
    check_study(filters.get("study"))


# The json module's own encoder of a string (what ``json.dumps(text, ensure_ascii=False)``
# writes, quotes included), without ``dumps``' per-call set-up: a line holds five of them.
_dump = json.encoder.encode_basestring


def _items(study_id: int | None) -> Iterator[tuple]:
    """The proposal-review items in id order, from one query read as it goes (a server-side
    cursor on PostgreSQL): id, study, key, the proposals (JSON text), and the context's events
    or conversation as the JSON text the database holds (written into the lines as they are,
    never parsed)."""
    # One study's kind is checked before (``check_study``): no join to read it again.
    if study_id is not None:
        items = StudyItem.objects.filter(study_id=study_id)
    else:
        items = StudyItem.objects.filter(study__kind=PROPOSAL_REVIEW.key)
    return (
        items.annotate(
            proposals_json=KT("payload__proposals"),
            events_json=KT("payload__events"),
            conversation_json=KT("payload__conversation"),
        )
        .order_by("pk")
        .values_list("pk", "study_id", "key", "proposals_json", "events_json", "conversation_json")
        .iterator(chunk_size=FETCH)
    )


def _answers(study_id: int | None, include_excluded: bool) -> Iterator[tuple]:
    """The counted answers (live; excluded raters' left out unless asked) in item order, from
    one query read as it goes: item id, its decisions (JSON text), and its "reject all" flag
    (``true`` / ``false`` on PostgreSQL, ``1`` / ``0`` on SQLite). Asked from the items' side
    (one ``filter`` call: every condition on the same answer), so that the plans walk the
    study's items in id order down to their answers rather than every study's assignments."""
    if study_id is not None:
        items = StudyItem.objects.filter(study_id=study_id)
    else:
        items = StudyItem.objects.filter(study__kind=PROPOSAL_REVIEW.key)
    answer = {"assignments__answers__isnull": False, "assignments__answers__retracted_at": None}
    if not include_excluded:
        answer["assignments__rater__excluded"] = False
    details = "assignments__answers__details"
    return (
        items.filter(**answer)
        .annotate(
            decisions_json=KeyTextTransform("decisions", details),
            reject_all=KeyTextTransform("reject_all", details),
        )
        .order_by("pk")
        .values_list("pk", "decisions_json", "reject_all")
        .iterator(chunk_size=FETCH)
    )


def _contexts(study_id: int | None, include_excluded: bool) -> Iterator[list[tuple]]:
    """CHUNK contexts at a time, each as (item row, its answers' decisions, how many of them
    were "reject all"): the two ordered queries merged on the item's id."""
    answers = _answers(study_id, include_excluded)
    pending = next(answers, None)
    chunk = []
    for row in _items(study_id):
        decisions, reject_all = [], 0
        while pending is not None and pending[0] <= row[0]:
            if pending[0] == row[0]:
                decisions.append(json.loads(pending[1]) if pending[1] else {})
                reject_all += str(pending[2]).lower() in ("true", "1")
            pending = next(answers, None)
        chunk.append((row, decisions, reject_all))
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _labelled(chunk: list[tuple]) -> list[tuple]:
    """Each context of the chunk with its decided proposals: (item row, [(proposal, accepts,
    rejects, label)], its "reject all" count); the labels of the whole chunk from one
    ``majority_codes``."""
    contexts, counts = [], []
    for row, decisions, reject_all in chunk:
        tally: dict[str, list[int]] = {}
        for answer in decisions:
            for pid, decision in answer.items():
                # PROPOSAL_DECISIONS order: reject 0, accept 1.
                tally.setdefault(pid, [0, 0])[decision == ProposalDecision.ACCEPT] += 1
        decided = [(p, tally[p["id"]]) for p in json.loads(row[3] or "[]") if p["id"] in tally]
        contexts.append((row, decided, reject_all))
        counts += [votes for _, votes in decided]
    codes = iter(majority_codes(np.array(counts, dtype=np.int64)).tolist())
    return [
        (
            row,
            [
                (p, accepts, rejects, PROPOSAL_LABEL_OF_CODE.get(next(codes), TIED))
                for p, (rejects, accepts) in decided
            ],
            reject_all,
        )
        for row, decided, reject_all in contexts
    ]


def _votes(accepts: int, rejects: int) -> str:
    return f'{{"accept": {accepts}, "reject": {rejects}}}'


def _proposal(p: dict) -> str:
    """A proposal's id, text and source, as the members of a JSON object."""
    text = _dump(p["text"])
    return f'"proposal_id": {_dump(p["id"])}, "proposal": {text}, "source": {_dump(p["source"])}'


def reward_lines(
    what: str, *, study_id: int | None = None, include_excluded: bool = False
) -> Iterator[str]:
    """The ``labels`` or ``pairs`` export as text chunks of JSON lines (one chunk per CHUNK
    contexts) of ``study_id`` — a proposal-review study: ``check_study`` it first, as nothing
    here can report an error once the lines are being sent — or of every such study. Each
    line is assembled from its values' JSON; the context is the database's own JSON text, the
    same in every line of its context."""
    if what not in FORMATS:
        raise ExportInputError(f"the reward-model export is {' or '.join(FORMATS)}, not {what!r}")
    for chunk in _contexts(study_id, include_excluded):
        lines = []
        for row, proposals, reject_all in _labelled(chunk):
            _, study, key, _, events, conversation = row
            if not proposals:
                continue
            head = f'{{"study_id": {study}, "context_id": {_dump(key)}, '
            context = (
                f'{{"events": {events}}}'
                if events and events != "[]"
                else f'{{"conversation": {conversation or "[]"}}}'
            )
            if what == "labels":
                lines += [
                    f'{head}{_proposal(p)}, "label": "{label}", '
                    f'"votes": {_votes(accepts, rejects)}, "n_annotators": {accepts + rejects}, '
                    f'"context_reject_all": {reject_all}, "context": {context}}}\n'
                    for p, accepts, rejects, label in proposals
                ]
                continue
            chosen, rejected = (
                [
                    f'{{{_proposal(p)}, "votes": {_votes(accepts, rejects)}}}'
                    for p, accepts, rejects, this in proposals
                    if this == label
                ]
                for label in (ACCEPTED, REJECTED)
            )
            lines += [
                f'{head}"chosen": {one}, "rejected": {other}, "context": {context}}}\n'
                for one in chosen
                for other in rejected
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
    answers = Answer.objects.filter(
        assignment__item__study__kind=PROPOSAL_REVIEW.key, assignment__item__is_practice=False
    )
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
