"""The sweep (``runs.runs_sweep``, run by Celery beat): units that nothing would run any more — a
batch that died of a bug, a worker killed mid-batch, a queued message lost — are dispatched again
once their lease lapses, so the run finishes without a resume; units whose lease is live are left
alone. Runs on both halves of CI (SQLite + filesystem broker, PostgreSQL + Redis): the sweep is
plain database work. Celery is eager here, so a re-dispatched batch runs inside the sweep."""

from collections import Counter
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from benchmark.corpus.importer import corpus_import
from benchmark.evaluation import engine, runs
from benchmark.evaluation.engine import units_claim
from benchmark.evaluation.tasks import run_units
from benchmark.models import (
    EvaluationRun,
    EvaluationUnit,
    Judgment,
    ProviderCall,
    RunStatus,
    UnitState,
)
from tests.benchmark.evaluation.test_batches import _endpoint, _reply, _running_run
from tests.factories import jsonl_bytes, records_for, stream
from tests.fakes.vendor_server import FakeVendorServer

pytestmark = pytest.mark.django_db(transaction=True)

LEASE_S = 60


@pytest.fixture(autouse=True)
def _eager():
    from proactweb.celery import app as celery_app

    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


@pytest.fixture
def server():
    with FakeVendorServer(reply=_reply) as fake:
        yield fake


@pytest.fixture
def run_and_ids(server):
    corpus_import(stream=stream(jsonl_bytes(records_for(2))))  # 2 dialogues × 3 triggers
    model, judge = _endpoint("batch-model", server), _endpoint("batch-judge", server)
    run, ids = _running_run(model, judge)
    EvaluationRun.objects.filter(pk=run.pk).update(lease_seconds=LEASE_S)
    return run, ids


def _after_lease(seconds: float = 1) -> datetime:
    return timezone.now() + timedelta(seconds=LEASE_S + seconds)


def _states(run) -> set[str]:
    return set(EvaluationUnit.objects.filter(run=run).values_list("state", flat=True))


def _nothing_paid_twice(run, server) -> None:
    paid = Counter(
        ProviderCall.objects.filter(run=run, ok=True).values_list("cache_key", flat=True)
    )
    assert paid and max(paid.values()) == 1, "a call was paid for twice"
    completed = Counter(r.request_hash for r in server.requests() if r.outcome == "completed")
    assert max(completed.values()) == 1, "a request that had completed was sent again"


def test_a_batch_that_dies_of_a_bug_is_swept_once_its_lease_lapses_and_the_run_finishes(
    run_and_ids, server, monkeypatch
):
    """Issue #14: a batch task that "raised unexpected" handed its units back to pending and
    nothing ever queued them again; the run stayed running for good."""
    run, ids = run_and_ids

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in judging")

    monkeypatch.setattr(engine, "parse_judge_output", broken)  # a fault only a bug can cause
    result = run_units.apply(args=[ids])  # eager: the task fails as a worker's would
    assert result.failed() and isinstance(result.result, RuntimeError)
    monkeypatch.undo()
    assert _states(run) == {UnitState.PENDING}

    # Within the lease: a retry of the task might still come, so the sweep leaves them.
    assert runs.runs_sweep().redispatched == 0
    assert _states(run) == {UnitState.PENDING}

    swept = runs.runs_sweep(now=_after_lease())
    assert swept.redispatched == len(ids)
    assert _states(run) == {UnitState.DONE}
    run.refresh_from_db()
    assert run.status == RunStatus.DONE
    assert Judgment.objects.filter(unit__run=run, state="done").count() == len(ids)
    _nothing_paid_twice(run, server)


def test_units_of_a_dead_worker_are_swept_and_live_ones_are_not(run_and_ids, server):
    run, ids = run_and_ids
    dead, live = ids[:3], ids[3:]
    units_claim(dead)
    EvaluationUnit.objects.filter(pk__in=dead).update(
        claimed_at=timezone.now() - timedelta(seconds=LEASE_S + 5)
    )
    _, live_token = units_claim(live)  # a batch still running, within its lease

    swept = runs.runs_sweep()
    assert swept.redispatched == 3
    units = EvaluationUnit.objects.filter(run=run)
    assert set(units.filter(pk__in=dead).values_list("state", flat=True)) == {UnitState.DONE}
    still = units.filter(pk__in=live)
    assert set(still.values_list("state", "claim_token")) == {(UnitState.RUNNING, live_token)}
    assert set(still.values_list("attempts", flat=True)) == {1}  # not dispatched twice
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING


def test_two_sweeps_at_once_dispatch_a_lapsed_unit_once(run_and_ids, monkeypatch):
    run, ids = run_and_ids
    units_claim(ids)
    sent: list[list[int]] = []
    monkeypatch.setattr(runs, "_enqueue", sent.append)  # what each sweep queues, not run
    now = _after_lease()
    first = runs.runs_sweep(now=now)
    second = runs.runs_sweep(now=now)
    assert (first.redispatched, second.redispatched) == (len(ids), 0)
    assert sent == [ids]


def test_a_quiet_runs_pending_units_are_dispatched_again(run_and_ids, server):
    """Pending units whose queued message was lost (prefetched by a worker that was killed):
    once nothing in the run has moved for a lease, the sweep queues them again — and not
    before, since they may simply be waiting their turn in the queue."""
    run, ids = run_and_ids
    units_claim(ids[:1])  # one unit claimed just now: the run is not quiet
    assert runs.runs_sweep().redispatched == 0
    assert runs.runs_sweep(now=_after_lease()).redispatched == len(ids)
    assert _states(run) == {UnitState.DONE}
    run.refresh_from_db()
    assert run.status == RunStatus.DONE
    _nothing_paid_twice(run, server)


def test_a_unit_whose_every_batch_died_is_given_up_and_the_run_closes(run_and_ids):
    run, ids = run_and_ids
    EvaluationUnit.objects.filter(pk__in=ids[:1]).update(attempts=runs.UNIT_MAX_CLAIMS - 1)
    EvaluationUnit.objects.filter(pk__in=ids[1:]).update(state=UnitState.DONE)
    units_claim(ids[:1])  # its last claim, and its worker dies too
    swept = runs.runs_sweep(now=_after_lease())
    assert (swept.redispatched, swept.given_up) == (0, 1)
    unit = EvaluationUnit.objects.get(pk=ids[0])
    assert unit.state == UnitState.ERROR and "given up after" in unit.error
    run.refresh_from_db()
    assert run.status == RunStatus.DONE


def test_a_cancelling_run_whose_worker_died_reaches_cancelled(run_and_ids):
    run, ids = run_and_ids
    units_claim(ids)
    EvaluationRun.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLING)
    runs.runs_sweep(now=_after_lease())
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert _states(run) == {UnitState.PENDING}  # not run: a resume picks them up
