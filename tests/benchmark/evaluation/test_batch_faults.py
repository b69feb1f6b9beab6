"""A batch whose infrastructure fails under it: the database connection drops mid-round, Redis
is unreachable. What was paid for is recorded, the units are handed back at once (not after their
lease), and the Celery task retries itself so the units finish without a resume. Real SDKs
against the local fake vendor server; the database error is injected at the driver boundary
(``connection.execute_wrapper``), so it works on SQLite as on PostgreSQL (where the fault
campaign test terminates real backends)."""

import socket
from collections import Counter

import pytest
from django.db import OperationalError, connection

from benchmark.corpus.importer import corpus_import
from benchmark.evaluation import engine, inflight
from benchmark.evaluation.engine import units_execute
from benchmark.evaluation.tasks import TRANSIENT_ERRORS, retry_countdown, run_units
from benchmark.models import (
    CallInFlight,
    EvaluationUnit,
    Judgment,
    ModelPrice,
    ProviderCall,
    ResponseCacheEntry,
    UnitState,
)
from tests.benchmark.evaluation.test_batches import _endpoint, _in_thread, _reply, _running_run
from tests.factories import jsonl_bytes, records_for, stream
from tests.fakes.vendor_server import FakeVendorServer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server():
    with FakeVendorServer(reply=_reply) as fake:
        yield fake


@pytest.fixture
def endpoints(server):
    corpus_import(stream=stream(jsonl_bytes(records_for(2))))  # 2 dialogues × 3 triggers
    return _endpoint("batch-model", server), _endpoint("batch-judge", server)


class DropOnce:
    """Fail the first INSERT into the response cache as a terminated backend would."""

    def __init__(self) -> None:
        self.dropped = 0

    def __call__(self, execute, sql, params, many, context):
        if (
            not self.dropped
            and sql.lstrip().upper().startswith("INSERT")
            and "responsecacheentry" in sql
        ):
            self.dropped += 1
            raise OperationalError("terminating connection due to administrator command")
        return execute(sql, params, many, context)


def _paid(server) -> list:
    return [r for r in server.requests() if r.status == 200 and r.outcome == "completed"]


def _no_completed_request_sent_twice(server) -> None:
    paid = Counter(r.request_hash for r in _paid(server))
    assert paid and max(paid.values()) == 1, "a request that had completed was sent again"


def test_a_dropped_connection_mid_round_still_records_what_that_round_paid_for(endpoints, server):
    model, judge = endpoints
    run, ids = _running_run(model, judge)
    drop = DropOnce()
    with connection.execute_wrapper(drop), pytest.raises(OperationalError):
        units_execute(unit_ids=ids)
    assert drop.dropped == 1

    paid = _paid(server)
    assert paid, "the failure came before any call"
    # The round being written when the connection dropped is recorded all the same: cached
    # (never paid again) and a call record with its cost (the run's cost stays the sum).
    assert ResponseCacheEntry.objects.count() == len(paid)
    recorded = ProviderCall.objects.filter(run=run, ok=True).values_list("request_id", flat=True)
    assert sorted(recorded) == sorted(f"req_{r.seq}" for r in paid)
    # Handed back at once: a retry claims them now, not after the run's 15-minute lease.
    units = EvaluationUnit.objects.filter(run=run)
    assert set(units.values_list("state", flat=True)) == {UnitState.PENDING}
    assert not CallInFlight.objects.exists()

    assert set(units_execute(unit_ids=ids).values()) == {UnitState.DONE}
    _no_completed_request_sent_twice(server)
    assert Judgment.objects.filter(unit__run=run, state="done").count() == len(ids)


class Outage:
    """From the first INSERT into the response cache on, the next ``statements`` statements
    fail too, whatever they are: the database is away for a moment, not just one query."""

    def __init__(self, statements: int) -> None:
        self.left = None
        self.statements = statements

    def __call__(self, execute, sql, params, many, context):
        starts = sql.lstrip().upper().startswith("INSERT") and "responsecacheentry" in sql
        if self.left is None and starts:
            self.left = self.statements
            engine._prices.clear()  # a price cached before the outage expires during it
        if self.left:
            self.left -= 1
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)


def test_a_batch_outlasts_a_short_database_outage_and_still_records_its_costs(endpoints, server):
    """The batch's salvage needs the database itself (the calls' prices, their rows, the hand
    back): it waits for the database to come back rather than giving up at the first error."""
    model, judge = endpoints
    ModelPrice.objects.create(
        model_name=model.model_name, input_usd_per_mtok=1, output_usd_per_mtok=2
    )
    run, ids = _running_run(model, judge)
    with connection.execute_wrapper(Outage(statements=3)), pytest.raises(OperationalError):
        units_execute(unit_ids=ids)
    paid = _paid(server)
    recorded = ProviderCall.objects.filter(run=run, ok=True)
    assert recorded.count() == len(paid) and all(c.cost_usd > 0 for c in recorded)
    assert set(EvaluationUnit.objects.filter(run=run).values_list("state", flat=True)) == {
        UnitState.PENDING
    }


def test_the_task_retries_a_batch_after_a_database_error_and_finishes_it(endpoints, server):
    model, judge = endpoints
    run, ids = _running_run(model, judge)
    drop = DropOnce()
    with connection.execute_wrapper(drop):
        result = run_units.apply(args=[ids])  # eager: a retry runs at once, in this thread
    assert drop.dropped == 1
    assert result.successful(), result.traceback
    units = EvaluationUnit.objects.filter(run=run)
    assert set(units.values_list("state", flat=True)) == {UnitState.DONE}
    assert set(units.values_list("attempts", flat=True)) == {2}  # claimed, handed back, again
    _no_completed_request_sent_twice(server)
    run.refresh_from_db()
    assert run.status == "done"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_units_are_handed_back_even_when_redis_goes_away_mid_batch(endpoints, server, settings):
    """Redis (where the in-flight claims live when it is configured) becoming unreachable while
    calls are in flight must neither lose what they paid for nor leave the batch's units
    "running" until their lease expires. The failure surfaces as ``InflightUnavailable``, one
    of the errors the task retries for."""
    model, judge = endpoints
    run, ids = _running_run(model, judge)
    server.close_gate()
    thread, outcome = _in_thread(ids)
    server.wait_for(lambda log: sum(r.outcome == "pending" for r in log) == len(ids))
    settings.REDIS_URL = f"redis://127.0.0.1:{_closed_port()}/0"  # every worker sees it
    inflight._redis.cache_clear()
    try:
        server.open_gate()
        thread.join(60)
    finally:
        inflight._redis.cache_clear()
    assert isinstance(outcome.get("error"), inflight.InflightUnavailable), outcome
    assert isinstance(outcome["error"], TRANSIENT_ERRORS)
    paid = _paid(server)
    assert len(paid) == len(ids)
    assert ResponseCacheEntry.objects.count() == len(paid)  # none will be paid for again
    units = EvaluationUnit.objects.filter(run=run)
    assert set(units.values_list("state", flat=True)) == {UnitState.PENDING}
    assert set(units.values_list("claim_token", flat=True)) == {""}


def test_retry_backoff_is_jittered_and_capped():
    assert all(0 <= retry_countdown(0) <= 1 for _ in range(50))
    assert all(0 <= retry_countdown(20) <= 60 for _ in range(50))
    assert len({round(retry_countdown(5), 6) for _ in range(20)}) > 1
