"""Celery tasks of the benchmark app: thin wrappers that take ids and call one service.

Delivery is at least once (acks_late, reject_on_worker_lost): the services are idempotent, so a
task redelivered after a worker died only finishes what was left.
"""

import random

import redis
from celery import shared_task
from django.db import InterfaceError, OperationalError, connection

from benchmark.evaluation import engine, runs

TRANSIENT_ERRORS = (
    OperationalError,  # the database restarted, its backend was terminated, SQLite was busy
    InterfaceError,  # a connection already closed under us
    redis.ConnectionError,  # Redis (in-flight claims, rate limits) restarting
    redis.TimeoutError,
)
"""Infrastructure errors a batch is retried for. Anything else is a bug and fails the task."""
RUN_UNITS_MAX_RETRIES = 8
RETRY_BACKOFF_MAX_S = 60.0


def retry_countdown(retries: int) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(cap, 2 ** retries)] seconds."""
    return random.uniform(0, min(RETRY_BACKOFF_MAX_S, 2.0**retries))


@shared_task(
    bind=True,
    name="benchmark.run_units",
    acks_late=True,
    ignore_result=True,
    max_retries=RUN_UNITS_MAX_RETRIES,
)
def run_units(self, unit_ids: list[int]) -> dict:
    """Execute a batch of evaluation units (claim, reply, judge). Idempotent; see
    engine.units_execute. Provider failures are recorded on the units (state error) rather
    than retried blindly here: the provider layer already retried transient ones, and "retry
    errors" re-enqueues.

    If the database or Redis goes away mid-batch, the batch has already cached what it paid
    for and handed its units back (engine ``_abandon``); the task then closes its database
    connection and retries itself with backoff, so the units run again in seconds rather than
    waiting for a resume."""
    try:
        outcomes = engine.units_execute(unit_ids=unit_ids)
    except TRANSIENT_ERRORS as exc:
        connection.close()  # the retry starts on a fresh connection
        raise self.retry(exc=exc, countdown=retry_countdown(self.request.retries)) from exc
    return {state: list(outcomes.values()).count(state) for state in set(outcomes.values())}


@shared_task(name="benchmark.run_unit", acks_late=True, ignore_result=True)
def run_unit(unit_id: int) -> str:
    """One unit: a batch of one (kept for messages queued by earlier versions)."""
    return engine.unit_execute(unit_id=unit_id)


@shared_task(name="benchmark.launch_run", acks_late=True, ignore_result=True)
def launch_run(run_id: int) -> int:
    """Queued → running: create the run's units and enqueue them (a no-op for any other state)."""
    return runs.run_launch(run_id=run_id)


@shared_task(name="benchmark.resume_run", acks_late=True, ignore_result=True)
def resume_run(run_id: int) -> int:
    return runs.run_resume(run_id=run_id)


@shared_task(name="benchmark.worker_health")
def worker_health() -> dict:
    """Report that a worker is alive and can reach the database. Read-only; safe to repeat."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        (one,) = cursor.fetchone()
    return {"ok": one == 1, "database": connection.vendor}


# Registered here so that Celery's autodiscovery (which imports benchmark.tasks) finds it.
from benchmark.curation.tasks import curate_dialogue_task  # noqa: E402

__all__ = [
    "curate_dialogue_task",
    "launch_run",
    "resume_run",
    "run_unit",
    "run_units",
    "worker_health",
]
