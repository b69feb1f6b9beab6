"""core.rows builds model instances from plain SQL: they must be what the ORM builds —
every field's value and type (JSON, datetimes, booleans, nullable keys), on this database."""

import pytest
from django.contrib.auth.models import User
from django.db.models import Model

from annotation.models import Assignment, Rater, Study, StudyItem
from core.rows import columns, fetch_rows, first, load
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
