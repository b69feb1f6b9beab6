"""The evaluation engine's Celery task: one batch of units, by id.

Delivery is at least once (acks_late, reject_on_worker_lost): the engine is idempotent, so a
batch redelivered after a worker died only finishes what was left. ``runs`` enqueues it; the
run-level tasks (launch, resume) live in ``benchmark/tasks.py``, above ``runs``.
"""

import redis
from celery import shared_task
from django.db import InterfaceError, OperationalError, connection

from benchmark.evaluation import engine
from benchmark.evaluation.inflight import InflightUnavailable
from core.backoff import backoff_s

TRANSIENT_ERRORS = (
    OperationalError,  # the database restarted, its backend was terminated, SQLite was busy
    InterfaceError,  # a connection already closed under us
    InflightUnavailable,  # Redis (the in-flight claims) failed, whatever the client raised
    redis.ConnectionError,  # Redis restarting, elsewhere than the claims
    redis.TimeoutError,
)
"""Infrastructure errors a batch is retried for. Anything else is a bug and fails the task."""
RUN_UNITS_MAX_RETRIES = 8
RETRY_BACKOFF_MAX_S = 60.0


def retry_countdown(retries: int) -> float:
    """Seconds before retry number ``retries + 1`` of a batch: up to 1 s, doubling, 60 s at
    most (``core.backoff``)."""
    return backoff_s(retries + 1, base_s=1.0, cap_s=RETRY_BACKOFF_MAX_S)


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
