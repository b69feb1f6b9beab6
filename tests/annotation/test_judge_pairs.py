"""``judge_pairs --pairs study=ID``: an LLM pairwise judge compares exactly the pairs a human
study shows its raters (each item's ``unit`` and ``unit_b``), so that LLM and human verdicts
exist on the same pairs; pairs of another run are left out and said so."""

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.selectors import study_unit_pairs
from benchmark.models import (
    EvaluationRun,
    EvaluationUnit,
    ModelEndpoint,
    PairwiseComparison,
    PairwiseJudgment,
    ProviderCall,
    RunSource,
    RunStatus,
    UnitState,
)
from proactweb.celery import app as celery_app
from tests.fakes.vendor_server import FakeVendorServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def pairwise_judge():
    def answer(body):
        return json.dumps({"choice": "2", "rationale": "The second one acts on the details."})

    with FakeVendorServer(reply=answer) as server:
        yield (
            ModelEndpoint.objects.create(
                name="pj-fake",
                display_name="Pairwise judge",
                provider="openai-compatible",
                model_name="pj-fake",
                base_url=server.openai_base_url,
            ),
            server,
        )


def test_a_studys_pairs_are_judged_in_both_orders(
    run, make_study, pairwise_judge, django_capture_on_commit_callbacks
):
    judge, server = pairwise_judge
    study = make_study("pairwise", trigger_type="RECOVERY")
    pairs = study_unit_pairs(study_id=study.pk)
    items = list(study.items.order_by("position", "id").values_list("unit_id", "unit_b_id"))
    assert [(p.unit_a, p.unit_b) for p in pairs] == items and len(items) == 8
    out = io.StringIO()
    celery_app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            call_command(
                "judge_pairs",
                str(run.pk),
                "--judge",
                "pj-fake",
                "--pairs",
                f"study={study.pk}",
                "--no-wait",
                stdout=out,
            )
    finally:
        celery_app.conf.task_always_eager = False
    assert f"Run {run.pk}: 8 of 8 pairs (8 new, 8 in all); 8 replies enqueued" in out.getvalue()
    comparisons = set(
        PairwiseComparison.objects.filter(run=run).values_list("unit_a_id", "unit_b_id")
    )
    assert comparisons == set(items)  # the study's sides, as the study has them
    verdicts = PairwiseJudgment.objects.filter(comparison__run=run, judge_name="pj-fake")
    assert verdicts.count() == 16
    # "2" is side B when A was shown first, side A when B was.
    assert set(verdicts.values_list("order", "winner")) == {("ab", "model_b"), ("ba", "model_a")}
    assert set(ProviderCall.objects.filter(run=run).values_list("purpose", flat=True)) == {
        "pairwise"
    }
    prompt = server.requests()[0].body["messages"][0]["content"]
    assert not any(name in prompt for name in ("zephyr", "quartz", "vanilla", "injected"))


def test_pairs_of_another_run_are_left_out_and_a_study_with_none_is_refused(run, make_study):
    ModelEndpoint.objects.create(
        name="pj-fake", display_name="P", provider="replay", model_name="pj-fake"
    )
    study = make_study("pairwise", trigger_type="RECOVERY")
    other = EvaluationRun.objects.create(
        name="Other run", source=RunSource.IMPORTED, status=RunStatus.DONE
    )
    with pytest.raises(CommandError, match=f"--pairs: study {study.pk} has no pair of replies"):
        call_command(
            "judge_pairs",
            str(other.pk),
            "--judge",
            "pj-fake",
            "--pairs",
            f"study={study.pk}",
            stdout=io.StringIO(),
        )
    # Move one item's side B to the other run: that pair is left out, and said so.
    item = study.items.order_by("id").first()
    EvaluationUnit.objects.filter(pk=item.unit_b_id).update(run=other)
    EvaluationUnit.objects.filter(run=run).update(state=UnitState.DONE)
    out = io.StringIO()
    call_command(
        "judge_pairs",
        str(run.pk),
        "--judge",
        "pj-fake",
        "--pairs",
        f"study={study.pk}",
        "--no-wait",
        stdout=out,
    )
    assert f"Study {study.pk}: 1 of its 8 pairs are not replies of run {run.pk}: left out." in (
        out.getvalue()
    )
    assert PairwiseComparison.objects.filter(run=run).count() == 7
