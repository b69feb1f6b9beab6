"""The evaluation engine end to end, inline (Celery's eager mode): the real providers against
the local fake vendor server, and the replay provider over the demo corpus. The real-worker
path (kill -9, redelivery) is in test_worker_crash.py."""

import io
import json
import re
from decimal import Decimal

import pytest
from django.core.management import call_command

from benchmark.corpus.importer import corpus_import
from benchmark.evaluation import runs
from benchmark.evaluation.engine import unit_execute
from benchmark.evaluation.results_format import results_export
from benchmark.models import (
    Dialogue,
    EvaluationRun,
    EvaluationUnit,
    JudgeDisagreement,
    Judgment,
    ModelEndpoint,
    ModelPrice,
    ProviderCall,
    UnitState,
)
from proactweb.celery import app as celery_app
from tests.factories import dialogue_record, jsonl_bytes, records_for, stream
from tests.fakes.vendor_server import FakeVendorServer, Fault

pytestmark = pytest.mark.django_db

MODEL_REPLY = "Happy to help. Bring a spare HDMI cable and label the cable bag before you leave."
QUOTE = "Bring a spare HDMI cable"


@pytest.fixture(autouse=True)
def eager_celery():
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


def judge_json(verdict="PASS", evidence=QUOTE):
    return json.dumps(
        {"verdict": verdict, "rationale": "Acts on the AV gap.", "evidence": evidence}
    )


def fake_reply(body):
    """The model under test answers MODEL_REPLY; the judges answer with a verdict."""
    if body["model"] == "acme-judge-a":
        return judge_json("PASS")
    if body["model"] == "acme-judge-b":
        return judge_json("PARTIAL")
    return MODEL_REPLY


@pytest.fixture
def server():
    with FakeVendorServer(reply=fake_reply) as fake:
        yield fake


def _endpoint(name, server, model=None):
    return ModelEndpoint.objects.create(
        name=name,
        display_name=name.title(),
        provider="openai-compatible",
        model_name=model or name,
        base_url=server.openai_base_url,
        default_params={"temperature": 0.0},
    )


@pytest.fixture
def setup(server):
    extension = {
        "persona": {"name": "Mara Lind", "summary": "Runs a design studio in Ghent."},
        "scenario": {"title": "Offsite", "hidden_goal": "Keep the team together after a merger."},
    }
    corpus_import(stream=stream(jsonl_bytes([dialogue_record(extension=extension)])))
    model = _endpoint("acme-model", server)
    judges = [_endpoint("acme-judge-a", server), _endpoint("acme-judge-b", server)]
    return model, judges


