"""Units executed in batches (engine.units_execute): calls in flight together on the worker's
event loop, identical requests made once, cancellation mid-batch, and a batch that fails keeping
what it paid for. Real SDKs against the local fake vendor server."""

import json
import threading

import pytest
from django.utils import timezone

from benchmark.corpus.importer import corpus_import
from benchmark.evaluation import engine, runs
from benchmark.evaluation.engine import units_execute
from benchmark.models import (
    Dialogue,
    EvaluationRun,
    EvaluationUnit,
    Judgment,
    ModelEndpoint,
    ProviderCall,
    ResponseCacheEntry,
    RunStatus,
    UnitState,
)
from tests.factories import jsonl_bytes, records_for, stream
from tests.fakes.vendor_server import FakeVendorServer

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = "Book the larger room and send the agenda on Monday, before the venue deadline."
QUOTE = "send the agenda on Monday"


def _reply(body):
    if body["model"] == "batch-judge":
        return json.dumps({"verdict": "PASS", "rationale": "Acts early.", "evidence": QUOTE})
    return REPLY


@pytest.fixture
def server():
    with FakeVendorServer(reply=_reply) as fake:
        yield fake


def _endpoint(name, server):
    return ModelEndpoint.objects.create(
        name=name,
        display_name=name,
        provider="openai-compatible",
        model_name=name,
        base_url=server.openai_base_url,
    )


@pytest.fixture
def endpoints(server):
    corpus_import(stream=stream(jsonl_bytes(records_for(2))))  # 2 dialogues × 3 triggers
    return _endpoint("batch-model", server), _endpoint("batch-judge", server)


def _running_run(model, judge, **kwargs) -> tuple[EvaluationRun, list[int]]:
    run = runs.run_create(
        name="batch", endpoints=[model], judges=[judge], dialogues=Dialogue.objects.all(), **kwargs
    )
    runs.run_units_create(run=run)
    EvaluationRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, started_at=timezone.now()
    )
    ids = list(EvaluationUnit.objects.filter(run=run).order_by("id").values_list("id", flat=True))
    return run, ids


