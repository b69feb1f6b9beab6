"""Many annotators pressing Next and Submit at once, for real: threads, each with its own
database connection, against the configured database (PostgreSQL in CI: row locks with SKIP
LOCKED; SQLite: IMMEDIATE transactions). No item ever gets more than k answers or leases, and
every answer submitted is stored exactly once."""

import threading
import time
from collections import Counter

import pytest
from django.db import connection, connections, transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation import kinds
from annotation.models import Answer, Assignment, AssignmentState, ItemSkip, StudyItem
from annotation.selectors import rater_progress
from annotation.services.assignments import (
    AnswerInput,
    answer_submit,
    answer_undo,
    assignment_next,
    item_skip,
)
from tests.annotation.conftest import rater

THREADS = 8


def _in_parallel(work, n: int) -> list:
    """Run work(i) in n threads released together; return what each returned (or raised)."""
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def target(i):
        try:
            barrier.wait()
            results[i] = work(i)
        except Exception as exc:  # reported below, with the thread's number
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    errors = [(i, r) for i, r in enumerate(results) if isinstance(r, Exception)]
    assert not errors, errors
    return results


def _max_holding_per_item(study) -> int:
    now = timezone.now()
    holding = (
        Assignment.objects.filter(item__study=study)
        .filter(
            Q(state=AssignmentState.DONE)
            | Q(state=AssignmentState.LEASED, lease_expires_at__gt=now)
        )
        .values("item")
        .annotate(n=Count("id"))
    )
    return max((row["n"] for row in holding), default=0)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", sorted(kind.key for kind in kinds.all_kinds()))
def test_simultaneous_next_never_pushes_an_item_past_k(make_study, make_annotators, kind):
    users = make_annotators(THREADS)
    # Handing out is the same for every kind; each kind's items come from its own selection.
    extra = {"condition": "vanilla"} if kind == "proposal_review" else {}
    study = make_study(kind, annotators=users, overlap=2, **extra)
    raters = [rater(study, u) for u in users]
    got = _in_parallel(lambda i: assignment_next(rater=raters[i]).item_id, THREADS)
    per_item = Counter(got)
    assert len(got) == THREADS and max(per_item.values()) <= 2
    # Early items first: with SKIP LOCKED an annotator may pass an item another one is taking
    # at that instant, so the front is ragged, but nobody jumps further than the others' locks.
    order = list(study.items.order_by("position").values_list("pk", flat=True))
    assert max(order.index(pk) for pk in per_item) < THREADS
    assert _max_holding_per_item(study) <= 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("hand_out_next", [False, True], ids=["next-then-submit", "as-the-page"])
def test_annotators_working_through_a_study_at_once_lose_nothing_and_never_overfill(
    make_study, make_annotators, hand_out_next
):
    """``as-the-page``: each answer hands out the next item, as the answer view does (in the
    answer's transaction when no lock is in the way, else in one of its own);
    ``next-then-submit``: separate calls."""
    users = make_annotators(THREADS)
    study = make_study(annotators=users, overlap=3)
    raters = [rater(study, u) for u in users]
    items = study.items.count()

    def work(i):
        r = raters[i]
        submitted = []
        n = 0
        assignment = assignment_next(rater=r)
        while assignment is not None:
            n += 1
            key = f"t{i}-{n}"
            result = answer_submit(
                rater=r,
                item_token=assignment.item.token,
                answer=AnswerInput(label="A", confidence=3, details={"choice": "1"}),
                idempotency_key=key,
                hand_out_next=hand_out_next,
            )
            assert not result.replayed and not result.late
            submitted.append(key)
            if n % 5 == 0:  # now and then an undo, then the same item answered again
                reopened = answer_undo(rater=r)
                again = answer_submit(
                    rater=r,
                    item_token=reopened.item.token,
                    answer=AnswerInput(label="B", confidence=2, details={"choice": "2"}),
                    idempotency_key=key + "-again",
                    hand_out_next=hand_out_next,
                )
                assert again.answer.assignment_id == reopened.pk
                submitted.append(key + "-again")
                result = again
            assignment = result.following if hand_out_next else assignment_next(rater=r)
        return submitted

    submitted = [key for keys in _in_parallel(work, THREADS) for key in keys]
    stored = set(Answer.objects.values_list("idempotency_key", flat=True))
    assert stored == set(submitted)  # every answer, exactly once (keys are unique)
    live = Answer.objects.filter(retracted_at__isnull=True)
    assert live.count() == items * 3  # every item filled to k, none beyond
    per_item = Counter(live.values_list("assignment__item_id", flat=True))
    assert set(per_item.values()) == {3}
    assert _max_holding_per_item(study) == 3
    for item in StudyItem.objects.filter(study=study):
        assert item.completed_answers == per_item[item.pk] == item.required_answers
    assert not connection.in_atomic_block


