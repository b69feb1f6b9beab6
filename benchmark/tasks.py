"""Celery tasks of the benchmark app."""

from celery import shared_task
from django.db import connection


@shared_task(name="benchmark.worker_health")
def worker_health() -> dict:
    """Report that a worker is alive and can reach the database. Read-only; safe to repeat.

    Used by the health page and by ``manage.py check_worker`` to prove broker, worker and
    database are wired together."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        (one,) = cursor.fetchone()
    return {"ok": one == 1, "database": connection.vendor}
