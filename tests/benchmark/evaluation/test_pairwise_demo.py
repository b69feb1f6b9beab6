"""The demo's recorded pairwise verdicts: loaded by ``load_demo`` into the demo run, and served
offline by the replay provider, so that ``judge_pairs`` on the demo run gives back exactly what
was loaded — without one reply or single-judge call."""

import io
import json
from collections import Counter

import pytest
from django.core.management import call_command

from benchmark.demo_data import make_pairwise_verdicts
from benchmark.evaluation import pairwise
from benchmark.evaluation.demo_run import DEMO_JUDGES, DEMO_RUN_NAME, PAIRWISE_FILE
from benchmark.models import (
    AuditVia,
    EvaluationRun,
    PairwiseComparison,
    PairwiseJudgment,
    ProviderCall,
    RunStatus,
)
from benchmark.providers.base import ReplayKey
from benchmark.providers.replay import ReplayStore
from proactweb.celery import app as celery_app

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_run(db):
    call_command("load_demo", "--no-users", stdout=io.StringIO())
    return EvaluationRun.objects.get(name=DEMO_RUN_NAME)


def _recorded():
    return [json.loads(line) for line in PAIRWISE_FILE.read_text(encoding="utf-8").splitlines()]


def test_the_recordings_are_what_the_generator_writes():
    rows, _ = make_pairwise_verdicts.records()
    assert rows == _recorded()


def _sources(r):
    return frozenset(
        ((r["first_model"], r["first_condition"]), (r["second_model"], r["second_condition"]))
    )


def test_every_models_and_conditions_pair_at_every_trigger_in_both_orders_for_both_judges():
    recorded = _recorded()
    orders = Counter((r["judge"], r["unique_id_eval"], r["turn"], _sources(r)) for r in recorded)
    assert set(orders.values()) == {2}  # each pair once in each order
    # judges × triggers × (3 pairs of models in each of 2 conditions + 3 models' two conditions)
    assert len(orders) == 2 * 33 * (3 * 2 + 3)
    assert {r["judge"] for r in recorded} == set(DEMO_JUDGES)
    for r in recorded:  # a models pair or a conditions pair, nothing else
        same_model = r["first_model"] == r["second_model"]
        assert same_model != (r["first_condition"] == r["second_condition"])


def test_load_demo_loads_them_into_the_demo_run(demo_run):
    comparisons = PairwiseComparison.objects.filter(run=demo_run)
    assert comparisons.count() == 297
    assert set(demo_run.pairwise_judges.values_list("name", flat=True)) == set(DEMO_JUDGES)
    judgments = PairwiseJudgment.objects.filter(comparison__run=demo_run)
    assert judgments.count() == len(_recorded()) == 1188
    for c in comparisons.select_related("unit_a__endpoint", "unit_b__endpoint"):
        assert c.unit_a.trigger_id == c.unit_b.trigger_id == c.trigger_id
        if c.unit_a.condition == c.unit_b.condition:  # side A: the name sorting first
            assert c.unit_a.endpoint.name < c.unit_b.endpoint.name
        else:  # one model's two replies: side A the vanilla one
            assert c.unit_a.endpoint_id == c.unit_b.endpoint_id
            assert (c.unit_a.condition, c.unit_b.condition) == ("vanilla", "rubric_injected")
    # A recorded "1" is side A when A was shown first, side B when B was.
    for row in judgments.filter(raw_output__contains='"choice": "1"')[:20]:
        assert row.winner == ("model_a" if row.order == "ab" else "model_b")
    call_command("load_demo", "--no-users", stdout=io.StringIO())  # again: nothing added
    assert PairwiseJudgment.objects.count() == 1188


def test_the_replay_provider_serves_each_order_as_recorded():
    store = ReplayStore.from_demo_data()
    row = _recorded()[0]
    key = ReplayKey(
        "pairwise",
        row["unique_id_eval"],
        row["turn"],
        row["first_model"],
        row["first_condition"],
        judge=row["judge"],
        other_model=row["second_model"],
        other_condition=row["second_condition"],
    )
    assert json.loads(store.lookup(key)) == {"choice": row["choice"], "rationale": row["rationale"]}
    assert store.lookup(ReplayKey("pairwise", "nope", 1, "m", "vanilla", judge="j")) is None


def test_judge_pairs_on_the_demo_run_replays_what_load_demo_loaded(
    demo_run, django_capture_on_commit_callbacks
):
    loaded = {
        (a, b, judge, order): winner
        for a, b, judge, order, winner in PairwiseJudgment.objects.filter(
            comparison__run=demo_run
        ).values_list(
            "comparison__unit_a_id", "comparison__unit_b_id", "judge_name", "order", "winner"
        )
    }
    PairwiseComparison.objects.filter(run=demo_run).delete()
    celery_app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            models = pairwise.run_pairwise_judge(
                run_id=demo_run.pk, pairs="models", via=AuditVia.COMMAND
            )
        with django_capture_on_commit_callbacks(execute=True):
            conditions = pairwise.run_pairwise_judge(
                run_id=demo_run.pk, pairs="conditions", via=AuditVia.COMMAND
            )
    finally:
        celery_app.conf.task_always_eager = False
    demo_run.refresh_from_db()
    assert demo_run.status == RunStatus.DONE
    # 2 of the 3 models are side A of a models pair per trigger and condition; every vanilla
    # reply is side A of a conditions pair.
    assert (models.created, models.units) == (198, 132)
    assert (conditions.created, conditions.units) == (99, 99)
    replayed = {
        (a, b, judge, order): winner
        for a, b, judge, order, winner in PairwiseJudgment.objects.filter(
            comparison__run=demo_run
        ).values_list(
            "comparison__unit_a_id", "comparison__unit_b_id", "judge_name", "order", "winner"
        )
    }
    assert replayed == loaded
    purposes = Counter(ProviderCall.objects.filter(run=demo_run).values_list("purpose", flat=True))
    assert purposes == {"pairwise": 1188}
