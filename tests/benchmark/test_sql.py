"""benchmark/sql.py: the batch's per-unit UPDATE, sent as one executemany, changes exactly what
the ORM's update of the same units would — only units still running under the batch's claim."""

import datetime

import pytest
from django.db import connection
from django.utils import timezone

from benchmark.models import EvaluationUnit, UnitState
from benchmark.sql import units_update_owned
from tests.annotation.conftest import build_run

pytestmark = pytest.mark.django_db

FIELDS = ("reply", "input_tokens", "output_tokens", "reasoning_tokens", "latency_s")


def _state(units) -> list[tuple]:
    return list(
        EvaluationUnit.objects.filter(pk__in=[u.pk for u in units])
        .order_by("pk")
        .values_list("pk", "state", "claim_token", *FIELDS, "error", "finished_at")
    )


def test_it_updates_the_owned_units_as_the_orm_would_and_leaves_the_others():
    build_run(dialogues=1)
    units = list(EvaluationUnit.objects.order_by("pk")[:4])
    EvaluationUnit.objects.filter(pk__in=[u.pk for u in units[:3]]).update(
        state=UnitState.RUNNING, claim_token="ours"
    )
    EvaluationUnit.objects.filter(pk=units[2].pk).update(claim_token="someone-else")
    before = _state(units)
    rows = [(f"reply {u.pk}", 10 + i, 20 + i, i, 0.5 * i, u.pk) for i, u in enumerate(units)]

    units_update_owned(fields=FIELDS, rows=rows, claim_token="ours")
    ours = _state(units)

    # The same change through the ORM, one unit at a time, from the same starting point.
    for pk, state, token, *values in before:
        EvaluationUnit.objects.filter(pk=pk).update(
            state=state, claim_token=token, **dict(zip((*FIELDS, "error", "finished_at"), values))
        )
    for *values, pk in rows:
        EvaluationUnit.objects.filter(pk=pk, claim_token="ours", state=UnitState.RUNNING).update(
            **dict(zip(FIELDS, values, strict=True))
        )
    assert ours == _state(units)
    assert [row[3] for row in ours] == [
        f"reply {units[0].pk}",
        f"reply {units[1].pk}",
        before[2][3],  # claimed by another delivery: untouched
        before[3][3],  # not running: untouched
    ]


def test_datetimes_and_errors_are_written_as_the_orm_writes_them():
    build_run(dialogues=1)
    unit = EvaluationUnit.objects.order_by("pk").first()
    EvaluationUnit.objects.filter(pk=unit.pk).update(state=UnitState.RUNNING, claim_token="t")
    when = timezone.now().replace(microsecond=0) - datetime.timedelta(minutes=5)
    units_update_owned(
        fields=("state", "error", "finished_at"),
        rows=[
            (
                UnitState.ERROR,
                "vendor said no",
                connection.ops.adapt_datetimefield_value(when),
                unit.pk,
            )
        ],
        claim_token="t",
    )
    unit.refresh_from_db()
    assert (unit.state, unit.error, unit.finished_at) == (UnitState.ERROR, "vendor said no", when)


def test_a_field_with_no_column_is_refused_before_any_statement():
    build_run(dialogues=1)
    unit = EvaluationUnit.objects.order_by("pk").first()
    with pytest.raises(ValueError, match="judgments is a relation"):
        units_update_owned(fields=("judgments",), rows=[("x", unit.pk)], claim_token="t")
