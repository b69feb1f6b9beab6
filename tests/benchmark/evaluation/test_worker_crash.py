"""A real Celery worker on the configured broker (Redis in CI), killed with SIGKILL mid-run.

The fake vendor server answers a scripted number of calls at once and holds the next ones for
15 s, and the worker is killed while they are held, so the calls in flight at that moment are
never completed; another worker then resumes the run. Afterwards every
unit has exactly one result (every pairwise comparison one verdict per order), and no request that
had completed once was ever sent again.
"""

import os
import signal
import subprocess
import time
import uuid
from collections import Counter

import pytest
from django.conf import settings
from django.db import connection

from benchmark.corpus.importer import corpus_import
from benchmark.evaluation import pairwise, runs
from benchmark.models import (
    AuditVia,
    Dialogue,
    EvaluationRun,
    EvaluationUnit,
    FailureModeClassification,
    JudgeDisagreement,
    Judgment,
    ModelEndpoint,
    PairwiseJudgment,
    ProviderCall,
    ResponseCacheEntry,
    RunStatus,
    UnitState,
)
from core.processes import celery_worker_argv
from proactweb.celery import app as celery_app
from tests.factories import jsonl_bytes, records_for, stream
from tests.fakes.vendor_server import FakeVendorServer, Fault

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BATCH = 2
REPLY = "Sure. Pack the projector stand last so it comes out first at the venue."


def _reply(body):
    if body["model"] == "crash-judge":
        return (
            '{"verdict": "PASS", "rationale": "Grounded.", '
            '"evidence": "Pack the projector stand last"}'
        )
    return REPLY


def _database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _start_worker(queue: str, **env: str) -> subprocess.Popen:
    """A worker on ``queue`` alone, on this test's database, with ``env`` added to its
    environment (settings it reads at start-up)."""
    return subprocess.Popen(
        [
            *celery_worker_argv(),
            "--pool=threads",
            "--concurrency=4",
            "-Q",
            queue,
            "-n",
            f"{queue}-{uuid.uuid4().hex[:4]}@%h",
            "--without-gossip",
            "--without-mingle",
            "--loglevel=WARNING",
        ],
        cwd=settings.BASE_DIR,
        # Small batches, so that the run is several tasks and the kill lands between them.
        env={
            **os.environ,
            "DATABASE_URL": _database_url(),
            "EVAL_BATCH_SIZE": str(BATCH),
            **env,
        },
    )


def _wait(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _held(server: FakeVendorServer, *, completed: int, pending: int = 1, since: int = 0) -> None:
    """Wait until, of the calls the server received after the first ``since``, ``completed``
    have been answered and ``pending`` are being held (scripted slow answers)."""
    server.wait_for(
        lambda log: (
            sum(r.outcome == "completed" for r in log[since:]) >= completed
            and sum(r.outcome == "pending" for r in log[since:]) >= pending
        ),
        timeout_s=60,
    )


def _kill_mid_call(server: FakeVendorServer, worker: subprocess.Popen) -> None:
    """SIGKILL the worker while calls are held, once every response the server sent has
    reached the cache (a response still on its way in when the process dies is the one
    unavoidable window: docs/pipeline.md)."""
    completed = sum(r.outcome == "completed" for r in server.requests())
    cached = ResponseCacheEntry.objects.all()
    _wait(lambda: cached.count() >= completed, 10, "completed calls to be cached")
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)


def _resume(queue: str, run: EvaluationRun, workers: list[subprocess.Popen], what: str) -> None:
    """Resume the run on a new worker once the dead one's claims have expired
    (lease_seconds=1), and wait for it to end."""
    time.sleep(1.2)
    workers.append(_start_worker(queue))
    runs.run_resume(run_id=run.pk)
    run_row = EvaluationRun.objects.filter(pk=run.pk)
    _wait(lambda: run_row.get().status == RunStatus.DONE, 90, what)


def _stop(workers: list[subprocess.Popen]) -> None:
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()


def _assert_nothing_sent_again_after_completing(log) -> None:
    completed: set[str] = set()
    for entry in log:
        assert entry.request_hash not in completed, (
            f"request {entry.request_hash[:12]} was sent again after it had completed"
        )
        if entry.outcome == "completed":
            completed.add(entry.request_hash)


@pytest.fixture
def queue():
    name = f"crash-{uuid.uuid4().hex[:8]}"
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = name
    yield name
    celery_app.conf.task_default_queue = previous


