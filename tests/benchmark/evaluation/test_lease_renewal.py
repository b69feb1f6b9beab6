"""A call slower than its run's lease (a reasoning model answering in seconds) on a real Celery
worker: the batch renews its units' lease and its calls' in-flight claims while the calls are
out, so the sweep, run all along as beat would, never takes the units for a dead worker's and
re-dispatches them, and no request is sent twice. Runs on both halves of CI, as the crash test.
"""

import socket
import subprocess
import time
from collections import Counter

import pytest

from benchmark.corpus.importer import corpus_import
from benchmark.evaluation import runs
from benchmark.models import (
    Dialogue,
    EvaluationRun,
    EvaluationUnit,
    ModelEndpoint,
    ProviderCall,
    RunStatus,
    UnitState,
)
from proactweb.celery import app as celery_app
from tests.benchmark.evaluation.test_worker_crash import _reply, _start_worker
from tests.benchmark.evaluation.test_worker_crash import queue as queue  # the fixture
from tests.factories import jsonl_bytes, records_for, stream
from tests.fakes.vendor_server import FakeVendorServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LEASE_S = 2
CALL_S = 5.0
"""Each call takes two and a half leases: without renewal the sweep would re-dispatch every
unit while its first call is still out."""


def test_a_call_slower_than_the_lease_is_not_swept_while_in_flight(queue, settings):
    settings.EVAL_BATCH_SIZE = 2
    corpus_import(stream=stream(jsonl_bytes(records_for(2))))  # 2 dialogues × 3 triggers
    with FakeVendorServer(reply=_reply, latency_s=CALL_S) as server:
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
            name="slow calls", endpoints=[model], judges=[judge], dialogues=Dialogue.objects.all()
        )
        EvaluationRun.objects.filter(pk=run.pk).update(lease_seconds=LEASE_S)
        worker = _start_worker(queue)
        worker_name = next(arg for arg in worker.args if arg.startswith(f"{queue}-")).replace(
            "%h", socket.gethostname()
        )
        swept = sweeps = 0
        try:
            # Started and listening first: units queued longer than the lease before any worker
            # claims them are (rightly) dispatched again by the sweep, which is not this test.
            deadline = time.monotonic() + 60
            while not celery_app.control.ping(destination=[worker_name], timeout=1.0):
                assert time.monotonic() < deadline, "the worker did not start"
            runs.run_launch(run_id=run.pk)
            deadline = time.monotonic() + 120
            run_row = EvaluationRun.objects.filter(pk=run.pk)
            while run_row.get().status != RunStatus.DONE:
                assert time.monotonic() < deadline, "the run did not finish"
                if any(r.outcome == "pending" for r in server.requests()):
                    # A call is out: this sweep sees units whose claims are older than the
                    # lease unless their batch renewed them.
                    sweeps += 1
                swept += runs.runs_sweep().redispatched
                time.sleep(0.5)
        finally:
            worker.terminate()
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
        log = server.requests()

    assert sweeps >= 4, "the sweep did not run while calls were in flight"
    assert swept == 0, f"the sweep re-dispatched {swept} units whose calls were in flight"
    units = EvaluationUnit.objects.filter(run=run)
    assert set(units.values_list("state", "attempts")) == {(UnitState.DONE, 1)}
    sent = Counter(entry.request_hash for entry in log)
    assert len(sent) == 12 and max(sent.values()) == 1, "a request was sent twice"
    assert ProviderCall.objects.filter(run=run, ok=True).count() == 12