def _in_thread(unit_ids):
    outcome: dict = {}

    def work():
        from django.db import connection

        try:
            outcome["result"] = units_execute(unit_ids=unit_ids)
        except BaseException as exc:  # surfaced by the test
            outcome["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    return thread, outcome


def test_a_batchs_calls_are_in_flight_together_then_judged_together(endpoints, server):
    model, judge = endpoints
    run, ids = _running_run(model, judge)
    server.close_gate()

    thread, outcome = _in_thread(ids)
    log = server.wait_for(lambda log: sum(r.outcome == "pending" for r in log) == 6)
    assert {r.body["model"] for r in log} == {"batch-model"}  # all six replies at once
    server.open_gate()
    thread.join(30)

    assert outcome["result"] == dict.fromkeys(ids, UnitState.DONE)
    assert Judgment.objects.filter(unit__run=run, state="done").count() == 6
    assert len(server.requests()) == 12 == ProviderCall.objects.filter(run=run).count()
    run.refresh_from_db()
    assert run.status == RunStatus.DONE


def test_the_same_request_needed_twice_in_one_batch_is_made_once(endpoints, server):
    model, judge = endpoints
    first, first_ids = _running_run(model, judge)
    second, second_ids = _running_run(model, judge)  # shares the cache: identical requests

    outcomes = units_execute(unit_ids=first_ids + second_ids)

    assert set(outcomes.values()) == {UnitState.DONE} and len(outcomes) == 12
    requests = server.requests()
    assert len(requests) == 12 == len({r.request_hash for r in requests})
    paid = ProviderCall.objects.filter(run__in=[first, second]).count()
    assert paid == 12  # each call paid once, by whichever unit made it
    for run in (first, second):
        assert Judgment.objects.filter(unit__run=run, state="done").count() == 6


def test_cancelling_mid_batch_makes_no_new_calls_and_hands_the_units_back(endpoints, server):
    model, judge = endpoints
    run, ids = _running_run(model, judge)
    server.close_gate()
    thread, outcome = _in_thread(ids)
    server.wait_for(lambda log: sum(r.outcome == "pending" for r in log) == 6)

    runs.run_cancel(run_id=run.pk)
    # Each worker re-reads the run's state at most once a second; let that second pass.
    threading.Event().wait(engine.LIVE_TTL_S + 0.1)
    server.open_gate()
    thread.join(30)

    assert outcome["result"] == dict.fromkeys(ids, UnitState.PENDING)
    assert {r.body["model"] for r in server.requests()} == {"batch-model"}  # no judge calls
    assert ResponseCacheEntry.objects.count() == 6  # the replies that came back are kept
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED

    assert runs.run_resume(run_id=run.pk) == 6  # eager: runs now
    run.refresh_from_db()
    assert run.status == RunStatus.DONE
    assert [r.body["model"] for r in server.requests()].count("batch-model") == 6  # not again


def test_a_batch_that_fails_keeps_what_it_paid_for_and_hands_its_units_back(
    endpoints, server, monkeypatch
):
    model, judge = endpoints
    run, ids = _running_run(model, judge)

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in judging")

    monkeypatch.setattr(engine, "parse_judge_output", broken)  # a fault only a bug can cause
    with pytest.raises(RuntimeError, match="a bug in judging"):
        units_execute(unit_ids=ids)

    units = EvaluationUnit.objects.filter(run=run)
    assert set(units.values_list("state", flat=True)) == {UnitState.PENDING}
    assert set(units.values_list("claim_token", flat=True)) == {""}
    sent = len(server.requests())
    assert ResponseCacheEntry.objects.count() == sent  # every completed call is cached

    monkeypatch.undo()
    assert set(units_execute(unit_ids=ids).values()) == {UnitState.DONE}
    # Nothing that had completed was sent again: the retry sent only the calls the failed
    # batch had not. How many those are is timing: each unit's judge call is sent when its
    # reply comes back, so the fault can stop the batch before the last ones are sent.
    log = server.requests()
    paid_before = {r.request_hash for r in log[:sent]}
    assert not [r for r in log[sent:] if r.request_hash in paid_before]
    assert len(log) == 12  # 6 replies and 6 judge calls, each sent once
    assert Judgment.objects.filter(unit__run=run, state="done").count() == 6


@pytest.fixture
def eager_celery():
    from proactweb.celery import app as celery_app

    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


@pytest.fixture(autouse=True)
def _eager(eager_celery, settings):
    settings.EVAL_BATCH_SIZE = 4  # so that a launch is several tasks


def test_a_launch_enqueues_one_task_per_batch_and_finishes_the_run(endpoints, server):
    model, judge = endpoints
    run = runs.run_create(
        name="launch", endpoints=[model], judges=[judge], dialogues=Dialogue.objects.all()
    )
    assert runs.run_launch(run_id=run.pk) == 6  # 6 units → batches of 4 and 2
    run.refresh_from_db()
    assert run.status == RunStatus.DONE
    assert set(EvaluationUnit.objects.filter(run=run).values_list("attempts", flat=True)) == {1}


def test_a_claim_reads_each_run_and_model_once_whatever_the_batchs_size(endpoints, server):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    model, judge = endpoints
    other = _endpoint("batch-model-2", server)
    run = runs.run_create(
        name="batch", endpoints=[model, other], judges=[judge], dialogues=Dialogue.objects.all()
    )
    runs.run_units_create(run=run)
    EvaluationRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, started_at=timezone.now()
    )
    ids = list(EvaluationUnit.objects.filter(run=run).values_list("id", flat=True))
    statements = []
    for some in (ids[:2], ids[2:]):  # 2 units, then 10
        with CaptureQueriesContext(connection) as queries:
            claimed, _ = engine.units_claim(some)
        statements.append(len(queries))
        assert len(claimed) == len(some)
        # One run object (with its primary judge) and one object per model, shared by the
        # batch's units; each unit's trigger, turn and dialogue came with its row.
        assert len({id(unit.run) for unit in claimed}) == 1
        assert {unit.endpoint.name for unit in claimed} <= {"batch-model", "batch-model-2"}
        assert len({id(unit.endpoint) for unit in claimed}) == len(
            {unit.endpoint_id for unit in claimed}
        )
        with CaptureQueriesContext(connection) as queries:
            for unit in claimed:
                (unit.run.primary_judge, unit.endpoint.model_name, unit.trigger.turn.dialogue)
        assert len(queries) == 0
    # SELECT the units, SELECT the runs, UPDATE the pending, SELECT what was won, its runs,
    # its models: the same for 2 units as for 10.
    assert statements == [6, 6]
