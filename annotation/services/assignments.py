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
runs every transaction IMMEDIATE (settings), which serialises writers outright.

No transaction waits for an item's lock while it holds another item's, so item locks cannot
deadlock. An answer's transaction holds the answered item's lock, so it hands out the next item
itself only when it can without waiting: with ``SKIP LOCKED`` (a lock taken that way never
waits, so it may come after the assignment writes), and only in the common case (the rater
holds no other lease, the onboarding gate is open); otherwise — and when every candidate with
room is locked by someone else at that instant — it commits first and the next item is handed
out in a transaction of its own, which may wait for a candidate's lock.

The writes every Next and answer make — the answer, the new assignment, a renewal, the item's
count — go through ``core.rows.insert`` and ``update``: the statements the ORM would send,
without composing them afresh on each request.

Idempotency: an answer carries the form's idempotency key (unique); resubmitting the same key
returns the first answer and changes nothing, and so does a second answer to an item already
answered (another tab): the first is kept, and the result says so when the two differ. Nothing
is deleted: an undo retracts the answer (kept, with ``retracted_at``) and reopens the
assignment; an answer that arrives after its item went to someone else is stored, retracted as
``lapsed``. An answer after which the judge's verdict was shown (``answer_verdict_reveal``) is
final: undo refuses it, or else a rater could answer again knowing the verdict and the agreement
statistics would count the copy.

Skip (``item_skip``): the rater gives their held item back, with an optional reason. Their
assignment becomes ``SKIPPED`` — no longer a place on the item, so the item is free for others
at once — and stays, so that ``sql.first_candidate`` (which passes over every item the rater
ever held) never hands it to them again. An ``ItemSkip`` row records who, what, why and when.

Item time limit (``Study.item_time_limit_s``): each hand-out (and each reopening by undo) sets
``time_limit_ends_at``; a lease renewal does not move it, and the lease itself never runs past
it by more than ``TIME_LIMIT_GRACE``, so the place is free for others then even if the rater's
browser is gone. Once it has passed, the rater's next Next (the page's timer sends one) records
the item as skipped with cause ``time_limit`` and hands out another; an answer that arrives
more than ``TIME_LIMIT_GRACE`` after it is kept, retracted as ``time_limit``, and not counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

from django.db import transaction
from django.utils import timezone

from annotation import kinds, selectors, sql
from annotation.models import (
    Answer,
    Assignment,
    AssignmentRole,
    AssignmentState,
    ItemSkip,
    Rater,
    RetractionReason,
    SkipCause,
    Study,
    StudyItem,
    StudyStatus,
)
from annotation.services import onboarding
from core import rows

MAX_TIME_ON_ITEM_S = 24 * 3600
# How long after an item's time limit its answer is still taken: the answer of a rater who
# pressed Enter as the timer ran out is in flight for a moment.
TIME_LIMIT_GRACE = timedelta(seconds=5)
SKIP_REASON_MAX_CHARS = 500


class AnswerRejected(Exception):
    """The answer cannot be taken (the study is closed, or the item is not the rater's)."""


class UndoRefused(Exception):
    """The last answer cannot be undone: the rater has seen the judge's verdict on its item."""


class SkipRefused(Exception):
    """The item cannot be skipped: the study is closed, or the rater no longer holds it."""


@dataclass(frozen=True)
class AnswerInput:
    """A validated answer, normalised (its label one of the kind's ``StudyKind.labels``)."""

    label: str
    confidence: int | None = None
    note: str = ""
    details: dict = field(default_factory=dict)


@dataclass
class SubmitResult:
    answer: Answer
    replayed: bool = False  # the same idempotency key again: nothing changed
    # The rater had already answered the item differently (another tab or window, or the same
    # form sent again after a change): that first answer, ``answer``, is kept and this one is not
    # stored. The first is kept because the statistics, and whatever the rater saw after it
    # (the next item, a judge's verdict), already followed from it.
    kept_earlier: bool = False
    late: bool = False  # the item had gone to someone else: stored, not counted
    timed_out: bool = False  # after the item's time limit (and its grace): stored, not counted
    following: Assignment | None = None  # with hand_out_next: the rater's next item, if any


def _lock_item(item_id: int) -> StudyItem:
    return StudyItem.objects.select_for_update().get(pk=item_id)


