"""annotation/sql.py says in SQL what the ORM cannot say in one round trip: each statement must
find exactly what the equivalent ORM reads find, on this database."""

import re
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models import Count, Exists, F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation import sql
from annotation.models import Answer, Assignment, AssignmentState, Rater, StudyItem
from annotation.selectors import home_studies
from annotation.services.assignments import (
    AnswerInput,
    answer_submit,
    answer_undo,
    assignment_next,
    item_skip,
)
from benchmark.models import EvaluationUnit, Turn, TurnImage
from tests.annotation.conftest import rater

pytestmark = pytest.mark.django_db


def _candidate_by_orm(r: Rater, now, skipped: list[int]) -> StudyItem | None:
    taken = (
        Assignment.objects.filter(item=OuterRef("pk"))
        .filter(
            Q(state=AssignmentState.DONE)
            | Q(state=AssignmentState.LEASED, lease_expires_at__gt=now)
        )
        .values("item")
        .annotate(n=Count("id"))
        .values("n")
    )
    items = (
        StudyItem.objects.filter(study_id=r.study_id, completed_answers__lt=F("required_answers"))
        .exclude(pk__in=skipped)
        .exclude(Exists(Assignment.objects.filter(item=OuterRef("pk"), rater=r)))
        .annotate(taken=Coalesce(Subquery(taken), 0))
        .filter(taken__lt=F("required_answers"))
    )
    if not r.adjudicates:
        items = items.filter(needs_adjudication=False)
    elif not r.annotates:
        items = items.filter(needs_adjudication=True)
    return items.order_by("-needs_adjudication", "position").first()


def _fields(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}


def test_the_first_candidate_is_the_orms_as_items_fill_and_leases_lapse(make_study):
    study = make_study("pairwise", n_annotators=3, overlap=2)
    raters = [rater(study, r.user) for r in study.raters.all()]
    now = timezone.now()
    compared = 0
    for step in range(12):
        for r in raters:
            for skipped in ([], [StudyItem.objects.filter(study=study).first().pk]):
                with transaction.atomic():
                    ours = sql.first_candidate(r, now, skipped=skipped, wait=True)
                    orm = _candidate_by_orm(r, now, skipped)
                assert (ours and _fields(ours)) == (orm and _fields(orm)), (step, r.pk)
                compared += ours is not None
        # Move on: one rater takes an item; every third step a lease runs out.
        holder = raters[step % len(raters)]
        held = assignment_next(rater=holder, now=now)
        if held is not None and step % 3 == 0:
            Assignment.objects.filter(pk=held.pk).update(lease_expires_at=now - timedelta(1))
        elif held is not None:
            answer_submit(
                rater=holder,
                item_token=held.item.token,
                answer=AnswerInput(label="A", confidence=3),
                idempotency_key=f"key-{step}-{holder.pk}",
                now=now,
            )
    assert compared > 20


def test_the_answer_target_is_the_raters_assignment_and_any_replay(make_study, make_annotators):
    study = make_study("pairwise")
    one, two = (rater(study, r.user) for r in study.raters.all())
    held = assignment_next(rater=one)
    with transaction.atomic():
        target = sql.answer_target(
            rater_id=one.pk, item_token=held.item.token, idempotency_key="fresh-key-1"
        )
    assert _fields(target.assignment) == _fields(Assignment.objects.get(pk=held.pk))
    assert _fields(target.assignment.item) == _fields(StudyItem.objects.get(pk=held.item_id))
    assert (target.replay_answer_id, target.replay_rater_id) == (None, None)
    # Not the rater's item: nothing.
    with transaction.atomic():
        assert (
            sql.answer_target(
                rater_id=two.pk, item_token=held.item.token, idempotency_key="fresh-key-1"
            )
            is None
        )
    answer_submit(
        rater=one,
        item_token=held.item.token,
        answer=AnswerInput(label="B", confidence=2),
        idempotency_key="used-key-1",
    )
    stored = Answer.objects.get(idempotency_key="used-key-1")
    with transaction.atomic():
        replay = sql.answer_target(
            rater_id=one.pk, item_token=held.item.token, idempotency_key="used-key-1"
        )
    assert (replay.replay_answer_id, replay.replay_rater_id) == (stored.pk, one.pk)
    assert not target.holds_another_lease and not replay.holds_another_lease
    # Undo reopens the answered item while the rater holds the next one: two leases, and the
    # answered item's read says so (the answer's own hand-out then leaves it to _hand_out).
    following = assignment_next(rater=one)
    assert following is not None and following.item_id != held.item_id
    answer_undo(rater=one)
    assert Assignment.objects.filter(rater=one, state=AssignmentState.LEASED).count() == 2
    with transaction.atomic():
        for token in (held.item.token, following.item.token):
            target = sql.answer_target(rater_id=one.pk, item_token=token, idempotency_key="k")
            assert target.holds_another_lease, token