def test_killed_worker_then_resume_gives_one_result_per_unit_and_no_repeated_call(queue, settings):
    settings.EVAL_BATCH_SIZE = BATCH
    corpus_import(stream=stream(jsonl_bytes(records_for(4))))
    with FakeVendorServer(reply=_reply, latency_s=0.05) as server:
        model, judge = (
            ModelEndpoint.objects.create(
                name=name,
                display_name=name,
                provider="openai-compatible",
                model_name=name,
                base_url=server.openai_base_url,
            )
            for name in ("crash-model", "crash-judge")
        )
        run = runs.run_create(
            name="crash",
            endpoints=[model],
            judges=[judge],
            dialogues=Dialogue.objects.all(),
            conditions=["vanilla", "rubric_injected"],
        )
        EvaluationRun.objects.filter(pk=run.pk).update(lease_seconds=1)
        total = 4 * 3 * 2
        # The first 16 calls (of 48: a reply and a verdict per unit) are answered at once, the
        # next 8 only after 15 s: the kill lands while those are held, whatever the machine's
        # pace. (Closing a gate once 6 units were done raced the worker, as in the re-judge
        # test below.)
        server.script(*[Fault.slow(0.0)] * 16, *[Fault.slow(15.0)] * 8)
        workers = [_start_worker(queue)]
        try:
            runs.run_launch(run_id=run.pk)
            done = EvaluationUnit.objects.filter(run=run, state=UnitState.DONE)
            _held(server, completed=16, pending=2)
            _kill_mid_call(server, workers[0])
            assert done.count() < total, "the kill came too late to test anything"
            _resume(queue, run, workers, "the resumed run to finish")
        finally:
            _stop(workers)
        log = server.requests()

    units = EvaluationUnit.objects.filter(run=run)
    assert units.count() == total
    assert set(units.values_list("state", flat=True)) == {UnitState.DONE}
    assert Judgment.objects.filter(unit__run=run).count() == total  # one per unit and judge
    paid = Counter(
        ProviderCall.objects.filter(run=run, ok=True).values_list("cache_key", flat=True)
    )
    assert paid and max(paid.values()) == 1  # nothing paid for twice
    assert any(r.outcome == "aborted" for r in log)  # the kill really interrupted calls
    _assert_nothing_sent_again_after_completing(log)


def _rejudge_reply(body):
    """The run's own judge fails every reply; the added one passes them all."""
    if body["model"] == "crash-judge":
        return (
            '{"verdict": "FAIL", "rationale": "Generic.", '
            '"evidence": "Pack the projector stand last"}'
        )
    if body["model"] == "crash-judge-2":
        return _reply({"model": "crash-judge"})
    if body["model"] == "crash-classifier":
        return (
            '{"failure_mode": "ungrounded_suggestion", "rationale": "Not from the talk.", '
            '"quote": "Pack the projector stand last"}'
        )
    return _reply(body)


def test_rejudge_on_a_real_worker_killed_mid_way_then_resumed_asks_each_answer_once(
    queue, settings
):
    settings.EVAL_BATCH_SIZE = BATCH
    corpus_import(stream=stream(jsonl_bytes(records_for(4))))
    with FakeVendorServer(reply=_rejudge_reply, latency_s=0.05) as server:
        model, judge, judge_2, classifier = (
            ModelEndpoint.objects.create(
                name=name,
                display_name=name,
                provider="openai-compatible",
                model_name=name,
                base_url=server.openai_base_url,
            )
            for name in ("crash-model", "crash-judge", "crash-judge-2", "crash-classifier")
        )
        run = runs.run_create(
            name="rejudge", endpoints=[model], judges=[judge], dialogues=Dialogue.objects.all()
        )
        EvaluationRun.objects.filter(pk=run.pk).update(lease_seconds=1)
        total = 4 * 3
        run_row = EvaluationRun.objects.filter(pk=run.pk)
        workers = [_start_worker(queue)]
        try:
            runs.run_launch(run_id=run.pk)
            _wait(lambda: run_row.get().status == RunStatus.DONE, 90, "the run to finish")
            replies_paid = ProviderCall.objects.filter(run=run, purpose="reply").count()
            # The re-judge's first 4 calls (of 16: 12 verdicts, 4 labels) are answered at once,
            # the rest only after 15 s: the kill lands while they are held, whatever the
            # machine's pace. (Closing a gate once 3 verdicts were in raced the worker, which
            # could finish every call first and leave nothing to interrupt.)
            server.script(*[Fault.slow(0.0)] * 4, *[Fault.slow(15.0)] * 12)
            before = len(server.requests())
            runs.run_rejudge(
                run_id=run.pk, judges=[judge_2], classifier=classifier, via=AuditVia.COMMAND
            )
            new = Judgment.objects.filter(unit__run=run, judge_name="crash-judge-2")
            _held(server, completed=4, since=before)
            _kill_mid_call(server, workers[0])
            assert new.count() < total, "the kill came too late to test anything"
            _resume(queue, run, workers, "the re-judge to finish")
        finally:
            _stop(workers)

    assert ProviderCall.objects.filter(run=run, purpose="reply").count() == replies_paid == total
    assert new.count() == total and set(new.values_list("verdict", flat=True)) == {"PASS"}
    assert Judgment.objects.filter(unit__run=run).count() == 2 * total
    # The primary judge (crash-judge) failed every reply: the 4 RECOVERY ones are labelled.
    labels = FailureModeClassification.objects.filter(unit__run=run)
    assert labels.count() == 4
    assert set(labels.values_list("unit__trigger__type", "failure_mode", "quote_status")) == {
        ("RECOVERY", "ungrounded_suggestion", "exact")
    }
    assert JudgeDisagreement.objects.filter(unit__run=run).count() == total
    paid = Counter(
        ProviderCall.objects.filter(run=run, ok=True).values_list("cache_key", flat=True)
    )
    assert max(paid.values()) == 1  # nothing paid for twice