def _lease(study: Study) -> timedelta:
    return timedelta(minutes=study.lease_minutes)


def _lease_end(study: Study, now: datetime, time_limit_ends_at: datetime | None) -> datetime:
    """A lease's end: ``lease_minutes`` from now, but never past the item's time limit (and its
    grace), so that the place frees itself then whatever the rater's browser does."""
    end = now + _lease(study)
    if time_limit_ends_at is not None:
        end = min(end, time_limit_ends_at + TIME_LIMIT_GRACE)
    return end


def _time_limit_end(study: Study, now: datetime) -> datetime | None:
    if study.item_time_limit_s is None:
        return None
    return now + timedelta(seconds=study.item_time_limit_s)


def time_is_up(assignment: Assignment, now: datetime) -> bool:
    """Whether the item's time limit has run out for this assignment (none: never)."""
    return assignment.time_limit_ends_at is not None and now >= assignment.time_limit_ends_at


def _renew(assignment: Assignment, study: Study, now: datetime) -> Assignment:
    assignment.leased_at = now
    assignment.lease_expires_at = _lease_end(study, now, assignment.time_limit_ends_at)
    rows.update(
        Assignment,
        assignment.pk,
        state=AssignmentState.LEASED,
        leased_at=assignment.leased_at,
        lease_expires_at=assignment.lease_expires_at,
    )
    assignment.state = AssignmentState.LEASED
    return assignment


def _take(rater: Rater, item: StudyItem, now: datetime, *, holders: int) -> Assignment:
    """A new assignment; ``holders`` (the places already taken) is the new rater's slot, which
    the kind's display rotates the side order by."""
    display = kinds.get(rater.study.kind).display(item, holders)
    # Practice items are untimed and cannot be skipped: a practice item given back would leave
    # its rater short of the practice the qualification threshold counts (services/onboarding).
    time_limit_ends_at = None if item.is_practice else _time_limit_end(rater.study, now)
    return rows.insert(
        Assignment(
            item=item,
            rater=rater,
            role=AssignmentRole.ADJUDICATE if item.needs_adjudication else AssignmentRole.ANNOTATE,
            display=display,
            leased_at=now,
            lease_expires_at=_lease_end(rater.study, now, time_limit_ends_at),
            time_limit_ends_at=time_limit_ends_at,
        )
    )


def _release_as_skip(assignment: Assignment, *, cause: str, reason: str, now: datetime) -> ItemSkip:
    """Give the item back: the assignment ``SKIPPED`` (no longer a place on the item; never
    handed to this rater again) and its ``ItemSkip`` record. Rater's and item's rows locked."""
    Assignment.objects.filter(pk=assignment.pk).update(state=AssignmentState.SKIPPED)
    assignment.state = AssignmentState.SKIPPED
    return ItemSkip.objects.create(assignment=assignment, cause=cause, reason=reason, at=now)


def assignment_next(*, rater: Rater, now: datetime | None = None) -> Assignment | None:
    """The rater's current assignment: the one they hold (its lease renewed once less than
    half of it is left), else a new one, else None (nothing left for them, or the study is
    closed). See the module docstring for the locking that makes this safe under concurrency."""
    now = now or timezone.now()
    current = assignment_current(rater=rater)
    if (
        current is not None
        and current.lease_expires_at - now > _lease(rater.study) / 2
        and not time_is_up(current, now)
    ):
        return current  # the common case (a reload, Next on the item shown): nothing to write
    return _hand_out_in_transaction(rater, now)


def _hand_out_in_transaction(rater: Rater, now: datetime) -> Assignment | None:
    with transaction.atomic():
        # A lease is soft state: should the server crash within the commit delay, the worst
        # case is an item handed out again. Answers stay synchronously committed.
        return _hand_out(sql.rater_lock(rater, relaxed_commit=True), now)


