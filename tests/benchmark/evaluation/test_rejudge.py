"""Re-judging a run (more judges, judge epochs, the failure-mode classifier) end to end, inline
(Celery's eager mode): the real OpenAI-compatible provider against the local fake vendor
server. Nothing re-judged ever asks a model under test for a reply."""

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError, OutputWrapper
from django.utils import timezone

from benchmark.corpus.importer import corpus_import
from benchmark.evaluation import runs
from benchmark.evaluation.engine import units_execute
from benchmark.management.run_commands import watch_run
from benchmark.models import (
    AuditVia,
    Dialogue,
    EvaluationRun,
    EvaluationUnit,
    FailureModeClassification,
    JudgeDisagreement,
    Judgment,
    JudgmentRepeat,
    ModelEndpoint,
    ProviderCall,
    ResponseCacheEntry,
    RunAuditEvent,
    RunSource,
    RunStatus,
    UnitState,
)
from proactweb.celery import app as celery_app
from tests.factories import dialogue_record, jsonl_bytes, records_for, stream
from tests.fakes.vendor_server import FakeVendorServer

pytestmark = pytest.mark.django_db

MODEL_REPLY = "Glad it is sorted. Let me know if you need anything else!"
CLOSING = "Let me know if you need anything else!"


@pytest.fixture(autouse=True)
def eager_celery():
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


def verdict_json(verdict, evidence=CLOSING):
    return json.dumps({"verdict": verdict, "rationale": "Boilerplate only.", "evidence": evidence})


def label_json(mode="generic_closing", quote=CLOSING):
    return json.dumps({"failure_mode": mode, "quote": quote, "rationale": "A stock sign-off."})


class Vendor:
    """What each fake endpoint answers; tests change the answers per model."""

    def __init__(self):
        self.answers = {
            "m": lambda body: MODEL_REPLY,
            "judge-a": lambda body: verdict_json("FAIL"),
            "judge-b": lambda body: verdict_json("PARTIAL"),
            "judge-c": lambda body: verdict_json("FAIL"),
            "classifier": lambda body: label_json(),
        }

    def __call__(self, body):
        return self.answers[body["model"]](body)


@pytest.fixture
def vendor():
    return Vendor()


@pytest.fixture
def server(vendor):
    with FakeVendorServer(reply=vendor) as fake:
        yield fake


def _endpoint(name, server):
    return ModelEndpoint.objects.create(
        name=name,
        display_name=name.title(),
        provider="openai-compatible",
        model_name=name,
        base_url=server.openai_base_url,
        default_params={"temperature": 0.0},
    )