def _pairwise_reply(body):
    """The second model answers otherwise; the pairwise judge prefers whatever it sees first."""
    if body["model"] == "crash-pairwise":
        return '{"choice": "1", "rationale": "The first one is more concrete."}'
    if body["model"] == "crash-model-2":
        return "Have a great event!"
    return _reply(body)


def test_pairwise_judging_on_a_real_worker_killed_mid_way_then_resumed_asks_each_order_once(
    queue, settings
):
    settings.EVAL_BATCH_SIZE = BATCH
    corpus_import(stream=stream(jsonl_bytes(records_for(4))))
    with FakeVendorServer(reply=_pairwise_reply, latency_s=0.05) as server:
        model, model_2, judge, pairwise_judge = (
            ModelEndpoint.objects.create(
                name=name,
                display_name=name,
                provider="openai-compatible",
                model_name=name,
                base_url=server.openai_base_url,
            )
            for name in ("crash-model", "crash-model-2", "crash-judge", "crash-pairwise")
        )
        run = runs.run_create(
            name="pairwise",
            endpoints=[model, model_2],
            judges=[judge],
            dialogues=Dialogue.objects.all(),
        )
        EvaluationRun.objects.filter(pk=run.pk).update(lease_seconds=1)
        comparisons = 4 * 3  # one pair of models at each of the 12 triggers
        run_row = EvaluationRun.objects.filter(pk=run.pk)
        workers = [_start_worker(queue)]
        try:
            runs.run_launch(run_id=run.pk)
            _wait(lambda: run_row.get().status == RunStatus.DONE, 90, "the run to finish")
            paid_before = Counter(
                ProviderCall.objects.filter(run=run).values_list("purpose", flat=True)
            )
            # The first 6 pairwise calls are answered at once, the next ones only after 15 s:
            # the kill lands while they are held, whatever the machine's pace.
            server.script(*[Fault.slow(0.0)] * 6, *[Fault.slow(15.0)] * 18)
            outcome = pairwise.run_pairwise_judge(
                run_id=run.pk, judges=[pairwise_judge], via=AuditVia.COMMAND
            )
            assert outcome.created == comparisons
            verdicts = PairwiseJudgment.objects.filter(comparison__run=run)
            _wait(lambda: verdicts.count() >= 4, 60, "some pairwise verdicts")
            _held(server, completed=0)
            _kill_mid_call(server, workers[0])
            assert verdicts.count() < 2 * comparisons, "the kill came too late to test anything"
            _resume(queue, run, workers, "the pairwise step to end")
        finally:
            _stop(workers)
        log = server.requests()

    # One verdict per comparison and order, each mapped back from "1" to the side shown first.
    assert verdicts.count() == 2 * comparisons
    assert set(verdicts.values_list("order", "winner", "state")) == {
        ("ab", "model_a", "done"),
        ("ba", "model_b", "done"),
    }
    paid = Counter(ProviderCall.objects.filter(run=run).values_list("purpose", flat=True))
    assert paid == {**paid_before, "pairwise": 2 * comparisons}  # no reply, no verdict again
    by_key = Counter(
        ProviderCall.objects.filter(run=run, ok=True).values_list("cache_key", flat=True)
    )
    assert max(by_key.values()) == 1  # nothing paid for twice
    assert any(r.outcome == "aborted" for r in log)  # the kill really interrupted calls
    _assert_nothing_sent_again_after_completing(log)