def _hand_out(rater: Rater, now: datetime) -> Assignment | None:
    """Next, once the caller holds the rater's row lock inside a transaction."""
    study = rater.study
    holds_an_item_lock = False
    for assignment in sql.leased(rater.pk):
        if time_is_up(assignment, now):
            _lock_item(assignment.item_id)
            holds_an_item_lock = True
            _release_as_skip(assignment, cause=SkipCause.TIME_LIMIT, reason="", now=now)
            continue
        if assignment.lease_expires_at > now:
            return _renew(assignment, study, now)
        # Expired: still theirs unless the item filled up in the meantime.
        item = _lock_item(assignment.item_id)
        holds_an_item_lock = True
        if sql.places_taken(item.pk, now, excluding=assignment.pk) < item.required_answers:
            return _renew(assignment, study, now)
        Assignment.objects.filter(pk=assignment.pk).update(state=AssignmentState.LAPSED)
    if study.status != StudyStatus.OPEN:
        return None
    # Onboarding (services/onboarding.py): consent first, then the practice items in order,
    # then real items only for a rater at or above the threshold (or let past by staff).
    gate = onboarding.rater_gate(rater)
    if gate is onboarding.Gate.PRACTICE:
        practice = onboarding.next_practice_item(rater)
        if practice is not None:
            item = _lock_item(practice.pk)
            return _take(rater, item, now, holders=sql.places_taken(item.pk, now))
    if gate is not onboarding.Gate.OPEN:
        return None
    # Never wait for a candidate's lock while holding another item's (a lapsed lease's, above):
    # two such waits could deadlock.
    return _take_first_with_room(rater, now, may_wait=not holds_an_item_lock)


def _take_first_with_room(rater: Rater, now: datetime, *, may_wait: bool) -> Assignment | None:
    """The first candidate with room, taken (its row locked), or None. Candidates another
    transaction has locked are passed over; when every one is, an item locked at this instant
    may still have room for this rater once that commits, so with ``may_wait`` the first such
    item is waited for rather than "nothing left" reported too early."""
    skipped: list[int] = []
    while True:
        candidate = sql.first_candidate(rater, now, skipped=skipped, wait=False)
        if candidate is None:
            if not may_wait:
                return None
            candidate = sql.first_candidate(rater, now, skipped=skipped, wait=True)
            if candidate is None:
                return None
        # Counted again now that the row is locked: the statement that locked it counted with
        # the snapshot it started from, which may predate a commit it then waited for.
        taken = sql.places_taken(candidate.pk, now)
        if taken < candidate.required_answers:
            return _take(rater, candidate, now, holders=taken)
        skipped.append(candidate.pk)