@pytest.fixture
def finished_run(server):
    corpus_import(stream=stream(jsonl_bytes([dialogue_record()])))
    model, judge_a = _endpoint("m", server), _endpoint("judge-a", server)
    run = runs.run_create(
        name="first", endpoints=[model], judges=[judge_a], dialogues=Dialogue.objects.all()
    )
    runs.run_launch(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.DONE
    assert ProviderCall.objects.filter(run=run, purpose="reply").count() == 3
    return run


@pytest.fixture(autouse=True)
def _on_commit(django_capture_on_commit_callbacks):
    """A re-judge enqueues once its transaction commits: the test's own transaction never does,
    so its callbacks run where they are registered."""
    global _capture
    _capture = django_capture_on_commit_callbacks
    yield


def rejudge(**kwargs):
    with _capture(execute=True):
        return runs.run_rejudge(**kwargs)


def _calls(run, purpose):
    return ProviderCall.objects.filter(run=run, purpose=purpose).count()


def test_added_judge_scores_every_reply_without_a_new_reply_and_updates_disagreements(
    finished_run, server
):
    run = finished_run
    replies_before = _calls(run, "reply")
    judge_b = _endpoint("judge-b", server)
    outcome = rejudge(run_id=run.pk, judges=[judge_b], via=AuditVia.COMMAND)
    run.refresh_from_db()
    assert outcome.units == 3 and outcome.judges_added == ("judge-b",)
    assert run.status == RunStatus.DONE and run.judging_only
    assert _calls(run, "reply") == replies_before  # not one reply regenerated
    assert Judgment.objects.filter(unit__run=run, judge_name="judge-b").count() == 3
    assert _calls(run, "judgment") == 3 + 3  # judge-a was not asked again
    disagreements = JudgeDisagreement.objects.filter(unit__run=run)
    assert disagreements.count() == 3
    assert all(d.verdicts == {"judge-a": "FAIL", "judge-b": "PARTIAL"} for d in disagreements)
    event = RunAuditEvent.objects.get(run=run, action="rejudge")
    assert "judges judge-b" in event.note


def test_a_later_judge_extends_a_disagreement_and_keeps_its_adjudication(finished_run, server):
    run = finished_run
    rejudge(run_id=run.pk, judges=[_endpoint("judge-b", server)], via=AuditVia.COMMAND)
    JudgeDisagreement.objects.filter(unit__run=run).update(final_verdict="FAIL")
    rejudge(run_id=run.pk, judges=[_endpoint("judge-c", server)], via=AuditVia.COMMAND)
    for d in JudgeDisagreement.objects.filter(unit__run=run):
        assert d.verdicts == {"judge-a": "FAIL", "judge-b": "PARTIAL", "judge-c": "FAIL"}
        assert d.final_verdict == "FAIL"


def test_epochs_repeat_each_judge_with_fresh_keys_and_epoch_zero_stays_cached(finished_run, server):
    run = finished_run
    cache_before = set(ResponseCacheEntry.objects.values_list("key", flat=True))
    rejudge(run_id=run.pk, epochs=3, via=AuditVia.COMMAND)
    repeats = JudgmentRepeat.objects.filter(unit__run=run)
    assert sorted(set(repeats.values_list("epoch", flat=True))) == [1, 2]
    assert repeats.count() == 3 * 2 and set(repeats.values_list("verdict", flat=True)) == {"FAIL"}
    assert Judgment.objects.filter(unit__run=run).count() == 3  # the verdicts are unchanged
    assert _calls(run, "judgment") == 3 + 6
    new_keys = set(ResponseCacheEntry.objects.values_list("key", flat=True)) - cache_before
    assert len(new_keys) == 6  # each repeat its own entry; epoch 0 was served as before
    rejudge(run_id=run.pk, epochs=3, via=AuditVia.COMMAND)
    assert _calls(run, "judgment") == 3 + 6  # nothing missing: nothing asked


def test_classifier_labels_only_the_recovery_replies_the_primary_judge_failed(
    finished_run, server, vendor
):
    run = finished_run
    # The primary judge fails only the RECOVERY reply at turn 8 and the EMERGENT one.
    vendor.answers["judge-a"] = lambda body: verdict_json("FAIL")
    classifier = _endpoint("classifier", server)
    rejudge(run_id=run.pk, classifier=classifier, via=AuditVia.COMMAND)
    labels = FailureModeClassification.objects.filter(unit__run=run)
    assert labels.count() == 1
    label = labels.get()
    assert label.unit.trigger.type == "RECOVERY"
    assert (label.state, label.failure_mode, label.quote) == ("done", "generic_closing", CLOSING)
    assert label.quote_status == "exact" and label.classifier_name == "classifier"
    assert _calls(run, "classify") == 1 and _calls(run, "reply") == 3
    assert RunAuditEvent.objects.filter(run=run, action="classify").count() == 1
    request = [r for r in server.requests() if r.body["model"] == "classifier"][0]
    prompt = request.body["messages"][0]["content"]
    assert MODEL_REPLY in prompt and "deliverable_repetition" in prompt
    assert "m" not in {w.strip(".,") for w in prompt.split()}  # the model is not named


def test_classifier_passes_are_not_labelled(finished_run, server, vendor):
    run = finished_run
    Judgment.objects.filter(unit__run=run).update(verdict="PASS")
    rejudge(run_id=run.pk, classifier=_endpoint("classifier", server), via=AuditVia.COMMAND)
    assert not FailureModeClassification.objects.filter(unit__run=run).exists()
    assert _calls(run, "classify") == 0


def test_malformed_label_then_a_good_one_is_kept(finished_run, server, vendor):
    run = finished_run
    answers = iter(["generic closing, I think", label_json(mode="no_such_mode"), label_json()])
    vendor.answers["classifier"] = lambda body: next(answers)
    rejudge(run_id=run.pk, classifier=_endpoint("classifier", server), via=AuditVia.COMMAND)
    label = FailureModeClassification.objects.get(unit__run=run)
    assert (label.state, label.attempts, label.failure_mode) == ("done", 3, "generic_closing")
    asks = [r for r in server.requests() if r.body["model"] == "classifier"]
    assert len(asks) == 3
    assert "not a JSON object" in asks[1].body["messages"][-1]["content"]
    assert "failure_mode must be one of" in asks[2].body["messages"][-1]["content"]


def test_quote_not_in_the_reply_three_times_is_a_classifier_error_with_raw_output(
    finished_run, server, vendor
):
    run = finished_run
    invented = label_json(quote="Enjoy the conference in Lisbon")
    vendor.answers["classifier"] = lambda body: invented
    rejudge(run_id=run.pk, classifier=_endpoint("classifier", server), via=AuditVia.COMMAND)
    label = FailureModeClassification.objects.get(unit__run=run)
    assert (label.state, label.failure_mode, label.attempts) == ("classifier_error", "", 3)
    assert label.raw_output == invented and "not a verbatim passage" in label.error
    run.refresh_from_db()
    assert run.status == RunStatus.DONE


def test_rejudge_of_a_cancelled_run_never_replies_to_its_unreplied_units(server):
    corpus_import(stream=stream(jsonl_bytes([dialogue_record()])))
    model, judge_a = _endpoint("m", server), _endpoint("judge-a", server)
    run = runs.run_create(
        name="cut", endpoints=[model], judges=[judge_a], dialogues=Dialogue.objects.all()
    )
    celery_app.conf.task_always_eager = False  # launch without running anything yet
    try:
        runs.run_units_create(run=run)
        run.status, run.started_at = RunStatus.RUNNING, timezone.now()  # as run_launch does
        run.save()
    finally:
        celery_app.conf.task_always_eager = True
    first = EvaluationUnit.objects.filter(run=run).order_by("id").first()
    units_execute(unit_ids=[first.pk])
    runs.run_cancel(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    rejudge(run_id=run.pk, judges=[_endpoint("judge-b", server)], via=AuditVia.COMMAND)
    run.refresh_from_db()
    assert run.status == RunStatus.DONE
    assert _calls(run, "reply") == 1
    states = dict(EvaluationUnit.objects.filter(run=run).values_list("pk", "state"))
    assert states.pop(first.pk) == UnitState.DONE
    assert set(states.values()) == {UnitState.PENDING}  # left as the cancel left them
    # Even dispatched by hand, a unit without a reply is not claimed in a re-judged run.
    assert units_execute(unit_ids=list(states)) == {}
    assert _calls(run, "reply") == 1


def test_imported_run_is_rejudged_by_a_second_judge_without_replies(server, vendor, tmp_path):
    from tests.benchmark.evaluation.test_results_format import _result_line

    vendor.answers["judge-b"] = lambda body: verdict_json("PARTIAL", "bring a spare HDMI cable")

    records = records_for(2)
    corpus_import(stream=stream(jsonl_bytes(records)))
    lines = [_result_line(records[0]), _result_line(records[1], skip_turn=4)]
    path = tmp_path / "acme-1_proactivity_bench_results.jsonl"
    path.write_bytes(jsonl_bytes(lines))
    call_command("import_results", str(path), stdout=io.StringIO())
    run = EvaluationRun.objects.get()
    assert run.source == RunSource.IMPORTED
    imported_judge = run.primary_judge.name
    second = _endpoint("judge-b", server)
    outcome = rejudge(run_id=run.pk, judges=[second], via=AuditVia.COMMAND)
    run.refresh_from_db()
    assert outcome.units == 5 and run.status == RunStatus.DONE
    assert not [r for r in server.requests() if r.body["model"] == "acme-1"]
    assert Judgment.objects.filter(unit__run=run, judge_name="judge-b").count() == 5
    assert EvaluationUnit.objects.filter(run=run, state=UnitState.MISSING).count() == 1
    # Against judge-b's PARTIAL, every imported PASS and FAIL is a disagreement.
    verdicts = JudgeDisagreement.objects.filter(unit__run=run).values_list("verdicts", flat=True)
    assert len(verdicts) == 4  # PASS, Partial, FAIL; PASS, (skipped), FAIL
    assert all(set(v) == {imported_judge, "judge-b"} for v in verdicts)
    asked = [r for r in server.requests() if r.body["model"] == "judge-b"][0]
    assert "bring a spare HDMI cable" in asked.body["messages"][0]["content"]


def test_only_finished_runs_are_rejudged_and_nothing_to_do_is_refused(finished_run, server):
    run = finished_run
    with pytest.raises(runs.RunActionError, match="nothing to do"):
        rejudge(run_id=run.pk, via=AuditVia.COMMAND)
    with pytest.raises(runs.RunActionError, match="epochs must be between"):
        rejudge(run_id=run.pk, epochs=0, via=AuditVia.COMMAND)
    run.status = RunStatus.RUNNING
    run.save()
    with pytest.raises(runs.RunActionError, match="only a done, cancelled or failed run"):
        rejudge(run_id=run.pk, epochs=2, via=AuditVia.COMMAND)


def test_judge_run_command(finished_run, server):
    run = finished_run
    _endpoint("judge-b", server)
    _endpoint("classifier", server)
    out = io.StringIO()
    with _capture(execute=True):  # (enqueued on commit: --no-wait, then watched once done)
        call_command(
            "judge_run",
            str(run.pk),
            "--judge",
            "judge-b",
            "--classifier",
            "classifier",
            "--no-wait",
            stdout=out,
        )
    assert f"Run {run.pk}: 3 replies enqueued (judges added: judge-b" in out.getvalue()
    watch_run(run, OutputWrapper(out))
    assert f"Run {run.pk} done" in out.getvalue()
    assert Judgment.objects.filter(unit__run=run, judge_name="judge-b").count() == 3
    assert FailureModeClassification.objects.filter(unit__run=run).count() == 1
    event = RunAuditEvent.objects.get(run=run, action="rejudge")
    assert event.via == "command" and "(judge_run)" in event.actor_name
    with pytest.raises(CommandError, match="--judge: unknown endpoint"):
        call_command("judge_run", str(run.pk), "--judge", "nobody", stdout=io.StringIO())
    with pytest.raises(CommandError, match="RUN: no run with id or name 'nope'"):
        call_command("judge_run", "nope", "--epochs", "2", stdout=io.StringIO())
    with _capture(execute=True):
        call_command("judge_run", "first", "--epochs", "2", "--no-wait", stdout=io.StringIO())
    assert JudgmentRepeat.objects.filter(unit__run=run).count() == 6


def test_admin_adds_a_judge_from_the_run_page_and_shows_its_progress(
    finished_run, server, admin_client
):
    run = finished_run
    judge_b = _endpoint("judge-b", server)
    page = admin_client.get(f"/admin/benchmark/evaluationrun/{run.pk}/change/")
    assert f"/admin/benchmark/evaluationrun/{run.pk}/rejudge/" in page.content.decode()
    form = admin_client.get(f"/admin/benchmark/evaluationrun/{run.pk}/rejudge/")
    assert form.status_code == 200 and "judge-a" in form.content.decode()
    empty = admin_client.post(f"/admin/benchmark/evaluationrun/{run.pk}/rejudge/", {})
    assert "Choose a judge, a number of epochs or a classifier." in empty.content.decode()
    with _capture(execute=True):
        done = admin_client.post(
            f"/admin/benchmark/evaluationrun/{run.pk}/rejudge/", {"judges": [judge_b.pk]}
        )
    assert done.status_code == 302
    assert Judgment.objects.filter(unit__run=run, judge_name="judge-b").count() == 3
    event = RunAuditEvent.objects.get(run=run, action="rejudge")
    assert event.via == "admin" and event.actor is not None
    progress = admin_client.get(f"/admin/benchmark/evaluationrun/{run.pk}/progress/")
    assert "judge-b: <strong>3</strong>" in progress.content.decode()
    run.status = RunStatus.RUNNING
    run.save()
    refused = admin_client.post(f"/admin/benchmark/evaluationrun/{run.pk}/rejudge/", {"epochs": 2})
    assert "Not re-judged: only a done, cancelled or failed run" in refused.content.decode()
