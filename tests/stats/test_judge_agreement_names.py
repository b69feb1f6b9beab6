"""Judge agreement counts every judge that has judged the run — those in ``run.judges`` and
those known only by ``Judgment.judge_name`` (imported, or added by a re-judge) — and reports a
judge that is mid-way on the replies both judges scored."""

import pytest
from django.urls import reverse

from benchmark.models import Condition, EvaluationUnit, Judgment, JudgmentState

EXTRA = "imported-judge"


def _judge_some(run, count: int) -> list[int]:
    """A name-only judge (``judge`` NULL, not in ``run.judges``) copies the primary verdict on
    the first ``count`` vanilla replies."""
    units = list(
        EvaluationUnit.objects.filter(run=run, condition=Condition.VANILLA).order_by("id")[:count]
    )
    for unit in units:
        primary = Judgment.objects.get(unit=unit, judge_name="demo-judge-primary")
        Judgment.objects.create(
            unit=unit,
            judge=None,
            judge_name=EXTRA,
            state=JudgmentState.DONE,
            verdict=primary.verdict,
        )
    return [u.pk for u in units]


@pytest.mark.django_db
def test_a_name_only_judge_mid_way_is_paired_on_the_replies_it_scored(
    demo_run, client_for, researcher
):
    assert not demo_run.judges.filter(name=EXTRA).exists()
    judged = _judge_some(demo_run, 7)
    url = reverse("stats_api:table", args=["judge-agreement"]) + f"?run={demo_run.pk}"
    rows = client_for(researcher).get(url).json()["rows"]
    pair = [
        r
        for r in rows
        if r["trigger_type"] == "ALL"
        and {r["judge_a"], r["judge_b"]} == {EXTRA, "demo-judge-primary"}
    ]
    assert len(pair) == 1
    assert pair[0]["n_units"] == len(judged)
    assert pair[0]["agreement"] == 1.0
    # three judges now: the all-judges row exists
    assert any(r["judge_a"] == "ALL" and r["trigger_type"] == "ALL" for r in rows)