def test_the_trigger_conversation_and_replies_are_the_orms(make_study):
    study = make_study("pairwise")
    # Images on the first turns (two on the first, out of order) and on the dialogue's last.
    for item in study.items.select_related("trigger__turn")[:1]:
        dialogue_turns = list(Turn.objects.filter(dialogue_id=item.trigger.turn.dialogue_id))
        for turn, position in [(0, 1), (0, 0), (1, 0), (-1, 0)]:
            TurnImage.objects.create(
                turn=dialogue_turns[turn],
                position=position,
                file=f"original/{turn}{position}.png",
                sha256=f"{turn % 10}{position}".ljust(64, "a"),
                media_type="image/png",
                width=1,
                height=1,
                byte_size=1,
                alt=f"image {turn}.{position}",
            )
    for item in study.items.select_related("trigger__turn"):
        trigger, turns, replies, images = sql.trigger_conversation_replies(
            item.trigger_id, (item.unit_id, item.unit_b_id)
        )
        turn = item.trigger.turn
        assert (trigger.type, trigger.pass_criteria, trigger.partial_criteria) == (
            item.trigger.type,
            item.trigger.pass_criteria,
            item.trigger.partial_criteria,
        )
        assert (trigger.fail_criteria, trigger.dialogue_id, trigger.turn.index) == (
            item.trigger.fail_criteria,
            turn.dialogue_id,
            turn.index,
        )
        expected = Turn.objects.filter(dialogue_id=turn.dialogue_id, index__lte=turn.index)
        assert [(t.index, t.user_message, t.assistant_response) for t in turns] == list(
            expected.order_by("index").values_list("index", "user_message", "assistant_response")
        )
        assert replies == dict(
            EvaluationUnit.objects.filter(pk__in=[item.unit_id, item.unit_b_id]).values_list(
                "pk", "reply"
            )
        )
        assert [(i.turn, i.position, i.sha256, i.alt) for i in images] == list(
            TurnImage.objects.filter(turn__in=expected)
            .order_by("turn__index", "position")
            .values_list("turn__index", "position", "sha256", "alt")
        )


def test_the_access_reads_are_the_orms(make_study, make_annotators):
    study = make_study("pairwise")
    user = study.raters.first().user
    outsider = make_annotators(1)[0]
    ours = sql.rater_with_study(user_id=user.pk, study_id=study.pk)
    orm = Rater.objects.select_related("study").get(study=study, user=user)
    assert _fields(ours) == _fields(orm) and _fields(ours.study) == _fields(orm.study)
    assert sql.rater_with_study(user_id=outsider.pk, study_id=study.pk) is None
    held = assignment_next(rater=orm)
    found = sql.assignment_with_item(user_id=user.pk, study_id=study.pk, token=held.item.token)
    expected = Assignment.objects.select_related("rater__study", "item").get(pk=held.pk)
    for ours_part, orm_part in [
        (found, expected),
        (found.rater, expected.rater),
        (found.rater.study, expected.rater.study),
        (found.item, expected.item),
    ]:
        assert _fields(ours_part) == _fields(orm_part)
    for user_id, study_id, token in [
        (outsider.pk, study.pk, held.item.token),
        (user.pk, study.pk + 1000, held.item.token),
        (user.pk, study.pk, "no-such-token"),
    ]:
        assert sql.assignment_with_item(user_id=user_id, study_id=study_id, token=token) is None


