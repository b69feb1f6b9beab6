"""Handing out items (Next), taking answers (Submit) and giving them back (Undo).

Assignment rule: a rater first resumes the item they hold (lease renewed); otherwise they get
the first item in the study's random order that they have not held and that still has room —
live answers plus running leases below its ``required_answers`` (k). Items are therefore filled
up to k in order, and no item ever gets more than k.

Locking (the same order everywhere, so no two transactions wait on each other in a cycle):
the rater's row first (one rater's requests — a double click, two tabs — queue), then item
rows, then assignments. Every change to who holds an item, or to its answer count, happens
with the item's row locked, and the room on an item is counted *after* its lock is taken (a
new statement sees every commit before it), so two annotators pressing Next at once never
both take the last place. On PostgreSQL candidate items are locked with ``SKIP LOCKED``: a
second annotator moves on to the next free item instead of queueing behind the first. SQLite
runs every transaction IMMEDIATE (settings), which serialises writers outright. No
transaction waits for an item's lock while it holds another item's — an answer commits before
the next item is handed out — so item locks cannot deadlock.

Idempotency: an answer carries the form's idempotency key (unique); resubmitting the same key
returns the first answer and changes nothing. Nothing is deleted: an undo retracts the answer
(kept, with ``retracted_at``) and reopens the assignment; an answer that arrives after its item
went to someone else is stored, retracted as ``lapsed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

from django.db import connection, transaction
from django.utils import timezone

from annotation import kinds
from annotation.models import (
    Answer,
    Assignment,
    AssignmentRole,
    AssignmentState,
    Rater,
    RetractionReason,
    Study,
    StudyItem,
    StudyStatus,
)
from annotation.sql import rater_lock
from core.rows import columns, fetch_rows, first, load_each

MAX_TIME_ON_ITEM_S = 24 * 3600


class AnswerRejected(Exception):
    """The answer cannot be taken (the study is closed, or the item is not the rater's)."""


@dataclass(frozen=True)
class AnswerInput:
    """A validated answer, normalised (see annotation/kinds.py for the labels)."""

    label: str
    confidence: int | None = None
    note: str = ""
    details: dict = field(default_factory=dict)


@dataclass
class SubmitResult:
    answer: Answer
    replayed: bool = False  # the same idempotency key again: nothing changed
    late: bool = False  # the item had gone to someone else: stored, not counted
    following: Assignment | None = None  # with hand_out_next: the rater's next item, if any


def _lock_item(item_id: int) -> StudyItem:
    return StudyItem.objects.select_for_update().get(pk=item_id)


def _places_taken(item_id: int, now: datetime, *, excluding: int | None = None) -> int:
    """Places taken on the item — done assignments and running leases — ``excluding`` one."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COUNT(*) FROM {Assignment._meta.db_table}"  # noqa: S608
            " WHERE item_id = %s AND id <> %s"
            " AND (state = %s OR (state = %s AND lease_expires_at > %s))",
            [
                item_id,
                -1 if excluding is None else excluding,
                AssignmentState.DONE,
                AssignmentState.LEASED,
                connection.ops.adapt_datetimefield_value(now),
            ],
        )
        return cursor.fetchone()[0]


def _leased(rater: Rater, *, latest_only: bool = False) -> list[Assignment]:
    """The rater's leased assignments, latest first, each with its item: one plain statement.
    Every answer and workspace request asks, and the ORM's join cost more to compose than to
    run (see ``_first_candidate``)."""
    rows = fetch_rows(
        f"SELECT {columns(Assignment, 'a')}, {columns(StudyItem, 'i')}"  # noqa: S608
        f" FROM {Assignment._meta.db_table} a"
        f" JOIN {StudyItem._meta.db_table} i ON i.id = a.item_id"
        " WHERE a.rater_id = %s AND a.state = %s"
        f" ORDER BY a.leased_at DESC, a.id DESC{' LIMIT 1' if latest_only else ''}",
        [rater.pk, AssignmentState.LEASED],
    )
    held = []
    for row in rows:
        assignment, assignment.item = load_each(row, Assignment, StudyItem)
        held.append(assignment)
    return held


def _lease(study: Study) -> timedelta:
    return timedelta(minutes=study.lease_minutes)


def _renew(assignment: Assignment, study: Study, now: datetime) -> Assignment:
    assignment.leased_at = now
    assignment.lease_expires_at = now + _lease(study)
    Assignment.objects.filter(pk=assignment.pk).update(
        state=AssignmentState.LEASED,
        leased_at=assignment.leased_at,
        lease_expires_at=assignment.lease_expires_at,
    )
    assignment.state = AssignmentState.LEASED
    return assignment


def _first_candidate(
    rater: Rater, now: datetime, *, skipped: list[int], wait: bool
) -> StudyItem | None:
    """The first item in hand-out order (a split audit's third place first) that this rater
    may take — open, never held by them, answers plus running leases below k — with its row
    locked: on PostgreSQL ``SKIP LOCKED`` unless ``wait``; SQLite's IMMEDIATE transaction
    already holds the database. One statement, written as SQL: Django spent more time composing
    the equivalent queryset (a NOT EXISTS, a counting subquery) than the database spent running
    it, and this runs on every answer (bench/README.md, the annotation load benchmark)."""
    role = ""
    if not rater.adjudicates:
        role = "AND NOT i.needs_adjudication"
    elif not rater.annotates:
        role = "AND i.needs_adjudication"
    skip = f"AND i.id NOT IN ({', '.join(['%s'] * len(skipped))})" if skipped else ""
    lock = ""
    if connection.features.has_select_for_update:
        lock = "FOR UPDATE OF i" + ("" if wait else " SKIP LOCKED")
    # Only table names and fixed fragments are formatted in; every value is a parameter.
    sql = f"""
        SELECT {columns(StudyItem, "i")} FROM {StudyItem._meta.db_table} i
        WHERE i.study_id = %s AND i.completed_answers < i.required_answers {role} {skip}
          AND NOT EXISTS (
            SELECT 1 FROM {Assignment._meta.db_table} mine
            WHERE mine.item_id = i.id AND mine.rater_id = %s)
          AND (SELECT COUNT(*) FROM {Assignment._meta.db_table} a
               WHERE a.item_id = i.id
                 AND (a.state = %s OR (a.state = %s AND a.lease_expires_at > %s))
              ) < i.required_answers
        ORDER BY i.needs_adjudication DESC, i.position
        LIMIT 1 {lock}"""  # noqa: S608
    params = [
        rater.study_id,
        *skipped,
        rater.pk,
        AssignmentState.DONE,
        AssignmentState.LEASED,
        connection.ops.adapt_datetimefield_value(now),
    ]
    return first(StudyItem, sql, params)


def _take(rater: Rater, item: StudyItem, now: datetime, *, holders: int) -> Assignment:
    """A new assignment; ``holders`` (the places already taken) is the new rater's slot, which
    the kind's display rotates the side order by."""
    display = kinds.get(rater.study.kind).display(item, holders)
    assignment = Assignment.objects.create(
        item=item,
        rater=rater,
        role=AssignmentRole.ADJUDICATE if item.needs_adjudication else AssignmentRole.ANNOTATE,
        display=display,
        leased_at=now,
        lease_expires_at=now + _lease(rater.study),
    )
    assignment.fresh = True  # never answered: nothing to refill the form from
    return assignment


def assignment_next(*, rater: Rater, now: datetime | None = None) -> Assignment | None:
    """The rater's current assignment: the one they hold (its lease renewed once less than
    half of it is left), else a new one, else None (nothing left for them, or the study is
    closed). See the module docstring for the locking that makes this safe under concurrency."""
    now = now or timezone.now()
    current = assignment_current(rater=rater)
    if current is not None and current.lease_expires_at - now > _lease(rater.study) / 2:
        return current  # the common case (a reload, Next on the item shown): nothing to write
    return _hand_out_in_transaction(rater, now)


def _hand_out_in_transaction(rater: Rater, now: datetime) -> Assignment | None:
    with transaction.atomic():
        # A lease is soft state: should the server crash within the commit delay, the worst
        # case is an item handed out again. Answers stay synchronously committed.
        return _hand_out(rater_lock(rater, relaxed_commit=True), now)


def _hand_out(rater: Rater, now: datetime) -> Assignment | None:
    """Next, once the caller holds the rater's row lock inside a transaction."""
    study = rater.study
    holds_an_item_lock = False
    for assignment in _leased(rater):
        if assignment.lease_expires_at > now:
            return _renew(assignment, study, now)
        # Expired: still theirs unless the item filled up in the meantime.
        item = _lock_item(assignment.item_id)
        holds_an_item_lock = True
        if _places_taken(item.pk, now, excluding=assignment.pk) < item.required_answers:
            return _renew(assignment, study, now)
        Assignment.objects.filter(pk=assignment.pk).update(state=AssignmentState.LAPSED)
    if study.status != StudyStatus.OPEN:
        return None
    skipped: list[int] = []
    while True:
        item = _first_candidate(rater, now, skipped=skipped, wait=False)
        if item is None:
            # Nothing unlocked. An item another rater's transaction holds at this instant
            # may still have room for this rater once that commits: wait for the first such
            # item rather than report "nothing left" too early — but never while holding
            # another item's lock (a lapsed lease's, above): two such waits could deadlock.
            if holds_an_item_lock:
                return None
            item = _first_candidate(rater, now, skipped=skipped, wait=True)
            if item is None:
                return None
        # Counted again now that the row is locked: the statement that locked it counted with
        # the snapshot it started from, which may predate a commit it then waited for.
        taken = _places_taken(item.pk, now)
        if taken < item.required_answers:
            return _take(rater, item, now, holders=taken)
        skipped.append(item.pk)


def assignment_current(*, rater: Rater) -> Assignment | None:
    """What the rater is on right now, without handing anything out (a page load)."""
    return next(iter(_leased(rater, latest_only=True)), None)


def _time_on_item(elapsed_ms: int | None, assignment: Assignment, now: datetime) -> float:
    """The browser's count of time on the item when it is plausible, else the server's."""
    if elapsed_ms is not None and 0 < elapsed_ms <= MAX_TIME_ON_ITEM_S * 1000:
        return round(elapsed_ms / 1000, 3)
    return round(min((now - assignment.leased_at).total_seconds(), MAX_TIME_ON_ITEM_S), 3)


def answer_submit(
    *,
    rater: Rater,
    item_token: str,
    answer: AnswerInput,
    idempotency_key: str,
    elapsed_ms: int | None = None,
    hand_out_next: bool = False,
    now: datetime | None = None,
) -> SubmitResult:
    """Record the rater's answer on their item. Idempotent by ``idempotency_key``. With
    ``hand_out_next``, the rater's next item is then handed out (``assignment_next`` without
    its resume shortcut) and returned as ``following``.

    Two transactions, the answer's committed first: handing out in the answer's own
    transaction would hold the answered item's lock while waiting for a candidate's: two
    annotators who had just answered each other's next candidate would deadlock."""
    now = now or timezone.now()
    with transaction.atomic():
        result = _store_answer(
            rater_lock(rater), item_token, answer, idempotency_key, elapsed_ms, now
        )
    if hand_out_next:
        result.following = _hand_out_in_transaction(rater, now)
    return result


def _store_answer(
    rater: Rater,
    item_token: str,
    answer: AnswerInput,
    idempotency_key: str,
    elapsed_ms: int | None,
    now: datetime,
) -> SubmitResult:
    """The body of ``answer_submit``; the caller holds the rater's row lock.

    One statement reads the rater's own assignment on the item (none: not theirs), the item,
    whose row it locks, and any answer already stored under this idempotency key (a replay;
    the uncorrelated LEFT JOIN adds its id and rater to the row). A row locked by SELECT … FOR
    UPDATE is returned as it is once the lock is taken (PostgreSQL re-reads it if it waited),
    so the item read here is current; so is the assignment, whose state only ever changes
    under its rater's lock, which this transaction holds."""
    lock = "FOR UPDATE OF i" if connection.features.has_select_for_update else ""
    rows = fetch_rows(
        f"SELECT {columns(Assignment, 'a')}, {columns(StudyItem, 'i')},"  # noqa: S608
        " p.id, p.rater_id"
        f" FROM {Assignment._meta.db_table} a"
        f" JOIN {StudyItem._meta.db_table} i ON i.id = a.item_id"
        " LEFT JOIN ("
        f"   SELECT an.id, pa.rater_id FROM {Answer._meta.db_table} an"
        f"   JOIN {Assignment._meta.db_table} pa ON pa.id = an.assignment_id"
        "    WHERE an.idempotency_key = %s"
        " ) p ON 1 = 1"
        f" WHERE i.token = %s AND a.rater_id = %s {lock}",
        [idempotency_key, item_token, rater.pk],
    )
    if not rows:
        raise AnswerRejected("this item is not yours")
    *row, previous_id, previous_rater = rows[0]
    if previous_id is not None:
        if previous_rater != rater.pk:
            raise AnswerRejected("this form was submitted by someone else")
        return SubmitResult(Answer.objects.get(pk=previous_id), replayed=True)
    if rater.study.status != StudyStatus.OPEN:
        raise AnswerRejected("this study is closed")
    assignment, item = load_each(row, Assignment, StudyItem)
    assignment.item = item
    if assignment.state == AssignmentState.DONE:
        live = assignment.answers.get(retracted_at__isnull=True)
        return SubmitResult(live, replayed=True)
    fields = {
        "assignment": assignment,
        "idempotency_key": idempotency_key,
        "label": answer.label,
        "confidence": answer.confidence,
        "note": answer.note,
        "details": answer.details,
        "display": assignment.display,
        "started_at": assignment.leased_at,
        "submitted_at": now,
        "time_on_item_s": _time_on_item(elapsed_ms, assignment, now),
    }
    lapsed = assignment.state == AssignmentState.LAPSED or (
        assignment.lease_expires_at <= now
        and _places_taken(item.pk, now, excluding=assignment.pk) >= item.required_answers
    )
    if lapsed:
        Assignment.objects.filter(pk=assignment.pk).update(state=AssignmentState.LAPSED)
        stored = Answer.objects.create(
            **fields, retracted_at=now, retraction_reason=RetractionReason.LAPSED
        )
        return SubmitResult(stored, late=True)
    stored = Answer.objects.create(**fields)
    Assignment.objects.filter(pk=assignment.pk).update(state=AssignmentState.DONE, completed_at=now)
    item.completed_answers += 1
    _item_changed(item, rater.study, now)
    return SubmitResult(stored)


def answer_undo(*, rater: Rater, now: datetime | None = None) -> Assignment | None:
    """Retract the rater's latest live answer in the study and reopen its item for them
    (returned, to be shown again). None when there is nothing to undo."""
    now = now or timezone.now()
    with transaction.atomic():
        rater = rater_lock(rater)
        if rater.study.status != StudyStatus.OPEN:
            return None
        last = (
            Answer.objects.filter(assignment__rater=rater, retracted_at__isnull=True)
            .order_by("-submitted_at", "-id")
            .values_list("pk", "assignment__item_id")
            .first()
        )
        if last is None:
            return None
        item = _lock_item(last[1])
        answer = Answer.objects.select_related("assignment").get(pk=last[0])
        Answer.objects.filter(pk=answer.pk).update(
            retracted_at=now, retraction_reason=RetractionReason.UNDO
        )
        assignment = answer.assignment
        assignment.completed_at = None
        Assignment.objects.filter(pk=assignment.pk).update(completed_at=None)
        _renew(assignment, rater.study, now)
        item.completed_answers -= 1
        _item_changed(item, rater.study, now)
        assignment.item = item
        return assignment


# --- What an item's answers decide ------------------------------------------------------------


def _item_changed(item: StudyItem, study: Study, now: datetime) -> None:
    """Save the item's count and whatever its live answers now decide (the kind's
    ``decide``). Item row locked."""
    kinds.get(study.kind).decide(item, study, now)
    StudyItem.objects.filter(pk=item.pk).update(
        completed_answers=item.completed_answers,
        required_answers=item.required_answers,
        needs_adjudication=item.needs_adjudication,
        outcome=item.outcome,
    )


class LiveAnswer(NamedTuple):
    label: str
    role: str
    note: str
    user_id: int | None


def live_answers(item: StudyItem) -> list[LiveAnswer]:
    """The item's live answers, in submission order (what a kind's ``decide`` reads)."""
    return [
        LiveAnswer(*row)
        for row in Answer.objects.filter(assignment__item=item, retracted_at__isnull=True)
        .order_by("submitted_at", "id")
        .values_list("label", "assignment__role", "note", "assignment__rater__user_id")
    ]
