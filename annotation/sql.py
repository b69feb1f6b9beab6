"""Plain SQL for the workspace's hot path that is not a plain row read (see core/rows.py
for those): the rater's lock. Only table names and fixed fragments are formatted into a
statement; every value is a parameter."""

from __future__ import annotations

from django.db import connection

from annotation.models import Rater, Study


def rater_lock(rater: Rater, *, relaxed_commit: bool = False) -> Rater:
    """Take the rater's row lock (never the study's: every rater of a study shares it) and
    read the study's status afresh under it; the rest of the rater and study as loaded.

    ``relaxed_commit`` (PostgreSQL): the transaction's commit will not wait for its WAL to
    reach the disk — for soft state only (a lease), set in the same statement to save a
    round trip."""
    lock = relax = ""
    if connection.features.has_select_for_update:
        lock = " FOR UPDATE OF r"
    if relaxed_commit and connection.vendor == "postgresql":
        relax = ", set_config('synchronous_commit', 'off', true)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT s.status{relax} FROM {Rater._meta.db_table} r"  # noqa: S608
            f" JOIN {Study._meta.db_table} s ON s.id = r.study_id WHERE r.id = %s{lock}",
            [rater.pk],
        )
        rater.study.status = cursor.fetchone()[0]
    return rater