def test_leases_places_and_progress_are_the_orms(make_study):
    study = make_study("pairwise", n_annotators=3, overlap=2)
    raters = [rater(study, r.user) for r in study.raters.all()]
    now = timezone.now()
    for step in range(9):
        holder = raters[step % 3]
        held = assignment_next(rater=holder, now=now)
        if step % 2 and held is not None:
            answer_submit(
                rater=holder,
                item_token=held.item.token,
                answer=AnswerInput(label="B", confidence=1),
                idempotency_key=f"progress-{step}",
                elapsed_ms=1000 + step,
                now=now,
            )
        if step == 4:  # one undo: a retracted answer must not count
            from annotation.services.assignments import answer_undo

            answer_undo(rater=holder, now=now)
        if step == 6 and held is not None:  # one skip: never open to its rater again
            item_skip(rater=holder, item_token=held.item.token, now=now)
    for r in raters:
        orm_leased = list(
            Assignment.objects.select_related("item")
            .filter(rater=r, state=AssignmentState.LEASED)
            .order_by("-leased_at", "-id")
        )
        ours = sql.leased(r.pk)
        assert [(_fields(a), _fields(a.item)) for a in ours] == [
            (_fields(a), _fields(a.item)) for a in orm_leased
        ]
        assert [a.pk for a in sql.leased(r.pk, latest_only=True)] == [a.pk for a in orm_leased][:1]
        done = Assignment.objects.filter(rater=r, state=AssignmentState.DONE)
        seconds = sum(
            Answer.objects.filter(assignment__in=done, retracted_at__isnull=True).values_list(
                "time_on_item_s", flat=True
            )
        )
        left = home_studies(user=r.user)[0].left  # the ORM's count of what is left
        counts = sql.progress_counts(r)
        assert (counts.done, counts.seconds, counts.open_items - counts.held_before) == (
            done.count(),
            pytest.approx(seconds),
            left,
        )
        assert sql.progress_counts(r, open_items=counts.open_items) == counts
    for item in StudyItem.objects.filter(study=study):
        taken = Assignment.objects.filter(item=item).filter(
            Q(state=AssignmentState.DONE)
            | Q(state=AssignmentState.LEASED, lease_expires_at__gt=now)
        )
        assert sql.places_taken(item.pk, now) == taken.count()
        for a in item.assignments.all():
            assert sql.places_taken(item.pk, now, excluding=a.pk) == taken.exclude(pk=a.pk).count()


def _copy(row, **fields):
    """An unsaved copy of ``row`` with ``fields`` changed."""
    model = type(row)
    values = {f.attname: getattr(row, f.attname) for f in model._meta.concrete_fields}
    values.pop(model._meta.pk.attname)
    return model(**{**values, **fields})


only_postgresql_plans = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="query plans are PostgreSQL's (EXPLAIN)"
)


def _long_history(make_study) -> Rater:
    """One rater 600 answers into a study of 8,000 items that 40 others have answered too
    (the rater's history is 4 % of the tables, as one of 25 raters' is); 100 of the items are
    still open, and the rater's first item waits for another answer."""
    from annotation.models import new_token

    study = make_study("pairwise", n_annotators=41, overlap=2)
    deep, *others = [rater(study, r.user) for r in study.raters.order_by("pk")]
    held = assignment_next(rater=deep)
    answer_submit(
        rater=deep,
        item_token=held.item.token,
        answer=AnswerInput(label="B", confidence=3),
        idempotency_key="first",
        elapsed_ms=1500,
    )
    first = Assignment.objects.get(pk=held.pk)
    first_answer = Answer.objects.get(assignment=first)
    items = StudyItem.objects.bulk_create(
        _copy(
            held.item,
            token=new_token(),
            key=f"history-{n}",
            position=10_000 + n,
            completed_answers=held.item.required_answers if n < 7_900 else 0,
        )
        for n in range(8_000)
    )
    # The deep rater's 600 items; the other 7,000 items' two places (overlap 2) to the others.
    places = [(item, deep) for item in items[:600]]
    places += [
        (item, others[(2 * n + side) % len(others)])
        for n, item in enumerate(items[600:7_600])
        for side in (0, 1)
    ]
    assignments = Assignment.objects.bulk_create(
        _copy(first, item_id=item.pk, rater_id=holder.pk) for item, holder in places
    )
    Answer.objects.bulk_create(
        _copy(first_answer, assignment_id=a.pk, idempotency_key=f"history-{a.pk}")
        for a in assignments
    )
    return deep


