"""Plain SQL for the workspace's hot path (Next, answering, the workspace page).

Every annotator request runs these; Django spent longer composing the equivalent querysets
than the database spent running them (bench/README.md, the annotation load benchmark). Only
table names and fixed fragments are formatted into a statement; every value is a parameter.
"""

from __future__ import annotations

from typing import TypeVar

from django.db import connection, models

from annotation.models import Rater, Study

M = TypeVar("M", bound=models.Model)


def first_raw(model: type[M], sql: str, params: list) -> M | None:
    """The first instance ``sql`` (``SELECT * FROM <model's table> …``) finds, or None."""
    return next(iter(model.objects.raw(sql, params)), None)


def rater_lock(rater: Rater) -> Rater:
    """Take the rater's row lock (never the study's: every rater of a study shares it) and
    read the study's status afresh under it; the rest of the rater and study as loaded."""
    lock = " FOR UPDATE OF r" if connection.features.has_select_for_update else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT s.status FROM {Rater._meta.db_table} r"  # noqa: S608
            f" JOIN {Study._meta.db_table} s ON s.id = r.study_id WHERE r.id = %s{lock}",
            [rater.pk],
        )
        (rater.study.status,) = cursor.fetchone()
    return rater