@pytest.mark.django_db(transaction=True)
def test_skipped_items_go_to_others_at_once_and_never_back_to_the_skipper(
    make_study, make_annotators
):
    """Half the annotators skip their first item and every fourth after it while all work at
    once (each skip and answer handing out the next, as the pages do): every item is still filled
    to k by the others, no item ever holds more than k, and no skipper is handed an item they
    skipped (their skipped assignments stay skipped, with no answer)."""
    users = make_annotators(THREADS)
    study = make_study(annotators=users, overlap=3)
    raters = [rater(study, u) for u in users]
    skippers = THREADS // 2  # at most 4 skip any one item: the other 4 can still fill k = 3

    # Everyone holds an item before the race: on SQLite a skipper the others outran could
    # otherwise find every place taken by the four who never skip, and skip nothing.
    first = [assignment_next(rater=r) for r in raters]
    assert all(first)

    def work(i):
        r = raters[i]
        skipped, n = [], 0
        assignment = first[i]
        while assignment is not None:
            n += 1
            assert assignment.item_id not in skipped  # never handed back
            # The first item too, so that every skipper skips at least once.
            if i < skippers and n % 4 == 1:
                result = item_skip(
                    rater=r, item_token=assignment.item.token, reason=f"t{i}", hand_out_next=True
                )
                skipped.append(assignment.item_id)
            else:
                result = answer_submit(
                    rater=r,
                    item_token=assignment.item.token,
                    answer=AnswerInput(label="A", confidence=3, details={"choice": "1"}),
                    idempotency_key=f"skip-t{i}-{n}",
                    hand_out_next=True,
                )
            assignment = result.following
            # Nothing free may only mean that others hold the last places for the moment: one
            # of them may yet skip. Ask again while items are still open to this rater.
            for _ in range(400):
                if assignment is not None or not rater_progress(rater=r).left:
                    break
                time.sleep(0.02)
                assignment = assignment_next(rater=r)
        return skipped

    skipped = _in_parallel(work, THREADS)
    assert sum(map(len, skipped)) > 0
    assert ItemSkip.objects.count() == sum(map(len, skipped))
    live = Answer.objects.filter(retracted_at__isnull=True)
    per_item = Counter(live.values_list("assignment__item_id", flat=True))
    assert set(per_item.values()) == {3} and len(per_item) == study.items.count()
    assert _max_holding_per_item(study) == 3
    for i, items in enumerate(skipped):
        mine = Assignment.objects.filter(rater=raters[i], item_id__in=items)
        assert {a.state for a in mine} <= {AssignmentState.SKIPPED}
        assert not live.filter(assignment__rater=raters[i], assignment__item_id__in=items)


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="row locks and SKIP LOCKED are PostgreSQL's: SQLite's IMMEDIATE transactions run "
    "one writer at a time, so no transaction waits for a row another holds",
)
def test_two_annotators_answering_each_others_next_candidate_at_once_never_deadlock(
    make_study, make_annotators
):
    """The case the answer's single transaction must not wait in: A holds P and B holds Q,
    each item with a place left (k = 2), so each one's next candidate is the item the other is
    answering. Both answer at once, each handing out the next item: the answer's transaction
    holds its item's lock and passes over a locked candidate (SKIP LOCKED) instead of waiting
    for it — waiting, the two would deadlock, and PostgreSQL would abort one answer. Repeated,
    so that the two transactions overlap in every order."""
    users = make_annotators(2)
    study = make_study(annotators=users, overlap=2)
    a, b = (rater(study, u) for u in users)
    rounds = min(10, study.items.count() // 4)
    assert rounds >= 3
    for n in range(rounds):
        p = assignment_next(rater=a)
        # B passes over P while another transaction holds it: B's lease is on the next item.
        locked, release = threading.Event(), threading.Event()

        def hold(item_id):
            try:
                with transaction.atomic():
                    list(StudyItem.objects.select_for_update().filter(pk=item_id))
                    locked.set()
                    release.wait(timeout=30)
            finally:
                connections.close_all()

        holder = threading.Thread(target=hold, args=(p.item_id,))
        holder.start()
        assert locked.wait(timeout=30)
        q = assignment_next(rater=b)
        release.set()
        holder.join(timeout=30)
        assert q.item_id != p.item_id
        held = {0: (a, p), 1: (b, q)}

        def answer(i, n=n, held=held):
            r, assignment = held[i]
            return answer_submit(
                rater=r,
                item_token=assignment.item.token,
                answer=AnswerInput(label="A", confidence=3, details={"choice": "1"}),
                idempotency_key=f"cross-{n}-{i}",
                hand_out_next=True,
            )

        results = _in_parallel(answer, 2)
        assert all(not result.late and result.following is not None for result in results)
        # Each following lease answered without a hand-out, so that the next round starts with
        # neither annotator holding anything.
        for i, result in enumerate(results):
            answer_submit(
                rater=held[i][0],
                item_token=result.following.item.token,
                answer=AnswerInput(label="A", confidence=3, details={"choice": "1"}),
                idempotency_key=f"cross-{n}-{i}-following",
            )
        assert _max_holding_per_item(study) <= 2
    assert Answer.objects.filter(retracted_at__isnull=True).count() == 4 * rounds
