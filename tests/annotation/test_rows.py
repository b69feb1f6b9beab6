"""core.rows builds model instances from plain SQL: they must be what the ORM builds —
every field's value and type (JSON, datetimes, booleans, nullable keys), on this database. Its
writes must store what the ORM stores."""

from datetime import timedelta
from unittest.mock import patch

import pytest
from django.contrib.auth.models import User
from django.db.models import F, Model, QuerySet, signals
from django.utils import timezone

from annotation.models import Answer, Assignment, Rater, RetractionReason, Study, StudyItem
from core.rows import columns, fetch_rows, first, insert, load, update
from tests.annotation.conftest import rater

pytestmark = pytest.mark.django_db


def _fields(instance: Model) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}


def _same(ours: Model, orm: Model) -> None:
    assert type(ours) is type(orm)
    assert _fields(ours) == _fields(orm)
    for name, value in _fields(orm).items():
        assert type(getattr(ours, name)) is type(value), name
    assert not ours._state.adding and ours._state.db == orm._state.db


def test_loaded_instances_equal_the_orms_for_every_field(make_study, django_user_model):
    study = make_study()
    user = django_user_model.objects.filter(study_raters__study=study).first()
    assignment_row = rater(study, user)
    from annotation.services.assignments import assignment_next

    assignment = assignment_next(rater=assignment_row)
    assert assignment is not None and assignment.display  # JSON with content
    for model, pk in [
        (Study, study.pk),
        (StudyItem, assignment.item_id),
        (Assignment, assignment.pk),
        (Rater, assignment_row.pk),
        (User, user.pk),
    ]:
        table = model._meta.db_table
        ours = first(model, f"SELECT {columns(model, 't')} FROM {table} t WHERE t.id = %s", [pk])
        _same(ours, model.objects.get(pk=pk))


def test_a_joined_row_loads_each_model_from_its_own_columns(make_study):
    study = make_study()
    items = list(StudyItem.objects.filter(study=study).order_by("id"))
    rows = fetch_rows(
        f"SELECT {columns(StudyItem, 'i')}, {columns(Study, 's')} FROM annotation_studyitem i"
        " JOIN annotation_study s ON s.id = i.study_id WHERE s.id = %s ORDER BY i.id",
        [study.pk],
    )
    assert len(rows) == len(items) > 1
    for row, item in zip(rows, items, strict=True):
        _same(load(StudyItem, row), item)
        _same(
            load(Study, row, len(StudyItem._meta.concrete_fields)), Study.objects.get(pk=study.pk)
        )


def test_nothing_found_is_none(make_study):
    make_study()
    sql = f"SELECT {columns(Study, 's')} FROM annotation_study s WHERE s.id = %s"
    assert first(Study, sql, [-1]) is None


# --- Writes: core.rows.insert and update store what the ORM stores ---------------------------


def _answer_fields(assignment: Assignment, key: str, now=None) -> dict:
    now = now or timezone.now()
    return {
        "assignment": assignment,
        "idempotency_key": key,
        "label": "A",
        "confidence": 3,
        "note": "why: ünïcode, 'quotes' and %s",
        "details": {"choice": 1, "nested": [1.5, None, "x"]},
        "display": {"order": ["B", "A"]},
        "started_at": now - timedelta(seconds=7),
        "submitted_at": now,
        "time_on_item_s": 7.25,
        "retracted_at": now,  # two stored per assignment: only one may be live
        "retraction_reason": RetractionReason.UNDO,
    }


def _stored(model, pk) -> dict:
    return _fields(model.objects.get(pk=pk))


def test_an_inserted_row_is_the_row_the_orm_inserts(make_study, django_user_model):
    study = make_study()
    user = django_user_model.objects.filter(study_raters__study=study).first()
    from annotation.services.assignments import assignment_next

    assignment = assignment_next(rater=rater(study, user))
    now = timezone.now()
    with patch.object(Answer, "save_base", side_effect=AssertionError("the ORM saved it")):
        ours = insert(Answer(**_answer_fields(assignment, "ours", now)))
    theirs = Answer.objects.create(**_answer_fields(assignment, "theirs", now))
    assert ours.pk is not None and ours.pk != theirs.pk
    assert not ours._state.adding and ours._state.db == theirs._state.db
    mine, orms = _stored(Answer, ours.pk), _stored(Answer, theirs.pk)
    for name in ("id", "idempotency_key", "received_at"):
        mine.pop(name), orms.pop(name)  # differ by design (received_at: the moment of each call)
    assert mine == orms
    # The default (received_at: timezone.now) was applied and stored as an aware datetime.
    assert ours.received_at == Answer.objects.get(pk=ours.pk).received_at


def test_insert_leaves_save_signals_and_expressions_to_the_orm(make_study, django_user_model):
    study = make_study()
    user = django_user_model.objects.filter(study_raters__study=study).first()
    from annotation.services.assignments import assignment_next

    assignment = assignment_next(rater=rater(study, user))
    heard = []

    def receiver(sender, instance, created, **kwargs):
        heard.append((instance.idempotency_key, created))

    signals.post_save.connect(receiver, sender=Answer)
    try:
        stored = insert(Answer(**_answer_fields(assignment, "signalled")))
    finally:
        signals.post_save.disconnect(receiver, sender=Answer)
    assert heard == [("signalled", True)]  # the ORM saved it, so its receiver heard
    assert Answer.objects.filter(pk=stored.pk).exists()
    with pytest.raises(ValueError, match="unsaved related object"):
        insert(Answer(**_answer_fields(Assignment(), "orphan")))  # the ORM's own refusal


def test_an_update_is_the_orms_update(make_study, django_user_model):
    study = make_study()
    user = django_user_model.objects.filter(study_raters__study=study).first()
    from annotation.services.assignments import assignment_next

    assignment = assignment_next(rater=rater(study, user))
    other = StudyItem.objects.filter(study=study).exclude(pk=assignment.item_id).first()
    now = timezone.now()
    values = {"state": "done", "completed_at": now, "display": {"order": ["A", "B"]}}
    with patch.object(QuerySet, "update", side_effect=AssertionError("the ORM updated it")):
        assert update(Assignment, assignment.pk, **values) == 1
        assert update(Assignment, -1, state="done") == 0
    ours = _stored(Assignment, assignment.pk)
    Assignment.objects.filter(pk=assignment.pk).update(state="leased", completed_at=None)
    Assignment.objects.filter(pk=assignment.pk).update(**values)
    assert ours == _stored(Assignment, assignment.pk)
    # Expressions and model instances go through the ORM, which knows what to do with them.
    assert update(StudyItem, other.pk, completed_answers=F("completed_answers") + 2) == 1
    other.refresh_from_db()
    assert other.completed_answers == 2
    assert update(Assignment, assignment.pk, item=other) == 1
    assert Assignment.objects.get(pk=assignment.pk).item_id == other.pk
