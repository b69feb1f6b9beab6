"""Backup and restore, done for real as docs/reliability.md tells an operator to:

- the database: ``pg_dump --format=custom`` of the live database, ``pg_restore`` into a new one,
  and every table compared row for row (PostgreSQL only: on SQLite the backup is a copy of the
  file, see the docs);
- the exports: the corpus (``export_corpus``) and a run's results (``export_results``) written
  out, the database emptied of them, imported back (``import_corpus``, ``import_results``) and
  exported again — the same bytes; the judgments CSV export likewise.
"""

import csv
import io
import os
import subprocess
import uuid

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from benchmark.evaluation import runs
from benchmark.evaluation.demo_run import DEMO_RUN_NAME
from benchmark.models import Dialogue, EvaluationRun, ResponseCacheEntry

pytestmark = pytest.mark.django_db(transaction=True)


def _conninfo(dbname: str) -> str:
    db = connection.settings_dict
    return psycopg.conninfo.make_conninfo(
        dbname=dbname,
        user=db["USER"] or None,
        password=db["PASSWORD"] or None,
        host=db["HOST"] or "127.0.0.1",
        port=str(db["PORT"] or 5432),
    )


def _table_digests(dbname: str) -> dict[str, tuple[int, str]]:
    """Every table of the public schema: its row count and an md5 of its rows, in order."""
    with psycopg.connect(_conninfo(dbname)) as conn:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1"
            )
        ]
        digests = {}
        for table in tables:
            digests[table] = conn.execute(
                f"SELECT count(*), md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), ''))"  # noqa: S608
                f' FROM "{table}" t'
            ).fetchone()
    return digests


def test_pg_dump_and_pg_restore_give_back_every_row(tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip(
            "pg_dump/pg_restore need PostgreSQL (DATABASE_URL); on SQLite the backup is a copy "
            "of the database file (docs/reliability.md) — CI runs this on PostgreSQL"
        )
    call_command("load_demo", stdout=io.StringIO())  # corpus, a finished run, demo logins
    source = connection.settings_dict["NAME"]
    target = f"{source}_restore_{uuid.uuid4().hex[:6]}"
    dump = tmp_path / "proactbench.dump"
    env = {**os.environ, "PGPASSWORD": connection.settings_dict["PASSWORD"] or ""}
    db = connection.settings_dict
    common = ["-h", db["HOST"] or "127.0.0.1", "-p", str(db["PORT"] or 5432)]
    common += ["-U", db["USER"]] if db["USER"] else []
    subprocess.run(
        ["pg_dump", *common, "--format=custom", "--no-owner", "-f", str(dump), source],
        check=True,
        env=env,
    )
    assert dump.stat().st_size > 10_000
    with psycopg.connect(_conninfo("postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{target}"')
    try:
        subprocess.run(
            ["pg_restore", *common, "--no-owner", "--exit-on-error", "-d", target, str(dump)],
            check=True,
            env=env,
        )
        before, after = _table_digests(source), _table_digests(target)
    finally:
        with psycopg.connect(_conninfo("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{target}"')
    assert before == after
    assert before["benchmark_judgment"][0] > 100 and before["auth_user"][0] >= 4


@pytest.fixture
def eager():
    from proactweb.celery import app as celery_app

    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


def test_the_exports_restore_the_corpus_and_the_results(tmp_path, client_for, admin_user, eager):
    call_command("load_demo", "--no-users", stdout=io.StringIO())
    demo = EvaluationRun.objects.get(name=DEMO_RUN_NAME)
    # A run made here (the demo's own run is an import; its export gives back only what the
    # imported files held): the demo models and judges, offline through the replay provider.
    run = runs.run_create(
        name="to back up",
        endpoints=demo.endpoints.all(),
        judges=demo.judges.all(),
        dialogues=Dialogue.objects.all(),
    )
    runs.run_launch(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "done"
    corpus = tmp_path / "final_dialogues.jsonl"
    call_command("export_corpus", "--out", str(corpus), stdout=io.StringIO())
    first = tmp_path / "first"
    call_command("export_results", str(run.pk), "--out-dir", str(first), stdout=io.StringIO())
    client = client_for(admin_user)
    first_csv = _judgments(client, run)

    # Lose the runs and the corpus (the endpoints stay: the results name them).
    EvaluationRun.objects.all().delete()
    ResponseCacheEntry.objects.all().delete()
    Dialogue.objects.all().delete()
    assert not Dialogue.objects.exists()

    call_command("import_corpus", str(corpus), stdout=io.StringIO())
    again = tmp_path / "corpus-again.jsonl"
    call_command("export_corpus", "--out", str(again), stdout=io.StringIO())
    assert again.read_bytes() == corpus.read_bytes()

    files = sorted(first.iterdir())
    assert len(files) == 3 and all(f.stat().st_size > 1000 for f in files)
    judge = run.primary_judge.name
    call_command(
        "import_results", *map(str, files), "--judge", judge, "--name", "restored",
        stdout=io.StringIO(),
    )  # fmt: skip
    restored = EvaluationRun.objects.get(name="restored")
    second = tmp_path / "second"
    call_command("export_results", str(restored.pk), "--out-dir", str(second), stdout=io.StringIO())
    for original in files:
        assert (second / original.name).read_bytes() == original.read_bytes(), original.name
    # The results format carries the primary judge's verdicts on the vanilla replies: the
    # restored run's judgments CSV has exactly those rows of the original's.
    wanted = [r for r in first_csv if r["judge"] == judge and r["condition"] == "vanilla"]
    assert len(wanted) > 50 and _judgments(client, restored) == wanted


def _judgments(client, run) -> list[dict]:
    response = client.get(
        reverse("stats_api:raw-export", args=["judgments", "csv"]) + f"?run={run.pk}"
    )
    assert response.status_code == 200
    text = b"".join(response.streaming_content).decode()
    keep = ("dialogue", "turn", "trigger_type", "model", "condition", "judge", "verdict")
    rows = [
        {k: row[k] for k in (*keep, "rationale", "evidence")}
        for row in csv.DictReader(io.StringIO(text))
    ]
    return sorted(rows, key=lambda r: tuple(r[k] for k in keep))