def assignment_current(*, rater: Rater) -> Assignment | None:
    """What the rater is on right now, without handing anything out (a page load)."""
    return next(iter(sql.leased(rater.pk, latest_only=True)), None)


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

    The next item is handed out in the answer's own transaction when no lock has to be waited
    for (``_hand_out_without_waiting``: one transaction, one rater lock, one commit, and the
    answer's commit stays synchronous); otherwise after the answer has committed, in a second
    transaction: waiting there for a candidate's lock while holding the answered item's, two
    annotators who had just answered each other's next candidate would deadlock."""
    now = now or timezone.now()
    with transaction.atomic():
        rater = sql.rater_lock(rater)
        target = sql.answer_target(
            rater_id=rater.pk, item_token=item_token, idempotency_key=idempotency_key
        )
        if target is None:
            raise AnswerRejected("this item is not yours")
        result = _store_answer(rater, target, answer, idempotency_key, elapsed_ms, now)
        # A replayed, late or timed-out answer, or a rater with another lease (a renewal, an
        # expiry or a time limit to settle), is not the common case: handed out as before.
        if (
            hand_out_next
            and not (result.replayed or result.late or result.timed_out)
            and not target.holds_another_lease
        ):
            result.following = _hand_out_without_waiting(rater, now)
    if hand_out_next and result.following is None:
        result.following = _hand_out_in_transaction(rater, now)
    return result


def _hand_out_without_waiting(rater: Rater, now: datetime) -> Assignment | None:
    """``_hand_out``'s common case, for a transaction that holds the rater's lock and an item's
    (an answer's), the rater holding no lease (the caller read that under the rater's lock):
    the first candidate with room that no other transaction has locked, taken without waiting
    for any lock. None when this cannot decide — the onboarding gate is not open, or every
    candidate with room is locked at this instant — and the caller hands out after committing,
    as ``_hand_out`` would. The study is open: the answer was taken."""
    if onboarding.rater_gate(rater) is not onboarding.Gate.OPEN:
        return None
    return _take_first_with_room(rater, now, may_wait=False)


def _store_answer(
    rater: Rater,
    target: sql.AnswerTarget,
    answer: AnswerInput,
    idempotency_key: str,
    elapsed_ms: int | None,
    now: datetime,
) -> SubmitResult:
    """The body of ``answer_submit``; the caller holds the rater's row lock and read
    ``target`` (``sql.answer_target``) under it. The assignment read with the item's lock is
    current: its state only ever changes under its rater's lock, which this transaction holds."""
    if target.replay_answer_id is not None:
        if target.replay_rater_id != rater.pk:
            raise AnswerRejected("this form was submitted by someone else")
        kept = Answer.objects.get(pk=target.replay_answer_id)
        return SubmitResult(kept, replayed=True, kept_earlier=not _same_answer(kept, answer))
    if rater.study.status != StudyStatus.OPEN:
        raise AnswerRejected("this study is closed")
    assignment = target.assignment
    item = assignment.item
    if assignment.state == AssignmentState.DONE:
        live = assignment.answers.get(retracted_at__isnull=True)
        return SubmitResult(live, replayed=True, kept_earlier=not _same_answer(live, answer))
    skip = None
    if assignment.state == AssignmentState.SKIPPED:
        skip = ItemSkip.objects.get(assignment=assignment)
        if skip.cause == SkipCause.ANNOTATOR:
            raise AnswerRejected("you skipped this item, so it went back to the pool")
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
    timed_out = skip is not None or (
        assignment.time_limit_ends_at is not None
        and now >= assignment.time_limit_ends_at + TIME_LIMIT_GRACE
    )
    if timed_out:
        if skip is None:
            _release_as_skip(assignment, cause=SkipCause.TIME_LIMIT, reason="", now=now)
        stored = Answer.objects.create(
            **fields, retracted_at=now, retraction_reason=RetractionReason.TIME_LIMIT
        )
        return SubmitResult(stored, timed_out=True)
    lapsed = assignment.state == AssignmentState.LAPSED or (
        assignment.lease_expires_at <= now
        and sql.places_taken(item.pk, now, excluding=assignment.pk) >= item.required_answers
    )
    if lapsed:
        Assignment.objects.filter(pk=assignment.pk).update(state=AssignmentState.LAPSED)
        stored = Answer.objects.create(
            **fields, retracted_at=now, retraction_reason=RetractionReason.LAPSED
        )
        return SubmitResult(stored, late=True)
    stored = rows.insert(Answer(**fields))
    rows.update(Assignment, assignment.pk, state=AssignmentState.DONE, completed_at=now)
    _item_changed(item, rater.study, now, answers=+1)
    return SubmitResult(stored)


def _same_answer(stored: Answer, sent: AnswerInput) -> bool:
    return (stored.label, stored.confidence, stored.note, stored.details) == (
        sent.label,
        sent.confidence,
        sent.note,
        sent.details,
    )


def answer_undo(*, rater: Rater, now: datetime | None = None) -> Assignment | None:
    """Retract the rater's latest live answer in the study and reopen its item for them
    (returned, to be shown again). None when there is nothing to undo."""
    now = now or timezone.now()
    with transaction.atomic():
        rater = sql.rater_lock(rater)
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
        # Conditional on the verdict not having been revealed: with answer_verdict_reveal's
        # conditional update on the same row, exactly one of the two wins (on PostgreSQL the
        # loser's UPDATE re-reads the row after the winner commits and matches nothing).
        retracted = Answer.objects.filter(pk=answer.pk, verdict_revealed_at__isnull=True).update(
            retracted_at=now, retraction_reason=RetractionReason.UNDO
        )
        if retracted != 1:
            seen = (
                "the expected answer to that practice item"
                if item.is_practice
                else ("the judge's verdict on that item")
            )
            raise UndoRefused(f"you have seen {seen}, so your answer to it is final")
        assignment = answer.assignment
        assignment.completed_at, assignment.reopened = None, True
        # A reopened item gets its time limit afresh: the rater chose to look at it again.
        if not item.is_practice:
            assignment.time_limit_ends_at = _time_limit_end(rater.study, now)
        Assignment.objects.filter(pk=assignment.pk).update(
            completed_at=None, reopened=True, time_limit_ends_at=assignment.time_limit_ends_at
        )
        _renew(assignment, rater.study, now)
        _item_changed(item, rater.study, now, answers=-1)
        assignment.item = item
        return assignment


@dataclass
class SkipResult:
    skip: ItemSkip
    replayed: bool = False  # skipped already (a double press, another tab): nothing changed
    following: Assignment | None = None  # with hand_out_next: the rater's next item, if any


def item_skip(
    *,
    rater: Rater,
    item_token: str,
    reason: str = "",
    hand_out_next: bool = False,
    now: datetime | None = None,
) -> SkipResult:
    """Give back the item the rater holds (``reason`` optional, at most
    ``SKIP_REASON_MAX_CHARS``): see the module docstring. Idempotent: skipping an item already
    skipped returns the first skip. ``SkipRefused`` when the study is closed, the item is not
    the rater's, or they have answered it (undo first) or lost it to someone else. With
    ``hand_out_next``, the next item is handed out afterwards, in a transaction of its own,
    which may wait for a candidate's lock (see ``answer_submit``)."""
    now = now or timezone.now()
    reason = reason.strip()
    if len(reason) > SKIP_REASON_MAX_CHARS or "\x00" in reason:
        raise SkipRefused(f"a reason has at most {SKIP_REASON_MAX_CHARS} characters, no NUL")
    with transaction.atomic():
        rater = sql.rater_lock(rater)
        if rater.study.status != StudyStatus.OPEN:
            raise SkipRefused("this study is closed")
        held = (
            Assignment.objects.filter(rater=rater, item__token=item_token)
            .values_list("pk", "item_id")
            .first()
        )
        if held is None:
            raise SkipRefused("this item is not yours")
        _lock_item(held[1])
        # Read after the item's lock; its state only changes under the rater's lock, held here.
        assignment = Assignment.objects.select_related("skip", "item").get(pk=held[0])
        if assignment.state == AssignmentState.SKIPPED:
            return SkipResult(assignment.skip, replayed=True)
        if assignment.state == AssignmentState.DONE:
            raise SkipRefused("you have answered this item (undo your answer first)")
        if assignment.state == AssignmentState.LAPSED:
            raise SkipRefused("this item's time with you ran out and it went to someone else")
        if assignment.item.is_practice:
            raise SkipRefused("a practice item cannot be skipped: answer it to see the answer")
        skip = _release_as_skip(assignment, cause=SkipCause.ANNOTATOR, reason=reason, now=now)
    result = SkipResult(skip)
    if hand_out_next:
        result.following = _hand_out_in_transaction(rater, now)
    return result


def answer_verdict_reveal(*, answer_id: int, now: datetime | None = None) -> bool:
    """Record that the judge's verdict on this answer's item is being shown to its rater, and
    say whether it may be: True when the answer is live (it is now final — ``answer_undo``
    refuses it), False when it has been undone meanwhile (show nothing). Call it before the
    verdict is rendered. Idempotent: showing it again keeps the first time."""
    now = now or timezone.now()
    live = Answer.objects.filter(pk=answer_id, retracted_at__isnull=True)
    live.filter(verdict_revealed_at__isnull=True).update(verdict_revealed_at=now)
    return live.filter(verdict_revealed_at__isnull=False).exists()


# --- What an item's answers decide ------------------------------------------------------------


def _item_changed(item: StudyItem, study: Study, now: datetime, *, answers: int) -> None:
    """Count ``answers`` (+1 or -1) more live answers on the item and save that and whatever
    they now decide (the kind's ``decide``). Item row locked. When the item opens or closes,
    or changes role, this process's reused count of the study's open items is dropped
    (``selectors.rater_progress``), so that this annotator's page counts it afresh."""
    before = (item.completed_answers < item.required_answers, item.needs_adjudication)
    item.completed_answers += answers
    kinds.get(study.kind).decide(item, study, now)
    rows.update(
        StudyItem,
        item.pk,
        completed_answers=item.completed_answers,
        required_answers=item.required_answers,
        needs_adjudication=item.needs_adjudication,
        outcome=item.outcome,
    )
    if before != (item.completed_answers < item.required_answers, item.needs_adjudication):
        selectors.open_items_forget(study_id=study.pk)


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
