"""The in-flight claims on a real Redis that misbehaves (issue #14): a connection lost under the
client, whatever redis-py makes of it, is retried on a fresh connection rather than failing the
batch, and a claim is recognised as ours when it is tried again.

Needs ``REDIS_URL`` (CI's PostgreSQL + Redis half): without it the claims are rows in the
database and there is no Redis client to fail — ``test_batch_faults`` covers that path and, with
an unreachable Redis, the error the task retries for."""

import uuid

import pytest
from django.conf import settings

from benchmark.corpus.importer import corpus_import
from benchmark.evaluation import inflight
from benchmark.evaluation.tasks import run_units
from benchmark.models import EvaluationUnit, RunStatus, UnitState
from tests.benchmark.evaluation.test_batches import _endpoint, _reply, _running_run
from tests.factories import jsonl_bytes, records_for, stream
from tests.fakes.vendor_server import FakeVendorServer

pytestmark = pytest.mark.skipif(
    not settings.REDIS_URL,
    reason="the in-flight claims use Redis only with REDIS_URL set (CI's PostgreSQL + Redis half)",
)


@pytest.fixture
def client():
    inflight._redis.cache_clear()
    client = inflight._redis(settings.REDIS_URL)
    yield client
    client.delete(*client.keys(inflight._PREFIX + "test-*") or ["-"])
    inflight._redis.cache_clear()


def _keys(n: int) -> list[str]:
    return [f"test-{uuid.uuid4().hex}" for _ in range(n)]


def _poison(client) -> int:
    """Close the read buffer of every idle pooled connection, as a handshake that timed out
    leaves it: redis-py then raises ``ValueError: I/O operation on closed file`` on it."""
    client.ping()
    idle = list(client.connection_pool._available_connections)
    for connection in idle:
        connection._parser._buffer._buffer.close()
    return len(idle)


def test_a_connection_closed_under_the_client_does_not_fail_the_claims(client):
    keys = _keys(3)
    assert _poison(client) >= 1
    assert inflight.claim_many(keys, lease_s=30) == set(keys)
    assert _poison(client) >= 1
    inflight.release_many(keys)
    assert not client.exists(*(inflight._PREFIX + key for key in keys))


def test_a_claim_tried_again_after_its_reply_was_lost_is_still_ours(client):
    """The SET may reach Redis and its reply be lost; the retry must not then take our own
    claim for another worker's (the calls would wait for a result nobody is making)."""
    keys = _keys(2)
    token = b"batch-token"
    assert inflight._claim_in_redis(client, keys, token=token, lease_s=30) == [True, True]
    assert inflight._claim_in_redis(client, keys, token=token, lease_s=30) == [True, True]
    assert inflight._claim_in_redis(client, keys, token=b"other", lease_s=30) == [False, False]
    assert inflight.claim_many(keys, lease_s=30) == set()  # held: another caller waits


def test_connections_are_named_so_they_can_be_found(client):
    client.ping()
    names = {c.get("name") for c in client.client_list()}
    assert inflight.CLIENT_NAME in names


@pytest.mark.django_db(transaction=True)
def test_the_incident_a_batch_whose_redis_connection_broke_finishes_its_units(client):
    """Issue #14 end to end: the batch task meets the broken connection in its first
    ``claim_many``. Before, the task "raised unexpected" (``ValueError``) and its units were
    never run; now the claim is retried on a fresh connection and the batch simply finishes."""
    corpus_import(stream=stream(jsonl_bytes(records_for(2))))
    with FakeVendorServer(reply=_reply) as server:
        run, ids = _running_run(_endpoint("batch-model", server), _endpoint("batch-judge", server))
        _poison(client)
        result = run_units.apply(args=[ids])  # eager: as a worker runs it
        assert result.successful(), result.traceback
        paid = [r.request_hash for r in server.requests() if r.outcome == "completed"]
    units = EvaluationUnit.objects.filter(run=run)
    assert set(units.values_list("state", flat=True)) == {UnitState.DONE}
    assert set(units.values_list("attempts", flat=True)) == {1}  # no retry of the task needed
    assert len(paid) == len(set(paid)) == 2 * len(ids)  # a reply and a judgment each, once
    run.refresh_from_db()
    assert run.status == RunStatus.DONE