def _on_the_tables(command: str) -> None:
    """``command`` (ANALYZE, VACUUM) run on each table the progress count reads."""
    with connection.cursor() as cursor:
        for model in (StudyItem, Assignment, Answer):
            cursor.execute(f"{command} {model._meta.db_table}")


def _progress_scans(deep: Rater) -> list[tuple[str, str | None]]:
    """The scans (node type, table) of the progress count's plan for ``deep``, as it ran
    (prepared: EXECUTE with its values) and planned afresh."""
    with CaptureQueriesContext(connection) as ran:
        counts = sql.progress_counts(deep)
    assert (counts.done, counts.held_before) == (601, 1)  # the first item waits for another
    (execute,) = re.findall(r"EXECUTE pb_\w+\(.*?\)", ran.captured_queries[-1]["sql"])
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {execute}")
        plan = cursor.fetchone()[0]

    def nodes(node):
        yield node
        for child in node.get("Plans", ()):
            yield from nodes(child)

    return [(n["Node Type"], n.get("Relation Name")) for n in nodes(plan[0]["Plan"])]


@only_postgresql_plans
def test_progress_reads_a_long_history_by_the_rater_not_whole_tables(make_study):
    """A rater deep into a long study, the planner's statistics fresh (ANALYZE, as autovacuum
    keeps them): the progress count must read neither every assignment nor every answer,
    whatever the planner estimates. It once hash-joined the whole answers table
    (bench/README.md, stop 33); each answer's seconds are now looked up by its index, per done
    assignment.

    The study's items are asserted by the next test, which can VACUUM: without the visibility
    map that only VACUUM sets, the planner may price the open items' index-only scan at a heap
    fetch a row and read the whole table instead, as it did in CI's full suite."""
    deep = _long_history(make_study)
    _on_the_tables("ANALYZE")
    scans = _progress_scans(deep)
    tables = {model._meta.db_table for model in (Assignment, Answer)}
    assert not [s for s in scans if s[0] == "Seq Scan" and s[1] in tables], scans


@only_postgresql_plans
@pytest.mark.django_db(transaction=True)  # VACUUM runs outside a transaction only
def test_progress_reads_the_open_items_from_their_index_after_a_vacuum(make_study):
    """The same rater, after a VACUUM (as autovacuum leaves the tables): no table of the three
    is read whole. The open items are few, but the planner cannot tell how few
    (``completed_answers < required_answers`` compares two columns), and once read the whole
    items table for them (bench/README.md, stop 33); their partial index
    ``item_open_in_order`` now carries their ids, so they are read from the index alone.
    Without the ids this fails: the held items' join reads their heap pages."""
    deep = _long_history(make_study)
    _on_the_tables("VACUUM (ANALYZE)")
    scans = _progress_scans(deep)
    tables = {model._meta.db_table for model in (StudyItem, Assignment, Answer)}
    assert not [s for s in scans if s[0] == "Seq Scan" and s[1] in tables], scans
    # Without the ids in the index, the held items' join read the open items' heap pages
    # (a bitmap heap scan here, the whole table in the benchmark's bigger study).
    items = [node for node, table in scans if table == StudyItem._meta.db_table]
    assert items and set(items) == {"Index Only Scan"}, scans
