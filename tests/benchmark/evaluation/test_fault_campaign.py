"""The fault campaign in a reduced form (bench/fault_campaign.py is the full one): ~100 units on
a real Celery worker and the configured broker and database, against two fake vendor servers
(OpenAI wire format for the model, Anthropic for the judge) injecting 429s with Retry-After,
500s, timeouts, malformed judge outputs and evidence quotes absent from the reply. Mid-run a
worker is killed with SIGKILL and, on PostgreSQL, every backend of the test database is
terminated; the run is resumed until it finishes. Then nothing is lost or doubled, no completed
call is made again (outside the window documented in tests/fault_campaign.py), and the run's
cost is the sum of its calls.

Two variants are never resumed: the run must finish on its own, through the tasks' retries and
the sweep of the worker's embedded beat (issue #14) — after a worker killed mid-batch (both
halves of CI), and while the in-flight claims' Redis connections are killed mid-batch
(``CLIENT KILL ID``, only this test's named connections) and Redis is paused for 1.5 s
(``DEBUG SLEEP``, or ``CLIENT PAUSE`` where the server forbids DEBUG; PostgreSQL + Redis only)."""

import functools
import os

import pytest
from django.conf import settings
from django.db import connection

from benchmark.corpus.importer import corpus_import
from benchmark.evaluation import inflight, runs
from benchmark.models import Dialogue, EvaluationRun, ModelEndpoint, ModelPrice
from proactweb.celery import app as celery_app
from tests import fault_campaign as campaign
from tests.benchmark.evaluation.test_worker_crash import _database_url
from tests.factories import jsonl_bytes, records_for, stream
from tests.fakes.vendor_server import FakeVendorServer, FaultRates, bench_reply

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

KEY_ENV = "FAULT_TEST_ANTHROPIC_API_KEY"
RATES = dict(
    rate_429=0.20,
    rate_500=0.05,
    rate_timeout=0.02,
    timeout_delay_s=3.0,
    retry_after_s=0.2,
    rate_malformed_judge=0.05,
    rate_absent_evidence=0.02,
)


@pytest.fixture
def queue():
    name = f"faults-{os.getpid()}"
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = name
    yield name
    celery_app.conf.task_default_queue = previous


def _endpoint(name, provider, base_url, **extra):
    endpoint = ModelEndpoint.objects.create(
        name=name,
        display_name=name,
        provider=provider,
        model_name=name,
        base_url=base_url,
        default_params={"max_tokens": 200, "timeout_s": 1},
        **extra,
    )
    ModelPrice.objects.create(model_name=name, input_usd_per_mtok=3, output_usd_per_mtok=15)
    return endpoint


@pytest.mark.parametrize(
    "faults",
    [
        pytest.param(["kill"], id="worker-killed"),
        pytest.param(["kill", "terminate-backends"], id="worker-killed-and-backends-terminated"),
        pytest.param(["kill", "no-resume"], id="worker-killed-then-swept-without-resume"),
        pytest.param(
            ["redis-kill", "redis-pause", "no-resume"],
            id="redis-connections-killed-and-redis-paused-without-resume",
        ),
    ],
)
def test_reduced_fault_campaign_loses_and_repeats_nothing(queue, faults, monkeypatch):
    if "terminate-backends" in faults and connection.vendor != "postgresql":
        pytest.skip(
            "terminating database backends needs PostgreSQL (DATABASE_URL); SQLite has no "
            "server to drop connections — CI runs this on PostgreSQL"
        )
    if "redis-kill" in faults and not settings.REDIS_URL:
        pytest.skip(
            "without REDIS_URL no Redis is in use (claims in the database, filesystem broker), "
            "so there is no connection to kill — CI runs this on PostgreSQL + Redis"
        )
    monkeypatch.setenv(KEY_ENV, "sk-ant-fault-campaign-test-key")
    corpus_import(stream=stream(jsonl_bytes(records_for(17))))  # 51 triggers
    with (
        FakeVendorServer(reply=bench_reply, fault_rates=FaultRates(**RATES, seed=1)) as models,
        FakeVendorServer(reply=bench_reply, fault_rates=FaultRates(**RATES, seed=2)) as judges,
    ):
        under_test = [
            _endpoint(f"fault-model-{i}", "openai-compatible", models.openai_base_url)
            for i in range(2)
        ]
        judge = _endpoint(
            "fault-judge", "anthropic", judges.anthropic_base_url, api_key_env=KEY_ENV
        )
        run = runs.run_create(
            name="reduced fault campaign",
            endpoints=under_test,
            judges=[judge],
            dialogues=Dialogue.objects.all(),
        )
        # A short lease, so that resuming takes over the killed worker's units within seconds.
        EvaluationRun.objects.filter(pk=run.pk).update(lease_seconds=8)
        workers = campaign.Workers(
            count=1,
            threads=2,
            queue=queue,
            env=campaign.campaign_env(
                DATABASE_URL=_database_url(), EVAL_BATCH_SIZE="4", EVAL_SWEEP_INTERVAL_S="1"
            ),
            beat=True,
        ).start()
        plan = []
        if "kill" in faults:
            plan.append(campaign.Fault(0.3, "kill -9 a worker", workers.kill_one))
        if "redis-kill" in faults:
            kill = functools.partial(
                campaign.kill_redis_connections, settings.REDIS_URL, (inflight.CLIENT_NAME,)
            )
            plan.append(campaign.Fault(0.2, "kill the claims' Redis connections", kill))
            plan.append(campaign.Fault(0.5, "kill the claims' Redis connections", kill))
        if "redis-pause" in faults:
            pause = functools.partial(campaign.pause_redis, settings.REDIS_URL, 1.5)
            plan.append(campaign.Fault(0.35, "pause Redis", pause))
        if "terminate-backends" in faults:
            settings_dict = dict(connection.settings_dict)
            plan.append(
                campaign.Fault(
                    0.6,
                    "terminate the database's backends",
                    lambda: campaign.terminate_backends(settings_dict),
                )
            )
        try:
            runs.run_launch(run_id=run.pk)
            drive = campaign.drive(
                run.pk,
                plan,
                stall_s=10,
                timeout_s=150,
                resume="no-resume" not in faults,
                say=print,
            )
        finally:
            workers.stop()
        report = campaign.verify(
            run.pk,
            [
                (campaign.log_rows(models), {e.pk for e in under_test}),
                (campaign.log_rows(judges), {judge.pk}),
            ],
        )
    print(report.result_line(resumes=drive.resumes))
    assert len(drive.events) >= len(plan) + 1, drive.events  # every fault fired
    if "no-resume" in faults:
        assert drive.resumes == 0
    assert report.units == 102
    assert report.done + report.errored == report.units and report.lost == 0
    assert report.errored_without_reason == 0
    assert report.duplicates == 0 and report.paid_twice == 0
    assert report.repeated_calls == 0, "a call whose response had been recorded was made again"
    assert report.recorded_unpaid == 0
    assert report.cost_ok and report.cost_usd > 0, report.table()
    # The faults really happened, and were survived rather than recorded as errors.
    assert {"429", "500", "malformed_judge"} <= set(report.server_faults), report.server_faults
    assert report.done >= report.units * 0.9, report.error_reasons