def _run(model, judges, **kwargs):
    run = runs.run_create(
        name="t", endpoints=[model], judges=judges, dialogues=Dialogue.objects.all(), **kwargs
    )
    runs.run_launch(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_run_replies_and_judges_every_trigger_and_records_disagreements(setup, server):
    model, judges = setup
    ModelPrice.objects.create(
        model_name="acme-model", input_usd_per_mtok=Decimal("2"), output_usd_per_mtok=Decimal("8")
    )
    run = _run(model, judges)
    assert run.status == "done"
    units = EvaluationUnit.objects.filter(run=run)
    assert units.count() == 3 and set(units.values_list("state", flat=True)) == {"done"}
    assert set(units.values_list("reply", flat=True)) == {MODEL_REPLY}
    assert Judgment.objects.filter(unit__run=run, state="done").count() == 6
    assert JudgeDisagreement.objects.filter(unit__run=run).count() == 3  # PASS vs PARTIAL
    calls = ProviderCall.objects.filter(run=run)
    assert calls.count() == 9 == len(server.requests())
    expected_cost = sum(
        (Decimal(c.input_tokens) * 2 + Decimal(c.output_tokens + c.reasoning_tokens) * 8)
        / 1_000_000
        for c in calls.filter(endpoint=model)
    )
    progress = runs.run_progress(run=run)
    assert progress.cost_usd == expected_cost > 0
    assert progress.by_state == {"done": 3}


def test_model_sees_only_the_frozen_history_and_the_judge_no_persona(setup, server):
    model, judges = setup
    _run(model, judges, conditions=["vanilla", "rubric_injected"])
    bodies = [r.body for r in server.requests()]
    replies = [b for b in bodies if b["model"] == "acme-model"]
    judged = [b for b in bodies if b["model"].startswith("acme-judge")]
    for body in replies + judged:
        text = json.dumps(body)
        for secret in ("Mara Lind", "design studio", "Keep the team together", "Style", "style"):
            assert secret not in text
    vanilla = [b for b in replies if b["messages"][0]["role"] != "system"]
    injected = [b for b in replies if b["messages"][0]["role"] == "system"]
    assert len(vanilla) == len(injected) == 3
    for body in vanilla:  # history up to the trigger turn's user message, nothing after
        assert body["messages"][-1]["role"] == "user"
        assert "Connects the facts" not in json.dumps(body)  # no rubric for the model
        n_turn = int(re.match(r"Turn (\d+)", body["messages"][-1]["content"]).group(1))
        assert len(body["messages"]) == 2 * n_turn - 1
    assert all(
        "Connects the facts about the team offsite" in b["messages"][0]["content"] for b in injected
    )
    assert all("Connects the facts about the team offsite" in json.dumps(b) for b in judged)


def test_malformed_judge_output_is_asked_again_then_a_judge_error_with_raw_output(setup, server):
    model, judges = setup
    server.reply = lambda body: (
        "I think it passes." if body["model"] == "acme-judge-a" else fake_reply(body)
    )
    run = _run(model, judges[:1])
    errors = Judgment.objects.filter(unit__run=run, state="judge_error")
    assert errors.count() == 3
    judgment = errors.first()
    assert judgment.raw_output == "I think it passes." and judgment.verdict == ""
    assert "not a JSON object" in judgment.error
    assert judgment.attempts == 3
    judge_calls = [r for r in server.requests() if r.body["model"] == "acme-judge-a"]
    assert len(judge_calls) == 9  # three tries per reply, each a distinct request


def test_quote_absent_from_the_reply_is_asked_again(setup, server):
    model, judges = setup
    answers = iter([judge_json(evidence="Rent a van for the day")] + [judge_json()] * 10)
    server.reply = lambda body: next(answers) if body["model"] == "acme-judge-a" else MODEL_REPLY
    run = _run(model, judges[:1])
    done = Judgment.objects.filter(unit__run=run, state="done")
    assert done.count() == 3
    assert sorted(done.values_list("attempts", flat=True)) == [1, 1, 2]
    assert set(done.values_list("evidence", flat=True)) == {QUOTE}


def test_rate_limit_is_retried_and_the_call_counts_its_attempts(setup, server):
    model, judges = setup
    server.script(Fault.rate_limited(retry_after_s=0.05))
    run = _run(model, judges[:1])
    assert run.status == "done"
    assert ProviderCall.objects.filter(run=run, attempts=2).count() == 1


def test_non_retryable_error_marks_the_unit_and_retry_errors_recovers(
    setup, server, django_capture_on_commit_callbacks
):
    model, judges = setup
    server.script(Fault.unauthorized(), Fault.unauthorized(), Fault.unauthorized())
    run = _run(model, judges[:1])
    errored = EvaluationUnit.objects.filter(run=run, state=UnitState.ERROR)
    assert errored.count() == 3
    assert "401" in errored.first().error
    assert run.status == "done"  # finished, with errors to retry
    with django_capture_on_commit_callbacks(execute=True):
        assert runs.run_retry_errors(run_id=run.pk) == 3
    run.refresh_from_db()
    assert run.status == "done"
    assert EvaluationUnit.objects.filter(run=run, state=UnitState.DONE).count() == 3


def test_cancelled_run_makes_no_new_calls_and_resume_finishes_it(setup, server):
    model, judges = setup
    run = runs.run_create(
        name="t", endpoints=[model], judges=judges[:1], dialogues=Dialogue.objects.all()
    )
    run.status = "running"
    run.save()
    runs.run_units_create(run=run)
    runs.run_cancel(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "cancelled"
    unit = EvaluationUnit.objects.filter(run=run).first()
    assert unit_execute(unit_id=unit.pk) == "skipped"
    assert server.requests() == []
    assert runs.run_resume(run_id=run.pk) == 3
    run.refresh_from_db()
    assert run.status == "done"


def test_second_run_reuses_the_cache_and_fresh_sampling_does_not(setup, server):
    model, judges = setup
    _run(model, judges[:1])
    first = len(server.requests())
    cached = _run(model, judges[:1])
    assert len(server.requests()) == first
    assert ProviderCall.objects.filter(run=cached).count() == 0
    assert EvaluationUnit.objects.filter(run=cached, state="done").count() == 3
    fresh = _run(model, judges[:1], use_cache=False)
    assert len(server.requests()) == 2 * first
    assert ProviderCall.objects.filter(run=fresh).count() == first


def test_redelivered_unit_does_nothing_twice(setup, server):
    model, judges = setup
    run = _run(model, judges[:1])
    calls = len(server.requests())
    for unit in EvaluationUnit.objects.filter(run=run):
        assert unit_execute(unit_id=unit.pk) == "skipped"
    runs.run_resume(run_id=run.pk)
    assert len(server.requests()) == calls
    assert Judgment.objects.filter(unit__run=run).count() == 3


def test_pipeline_run_exports_in_the_release_results_format(setup, server):
    model, judges = setup
    run = _run(model, judges)
    out = io.StringIO()
    assert results_export(run=run, endpoint=model, out=out) == 1
    (record,) = [json.loads(line) for line in out.getvalue().splitlines()]
    assert record["evaluated_model"] == "acme-model"
    assert record["trigger_stats"]["EMERGENT"] == {"PASS": 1, "PARTIAL": 0, "FAIL": 0, "SKIPPED": 0}
    assert [t["evaluation_result"]["evidence"] for t in record["trigger_points"]] == [QUOTE] * 3
    assert {t["assistant_response"] for t in record["turn_records"]} == {MODEL_REPLY}


def test_demo_replay_run_reproduces_the_recorded_replies_and_verdicts():
    call_command("load_demo", "--no-users", stdout=io.StringIO())
    models = ModelEndpoint.objects.filter(name__in=["demo-atlas-large", "demo-cedar-small"])
    judges = list(ModelEndpoint.objects.filter(name__startswith="demo-judge").order_by("name"))
    run = runs.run_create(
        name="demo",
        endpoints=models,
        judges=judges,
        dialogues=Dialogue.objects.all()[:3],
        conditions=["vanilla", "rubric_injected"],
    )
    runs.run_launch(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "done"
    recorded = {}
    with open("benchmark/demo_data/judgments.jsonl", encoding="utf-8") as lines:
        for line in map(json.loads, lines):
            key = (line["unique_id_eval"], line["turn"], line["model"], line["condition"])
            recorded[(*key, line["judge"])] = line["verdict"]
    judgments = Judgment.objects.filter(unit__run=run).select_related(
        "unit__trigger__turn__dialogue", "unit__endpoint"
    )
    assert judgments.count() == EvaluationUnit.objects.filter(run=run).count() * 2
    for j in judgments:
        unit = j.unit
        key = (
            unit.trigger.turn.dialogue.unique_id_eval,
            unit.trigger.turn.index,
            unit.endpoint.name,
            unit.condition,
            j.judge_name,
        )
        assert j.state == "done" and j.verdict == recorded[key]
    assert JudgeDisagreement.objects.filter(unit__run=run).exists()


def test_run_eval_command_launches_and_reports(setup, server):
    model, judges = setup
    out = io.StringIO()
    call_command(
        "run_eval",
        "--name",
        "cli",
        "--models",
        "acme-model",
        "--judges",
        "acme-judge-a",
        "--dialogues",
        "all",
        stdout=out,
        stderr=io.StringIO(),
    )
    run = EvaluationRun.objects.get(name="cli")
    assert run.status == "done"
    assert f"Run {run.pk} done" in out.getvalue()


def test_unknown_endpoint_is_a_clear_command_error(setup):
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="unknown endpoint"):
        call_command(
            "run_eval",
            "--name",
            "x",
            "--models",
            "nope",
            "--judges",
            "acme-judge-a",
            "--dialogues",
            "all",
        )


def test_records_for_many_dialogues_fan_out_per_trigger_model_condition_sample(server):
    corpus_import(stream=stream(jsonl_bytes(records_for(4))))
    model = _endpoint("acme-model", server)
    judge = _endpoint("acme-judge-a", server)
    run = _run(model, [judge], conditions=["vanilla", "rubric_injected"], samples=2)
    assert EvaluationUnit.objects.filter(run=run).count() == 4 * 3 * 2 * 2
    assert run.status == "done"
