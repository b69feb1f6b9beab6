"""Celery tasks of the benchmark app: thin wrappers that take ids and call one service.

Celery's autodiscovery imports this module, so it also imports the tasks that live beside their
services (the evaluation batch, curation) to register them. Delivery is at least once
(acks_late, reject_on_worker_lost): every service is idempotent.
"""

from celery import shared_task
from django.db import connection

from benchmark.curation import jobs
from benchmark.curation.jobs import curate_target_task
from benchmark.curation.tasks import curate_dialogue_task
from benchmark.evaluation import runs
from benchmark.evaluation.tasks import run_units


@shared_task(name="benchmark.launch_run", acks_late=True, ignore_result=True)
def launch_run(run_id: int) -> int:
    """Queued → running: create the run's units and enqueue them (a no-op for any other state)."""
    return runs.run_launch(run_id=run_id)


@shared_task(name="benchmark.resume_run", acks_late=True, ignore_result=True)
def resume_run(run_id: int) -> int:
    return runs.run_resume(run_id=run_id)


@shared_task(name="benchmark.sweep_runs", ignore_result=True)
def sweep_runs() -> dict:
    """Periodic (Celery beat): dispatch again the units whose lease lapsed (``runs.runs_sweep``:
    idempotent, and safe when two sweeps overlap)."""
    outcome = runs.runs_sweep()
    return {"redispatched": outcome.redispatched, "given_up": outcome.given_up}


@shared_task(name="benchmark.sweep_curation_jobs", ignore_result=True)
def sweep_curation_jobs() -> dict:
    """Periodic (Celery beat, beside ``sweep_runs``): dispatch again the curation targets whose
    worker died, give up those that died too often, settle those of cancelling jobs
    (``jobs.curation_jobs_sweep``: idempotent, and safe when two sweeps overlap)."""
    outcome = jobs.curation_jobs_sweep()
    return {
        "redispatched": outcome.redispatched,
        "given_up": outcome.given_up,
        "cancelled": outcome.cancelled,
    }


@shared_task(name="benchmark.worker_health")
def worker_health() -> dict:
    """Report that a worker is alive and can reach the database. Read-only; safe to repeat."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        (one,) = cursor.fetchone()
    return {"ok": one == 1, "database": connection.vendor}


__all__ = [
    "curate_dialogue_task",
    "curate_target_task",
    "launch_run",
    "resume_run",
    "run_units",
    "sweep_curation_jobs",
    "sweep_runs",
    "worker_health",
]
