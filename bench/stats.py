"""Statistics benchmark: the dashboard's numbers at full scale, and a ~200,000-row raw export.

Data (generated, in a fresh database): the full-size corpus of bench/corpus_import.py (198
dialogues, 624 triggers), a finished run of 16 models × 624 triggers judged by 3 judges (29,952
judgments, verdicts drawn from each model's ability, the judges agreeing most of the time),
6 external benchmark scores per model, and a second run of 16 models × 624 triggers × 2
conditions × 3 samples × 3 judges (179,712 judgments) so the export has ~210,000 rows.
Four human studies are written as the annotation app's rows (study, raters, items, one
assignment and one answer per vote) on the dashboard run, and read back by the same selectors
as the dashboard's *Study* filter: a pairwise study of 5,000 votes (1,250 pairs × 4 of 40
raters, one rater excluded), a failure-mode study of 1,079 fails × 2 labels, a direct-rating
study of 5,000 ratings (1,000 replies × 5 of 60 raters); and an arena study of 100,000 answers
(25,000 pairs of the 16 models at the run's triggers × 4 of 40 raters, one excluded; winners
drawn from the models' abilities as Bradley–Terry strengths, 10 % ties).

Targets (issue #5): every number on the dashboard in ≤ 1 s — the five run panels (leaderboard
with 1,000-resample CIs, judge agreement, style sensitivity, disclosure distance, benchmark
correlation) and those of the study chosen with them: the pairwise study's (preference, 10,000
item-clustered resamples per row; per rater; nominal agreement) or the failure-mode study's
(shares; agreement), database reads included (``dashboard_s``: the slower page;
``all_panels_s``: every panel together); the raw CSV export streamed with peak memory flat in
the row count (the full export and a 30,000-row one are compared, each in its own process).
The direct-rating study's human agreement (Study 1's table) is timed beside it, and so is the
arena study's ranking (issue #16: "well under a second or two" on PostgreSQL for 100,000
answers; ``arena_ranking_s``) and its page's panels.

HALO diagnosis (issue #17): a HALO study of 8,000 diagnosed replies — 10 models × 800, four
models at each of 2,000 checkpoints, every checkpoint diagnosed by 2 of 20 raters (16,000
per-reply judgments in 4,000 answers), written as annotation rows. Target: every HALO table,
bootstrap CIs included, ≤ 1 s each (a fresh request each: the study's read included); then the
eight together as the dashboard's study page draws them (one read), and the ``halo`` raw export.
``--only halo`` runs this part alone (it needs no corpus and no run).

Proposal review (issue #17), its own part (``--only proposals`` runs it alone, without the
corpus and the runs): a closed proposal-review study of 5,000 proposals × 3 decisions (1,250
contexts of five events, four proposals each from six models, the other two silent; 30
raters, one excluded), written as rows. Targets: each of its tables (acceptance, decisions
vs the majority labels, agreement; 10,000-resample bootstrap CIs) in ≤ 1 s, database reads
included, each with a request of its own; the reward-model labels export streamed through the
API at ≥ 50,000 rows/s with flat memory (the same export of 20,000- and 50,000-proposal
studies, each in a process of its own: the peak RSS does not grow with the row count). Each
export is streamed three times and the fastest reported, with the web process's CPU time for
it. The planner's statistics are refreshed after the bulk load (``ANALYZE``), as autovacuum
would within a minute.

    python bench/stats.py                    # embedded default (SQLite in a temp folder)
    DATABASE_URL=postgres://…/scratch python bench/stats.py   # a scratch PostgreSQL database
    DATABASE_URL=postgres://…/scratch python bench/stats.py --only export
    DATABASE_URL=postgres://…/scratch python bench/stats.py --only halo
    DATABASE_URL=postgres://…/scratch python bench/stats.py --only proposals

Raw export (issue #20 part 6: ≥ 100,000 rows/s, memory flat): ``--only export`` writes the
corpus and the runs and streams the two exports alone. Beside the exporting process's CPU time
the table gives the PostgreSQL backend's (read from /proc when the server runs on this machine),
since on PostgreSQL the database writes the CSV itself (``COPY``, stats/csv_copy.py).

Ends with ``RESULT dashboard_s= export_rows_per_s= export_peak_rss_mb= … arena_ranking_s= …``
(``--only export``: ``RESULT export_rows_per_s= export_rows_per_cpu_s= export_db_cpu_s= …``;
``--only halo``: ``RESULT halo_max_table_s= halo_all_tables_s= …``; ``--only proposals``:
``RESULT proposal_tables_max_s= proposal_export_rows_per_s= …``).
"""

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
N_MODELS, N_JUDGES, N_VOTES, N_FAILS = 16, 3, 5000, 1079
# The arena study: 25,000 pairs of the 16 models (all 120 pairs, ~208 triggers each) × 4 of 40
# raters = 100,000 battles.
N_ARENA_ITEMS, ARENA_PER_ITEM, ARENA_RATERS = 25_000, 4, 40


def _django():
    import django

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proactweb.settings")
    django.setup()


def _setup(corpus: Path) -> dict:
    """Child process: migrate, import the corpus, write the two runs and the scores."""
    _django()
    import numpy as np
    from django.core.management import call_command
    from django.db import connection

    from annotation.models import Answer, Assignment, Rater, Study, StudyItem
    from benchmark.corpus.importer import corpus_import
    from benchmark.models import (
        Dialogue,
        EvaluationRun,
        EvaluationUnit,
        Judgment,
        JudgmentState,
        ModelEndpoint,
        RunStatus,
        Trigger,
    )
    from benchmark.providers.replay import REPLAY
    from stats.models import ExternalBenchmarkScore

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    for model in (Answer, Assignment, StudyItem, Rater, Study):  # they PROTECT the runs
        model.objects.all().delete()
    Judgment.objects.all().delete()
    EvaluationUnit.objects.all().delete()
    EvaluationRun.objects.all().delete()
    with corpus.open("rb") as stream:
        corpus_import(stream=stream, source=corpus.name)
    rng = np.random.default_rng(5)
    endpoints = []
    for i in range(N_MODELS + N_JUDGES):
        name = f"bench-model-{i:02d}" if i < N_MODELS else f"bench-judge-{i - N_MODELS}"
        endpoint, _ = ModelEndpoint.objects.get_or_create(
            name=name,
            defaults={"display_name": name, "provider": REPLAY, "model_name": name},
        )
        endpoints.append(endpoint)
    models, judges = endpoints[:N_MODELS], endpoints[N_MODELS:]
    ExternalBenchmarkScore.objects.all().delete()
    ability = np.linspace(-1.5, 1.5, N_MODELS)
    ExternalBenchmarkScore.objects.bulk_create(
        ExternalBenchmarkScore(
            endpoint=model,
            benchmark=benchmark,
            score=float(50 + 15 * ability[m] + rng.normal(0, 5)),
            uploaded_at="2026-01-01T00:00:00Z",
        )
        for m, model in enumerate(models)
        for benchmark in ("GPQA", "LiveCodeBench", "MMLU", "IFEval", "SWE-bench", "AIME")
    )
    triggers = list(Trigger.objects.values_list("id", "type"))
    difficulty = {"EMERGENT": 0.6, "CRITICAL": 0.2, "RECOVERY": -1.2}
    words = "plan check anchor reply budget route keep the and of to for with".split()
    total = 0
    for name, conditions, samples in (
        ("bench dashboard run", ["vanilla"], 1),
        ("bench export run", ["vanilla", "rubric_injected"], 3),
    ):
        run = EvaluationRun.objects.create(
            name=name,
            status=RunStatus.DONE,
            conditions=conditions,
            samples=samples,
            primary_judge=judges[0],
        )
        run.endpoints.set(models)
        run.judges.set(judges)
        run.dialogues.set(Dialogue.objects.all())
        units = EvaluationUnit.objects.bulk_create(
            (
                EvaluationUnit(
                    run=run,
                    trigger_id=trigger_id,
                    endpoint=model,
                    condition=condition,
                    sample_index=sample,
                    state="done",
                )
                for model in models
                for trigger_id, _ in triggers
                for condition in conditions
                for sample in range(samples)
            ),
            batch_size=5000,
        )
        kinds = dict(triggers)
        model_index = {m.pk: i for i, m in enumerate(models)}
        batch = []
        for unit in units:
            logit = ability[model_index[unit.endpoint_id]] + difficulty[kinds[unit.trigger_id]]
            truth = rng.choice(3, p=_verdict_probabilities(logit))
            for judge in judges:
                verdict = truth if rng.random() < 0.85 else rng.integers(0, 3)
                batch.append(
                    Judgment(
                        unit_id=unit.pk,
                        judge=judge,
                        judge_name=judge.name,
                        state=JudgmentState.DONE,
                        verdict=("FAIL", "PARTIAL", "PASS")[verdict],
                        rationale=" ".join(rng.choice(words, 40)),
                        evidence="keep the plan",
                        evidence_status="exact",
                        evidence_found_share=1.0,
                    )
                )
            if len(batch) >= 15000:
                Judgment.objects.bulk_create(batch, batch_size=5000)
                total += len(batch)
                batch = []
        Judgment.objects.bulk_create(batch, batch_size=5000)
        total += len(batch)
    dashboard_run = EvaluationRun.objects.get(name="bench dashboard run")
    votes = _human_studies(dashboard_run, rng) + _arena_study(dashboard_run, ability, rng)
    if connection.vendor == "postgresql":
        # What autovacuum does within a minute of a bulk load: without fresh statistics the
        # planner takes the 100,000 arena answers for a few hundred and nests its joins.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return {
        "judgments": total,
        "votes": votes,
        "setup_s": round(time.perf_counter() - started, 1),
    }


def _human_studies(run, rng) -> int:
    """The three studies of the module docstring, as annotation rows (bulk-written: the
    services' per-answer locking is what bench/annotation_next.py measures). Returns the
    number of answers written."""
    from datetime import UTC, datetime, timedelta

    from annotation.models import (
        Answer,
        Assignment,
        AssignmentState,
        Rater,
        Study,
        StudyItem,
        StudyStatus,
    )
    from benchmark.vocabulary import FAILURE_MODES

    units = list(run.units.order_by("id").values_list("id", "trigger_id"))
    start = datetime(2026, 5, 1, tzinfo=UTC)

    def study(kind, n_items, n_raters, per_item, prefix, label, display=dict) -> int:
        created = Study.objects.create(
            name=f"bench {kind}", kind=kind, status=StudyStatus.CLOSED, overlap=per_item, run=run
        )
        raters = Rater.objects.bulk_create(
            Rater(study=created, external_id=f"{prefix}{r:02d}", excluded=r == 7)
            for r in range(n_raters)
        )
        items = StudyItem.objects.bulk_create(
            (
                StudyItem(
                    study=created,
                    position=i,
                    key=f"{kind}-{i}",
                    # Every 7th reply (7 is prime to the run's 9,984): all models and types.
                    trigger_id=units[i * 7 % len(units)][1],
                    unit_id=units[i * 7 % len(units)][0],
                    required_answers=per_item,
                    completed_answers=per_item,
                )
                for i in range(n_items)
            ),
            batch_size=2000,
        )
        assignments = Assignment.objects.bulk_create(
            (
                Assignment(
                    item=item,
                    rater=raters[(i * per_item + j) % n_raters],
                    state=AssignmentState.DONE,
                    display=display(),
                    leased_at=start,
                    lease_expires_at=start,
                    completed_at=start,
                )
                for i, item in enumerate(items)
                for j in range(per_item)
            ),
            batch_size=2000,
        )
        Answer.objects.bulk_create(
            (
                Answer(
                    assignment=assignment,
                    idempotency_key=f"bench-{created.pk}-{n}",
                    label=label(),
                    display=assignment.display,
                    started_at=start,
                    submitted_at=start + timedelta(seconds=n),
                    received_at=start + timedelta(seconds=n),
                    time_on_item_s=float(rng.integers(15, 600)),
                )
                for n, assignment in enumerate(assignments)
            ),
            batch_size=2000,
        )
        return len(assignments)

    return (
        study(
            "pairwise",
            N_VOTES // 4,
            40,
            4,
            "P",
            lambda: str(rng.choice(["B", "A", "tie"], p=[0.78, 0.2, 0.02])),
            lambda: {"order": ["B", "A"] if rng.random() < 0.5 else ["A", "B"]},
        )
        + study("failure_mode", N_FAILS, 5, 2, "F", lambda: FAILURE_MODES[rng.integers(0, 5)])
        + study(
            "direct_rating",
            N_VOTES // 5,
            60,
            5,
            "A",
            lambda: ("FAIL", "PARTIAL", "PASS")[rng.integers(0, 3)],
        )
    )


def _arena_study(run, ability, rng) -> int:
    """The arena study of the module docstring, as annotation rows (bulk-written): each item a
    pair of the run's models at one trigger (side A and B, their replies, the sources' labels in
    the payload as the arena kind stores them), answered by 4 raters; the winner drawn from the
    models' abilities as Bradley–Terry strengths, 10 % ties (half of them both bad), the sides
    shown in a random order. Returns the number of answers written."""
    from datetime import UTC, datetime, timedelta
    from itertools import combinations

    from annotation.models import (
        Answer,
        Assignment,
        AssignmentState,
        Rater,
        Study,
        StudyItem,
        StudyStatus,
    )

    units = {
        (endpoint, trigger): (pk, name)
        for pk, endpoint, trigger, name in run.units.values_list(
            "pk", "endpoint_id", "trigger_id", "endpoint__name"
        )
    }
    endpoints = sorted({endpoint for endpoint, _ in units})
    index = {endpoint: i for i, endpoint in enumerate(endpoints)}
    triggers = sorted({trigger for _, trigger in units})
    pairs = list(combinations(endpoints, 2))
    start = datetime(2026, 5, 1, tzinfo=UTC)
    study = Study.objects.create(
        name="bench arena",
        kind="arena",
        status=StudyStatus.CLOSED,
        overlap=ARENA_PER_ITEM,
        run=run,
    )
    raters = Rater.objects.bulk_create(
        Rater(study=study, external_id=f"R{r:02d}", excluded=r == 7) for r in range(ARENA_RATERS)
    )
    drafts = []
    for i in range(N_ARENA_ITEMS):
        a, b = pairs[i % len(pairs)]
        # Each pair at distinct triggers, spread over all of them.
        trigger = triggers[(i // len(pairs) * 3 + i % len(pairs)) % len(triggers)]
        (unit_a, label_a), (unit_b, label_b) = units[(a, trigger)], units[(b, trigger)]
        drafts.append(
            StudyItem(
                study=study,
                position=i,
                key=f"arena-{i}",
                trigger_id=trigger,
                unit_id=unit_a,
                unit_b_id=unit_b,
                payload={"sources": {"A": label_a, "B": label_b}, "sides": ["A", "B"]},
                required_answers=ARENA_PER_ITEM,
                completed_answers=ARENA_PER_ITEM,
            )
        )
    items = StudyItem.objects.bulk_create(drafts, batch_size=2000)
    strength = {e: ability[index[e]] for e in endpoints}
    assignments = Assignment.objects.bulk_create(
        (
            Assignment(
                item=item,
                rater=raters[(i * ARENA_PER_ITEM + j) % ARENA_RATERS],
                state=AssignmentState.DONE,
                display={"order": ["B", "A"] if rng.random() < 0.5 else ["A", "B"]},
                leased_at=start,
                lease_expires_at=start,
                completed_at=start,
            )
            for i, item in enumerate(items)
            for j in range(ARENA_PER_ITEM)
        ),
        batch_size=2000,
    )

    by_unit = dict(run.units.values_list("pk", "endpoint_id"))
    outcome = {item.pk: (by_unit[item.unit_id], by_unit[item.unit_b_id]) for item in items}

    def label(assignment: Assignment) -> str:
        if rng.random() < 0.1:
            return "tie" if rng.random() < 0.5 else "tie (bothbad)"
        a, b = outcome[assignment.item_id]
        gap = strength[a] - strength[b]
        return "model_a" if rng.random() < 1 / (1 + math.exp(-gap)) else "model_b"

    Answer.objects.bulk_create(
        (
            Answer(
                assignment=assignment,
                idempotency_key=f"bench-arena-{n}",
                label=label(assignment),
                display=assignment.display,
                details={"choice": "1"},
                started_at=start,
                submitted_at=start + timedelta(seconds=n),
                received_at=start + timedelta(seconds=n),
                time_on_item_s=float(rng.integers(15, 600)),
            )
            for n, assignment in enumerate(assignments)
        ),
        batch_size=2000,
    )
    return len(assignments)


def _verdict_probabilities(logit: float) -> list[float]:
    import math

    p_pass = 1 / (1 + math.exp(-logit))
    p_partial = (1 - p_pass) * 0.35
    return [1 - p_pass - p_partial, p_partial, p_pass]


def _dashboard() -> dict:
    """Child process: time every number of the dashboard (warm: imports and the first query
    done once before timing), three times; report the median."""
    _django()
    from annotation.models import Study
    from benchmark.models import EvaluationRun
    from stats import tables
    from stats.dashboard import dashboard_panels
    from stats.selectors import TableRequest

    run = EvaluationRun.objects.get(name="bench dashboard run")
    studies = {s.kind: s for s in Study.objects.all()}

    def panels(request, kind=None) -> dict:
        out = dashboard_panels(request, study_kind=kind)
        errors = {p.name: p.error for p in out.values() if p.error}
        if kind == "pairwise":
            # Its battles are each model's vanilla against its rubric-injected reply: one group
            # per model, which the ranking panels name instead of ranking.
            for name in ("arena-ranking", "arena-pairs"):
                assert "is not connected" in errors.pop(name, ""), name
        assert not errors, errors
        return out

    def study_page(kind: str) -> dict:
        return panels(TableRequest(study=studies[kind].pk), kind)

    def once() -> dict:
        timings = {}
        started = time.perf_counter()
        run_panels = panels(TableRequest(run=run))
        timings["run_panels_s"] = time.perf_counter() - started
        mark = time.perf_counter()
        pairwise = study_page("pairwise")
        timings["pairwise_study_s"] = time.perf_counter() - mark
        mark = time.perf_counter()
        study_page("failure_mode")
        timings["failure_mode_study_s"] = time.perf_counter() - mark
        timings["all_panels_s"] = time.perf_counter() - started
        # A dashboard page is the run's panels and the chosen study's: the slower of the two.
        timings["dashboard_s"] = timings["run_panels_s"] + max(
            timings["pairwise_study_s"], timings["failure_mode_study_s"]
        )
        mark = time.perf_counter()
        study_page("direct_rating")
        timings["human_agreement_s"] = time.perf_counter() - mark
        # The arena study: its ranking alone (a fresh request reads the battles and fits them),
        # then its page's panels (the ranking and the pairs share one fit; human agreement).
        mark = time.perf_counter()
        ranking = tables.build("arena-ranking", TableRequest(study=studies["arena"].pk))
        timings["arena_ranking_s"] = time.perf_counter() - mark
        mark = time.perf_counter()
        study_page("arena")
        timings["arena_study_s"] = time.perf_counter() - mark
        timings["arena_battles"] = sum(r["battles"] for r in ranking.rows) // 2
        timings["arena_sources"] = len(ranking.rows)
        timings["leaderboard_rows"] = len(run_panels["leaderboard"].table.rows)
        timings["preference_judgements"] = pairwise["preference"].table.rows[0]["n_judgements"]
        return timings

    once()
    runs = [once() for _ in range(3)]
    return {
        key: round(statistics.median(r[key] for r in runs), 3)
        if key.endswith("_s")
        else runs[0][key]
        for key in runs[0]
    }


def _export(run_name: str) -> dict:
    """Child process: stream the judgments export through the API view; count rows and bytes."""
    _django()
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from benchmark.models import EvaluationRun

    user, _ = get_user_model().objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True}
    )
    client = APIClient(HTTP_HOST="localhost")
    client.force_authenticate(user)
    url = "/api/v1/exports/judgments.csv"
    if run_name:
        url += f"?run={EvaluationRun.objects.get(name=run_name).pk}"
    # Warm up (URLconf, NumPy/SciPy imports) with an empty export, so that "before" is the
    # process ready to serve and the difference is the export's own memory.
    b"".join(client.get("/api/v1/exports/judgments.csv?run=0").streaming_content)
    before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    backend = _Backend()
    cpu_started = time.process_time()
    started = time.perf_counter()
    response = client.get(url)
    size = lines = 0
    for chunk in response.streaming_content:
        size += len(chunk)
        lines += chunk.count(b"\r\n")
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rows = lines - 1  # the header; no field holds a CRLF here
    return {
        "rows": rows,
        "mb": round(size / 1e6, 1),
        "export_s": round(elapsed, 2),
        "rows_per_s": round(rows / elapsed),
        # The exporting process's own CPU time: what the export costs whatever else runs.
        "cpu_s": round(cpu, 2),
        "rows_per_cpu_s": round(rows / cpu) if cpu else 0,
        "db_cpu_s": backend.cpu_s(),
        "rss_before_mb": round(before_kb / 1024, 1),
        "peak_rss_mb": round(peak_kb / 1024, 1),
    }


class _Backend:
    """The CPU time of the PostgreSQL backend that serves the export (a server on this machine:
    its /proc entry), over the request: on PostgreSQL the COPY writer moves the formatting into
    the database, so the web process's CPU alone would flatter it. The connection outlives the
    request (``DB_CONN_MAX_AGE``), so the backend is the one the warm-up used. None on SQLite,
    a remote server, or if the connection was replaced."""

    def __init__(self) -> None:
        from django.db import connection

        self.pid: int | None = None
        if connection.vendor != "postgresql":
            return
        connection.ensure_connection()
        pid = connection.connection.info.backend_pid
        comm = Path(f"/proc/{pid}/comm")
        if comm.exists() and comm.read_text().strip() == "postgres":
            self.pid = pid
            self.started = self._cpu()

    def _cpu(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def cpu_s(self) -> float | None:
        from django.db import connection

        if self.pid is None or connection.connection is None:
            return None
        if connection.connection.info.backend_pid != self.pid:
            return None
        return round(self._cpu() - self.started, 2)


# --- HALO diagnosis (issue #17) ---------------------------------------------------------------

HALO_MODELS, HALO_PER_MODEL, HALO_PER_CHECKPOINT, HALO_RATERS, HALO_K = 10, 800, 4, 20, 2
HALO_STUDY = "bench halo"


def _halo_setup() -> dict:
    """Child process: migrate and write the HALO study as annotation rows (bulk: the services'
    locking is bench/annotation_next.py's subject). Diagnoses are drawn per model: an ability
    sets acceptability (30–73 %), levels follow HALO's shares (L1 most), rejections lean
    over-proactive, the second rater agrees with the first on each question four times in
    five; effort grows with ability."""
    _django()
    from datetime import UTC, datetime, timedelta

    import numpy as np
    from django.core.management import call_command

    from annotation.models import (
        Answer,
        Assignment,
        AssignmentState,
        Rater,
        Study,
        StudyItem,
        StudyStatus,
    )

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    old = Study.objects.filter(name=HALO_STUDY)
    Answer.objects.filter(assignment__item__study__in=old).delete()
    Assignment.objects.filter(item__study__in=old).delete()
    old.delete()
    rng = np.random.default_rng(17)
    n_checkpoints = HALO_MODELS * HALO_PER_MODEL // HALO_PER_CHECKPOINT
    ability = np.linspace(0.30, 0.73, HALO_MODELS)
    tokens = np.linspace(3500, 6500, HALO_MODELS)
    rounds = np.linspace(0.8, 3.0, HALO_MODELS)
    # Each block of five checkpoints takes every model twice (two shuffles of the ten), never
    # twice at one checkpoint: exactly 800 replies per model, pairs sharing checkpoints.
    lineup: list[list[int]] = []
    while len(lineup) < n_checkpoints:
        first = list(rng.permutation(HALO_MODELS))
        while True:
            second = list(rng.permutation(HALO_MODELS))
            if not set(first[8:]) & set(second[:2]):
                break
        slots = first + second
        lineup += [slots[i : i + HALO_PER_CHECKPOINT] for i in range(0, 20, HALO_PER_CHECKPOINT)]
    study = Study.objects.create(
        name=HALO_STUDY, kind="halo", status=StudyStatus.CLOSED, overlap=HALO_K
    )
    raters = Rater.objects.bulk_create(
        Rater(study=study, external_id=f"H{r:02d}") for r in range(HALO_RATERS)
    )
    items = StudyItem.objects.bulk_create(
        (
            StudyItem(
                study=study,
                position=c,
                key=f"halo-{c}",
                payload={
                    "checkpoint": f"halo-{c}",
                    "sources": [
                        {
                            "id": f"r{j + 1}",
                            "source": f"bench-halo-{m:02d}",
                            "unit": None,
                            "reasoning_tokens": int(rng.normal(tokens[m], 800)),
                            "retrieval_rounds": int(rng.poisson(rounds[m])),
                            "suggested": {"level": "L1", "reason": "bench"},
                        }
                        for j, m in enumerate(models)
                    ],
                    "sides": [f"r{j + 1}" for j in range(len(models))],
                },
                required_answers=HALO_K,
                completed_answers=HALO_K,
            )
            for c, models in enumerate(lineup)
        ),
        batch_size=1000,
    )
    start = datetime(2026, 6, 1, tzinfo=UTC)
    assignments = Assignment.objects.bulk_create(
        (
            Assignment(
                item=item,
                rater=raters[(c * HALO_K + k) % HALO_RATERS],
                state=AssignmentState.DONE,
                display={"order": item.payload["sides"]},
                leased_at=start,
                lease_expires_at=start,
                completed_at=start,
            )
            for c, item in enumerate(items)
            for k in range(HALO_K)
        ),
        batch_size=2000,
    )

    def diagnose(m: int) -> dict:
        level = ("L0", "L1", "L2", "L3")[rng.choice(4, p=[0.10, 0.69, 0.05, 0.16])]
        acceptable = bool(rng.random() < ability[m])
        reply: dict = {"level": level, "suggested": "L1", "level_changed": level != "L1"}
        reply["acceptable"] = acceptable
        if not acceptable:
            if level != "L0":
                reply["timing"] = str(
                    rng.choice(["premature", "belated", "appropriate"], p=[0.45, 0.15, 0.4])
                )
                reply["intensity"] = str(
                    rng.choice(["insufficient", "excessive", "appropriate"], p=[0.2, 0.4, 0.4])
                )
            reply["issues"] = {"unsupported": "No record backs it."} if rng.random() < 0.28 else {}
        return reply

    answers, n = [], 0
    for c, models in enumerate(lineup):
        first = [diagnose(m) for m in models]
        for k in range(HALO_K):
            replies = []
            for j, m in enumerate(models):
                mine = dict(first[j]) if k == 0 or rng.random() < 0.8 else diagnose(m)
                replies.append({"response": f"r{j + 1}", "position": j + 1, **mine})
            accepted = sum(r["acceptable"] for r in replies)
            answers.append(
                Answer(
                    assignment=assignments[c * HALO_K + k],
                    idempotency_key=f"bench-halo-{n}",
                    label="all" if accepted == len(replies) else "some" if accepted else "none",
                    details={"replies": replies},
                    display={"order": [r["response"] for r in replies]},
                    started_at=start,
                    submitted_at=start + timedelta(seconds=n),
                    received_at=start + timedelta(seconds=n),
                    time_on_item_s=float(rng.integers(60, 900)),
                )
            )
            n += 1
    Answer.objects.bulk_create(answers, batch_size=2000)
    return {
        "checkpoints": len(items),
        "answers": len(answers),
        "judgments": sum(len(a.details["replies"]) for a in answers),
        "setup_s": round(time.perf_counter() - started, 1),
    }


def _halo_tables() -> dict:
    """Child process: each HALO table with a fresh request (the study read included), then all
    eight as one dashboard page (one read), then the halo raw export; warm, median of 3."""
    _django()
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from annotation.models import Study
    from stats import tables
    from stats.dashboard import dashboard_panels
    from stats.selectors import TableRequest

    study = Study.objects.get(name=HALO_STUDY)
    names = [s.name for s in tables.all_specs() if s.name.startswith("halo-")]
    user, _ = get_user_model().objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True}
    )
    client = APIClient(HTTP_HOST="localhost")
    client.force_authenticate(user)

    def once() -> dict:
        timings = {}
        for name in names:
            mark, cpu = time.perf_counter(), time.process_time()
            table = tables.build(name, TableRequest(study=study.pk))
            timings[name] = time.perf_counter() - mark
            timings[f"cpu {name}"] = time.process_time() - cpu
            assert table.rows, name
        mark = time.perf_counter()
        panels = dashboard_panels(TableRequest(study=study.pk), study_kind="halo")
        timings["all"] = time.perf_counter() - mark
        assert not [p.error for p in panels.values() if p.error]
        mark = time.perf_counter()
        response = client.get(f"/api/v1/exports/halo.csv?study={study.pk}")
        lines = sum(chunk.count(b"\r\n") for chunk in response.streaming_content)
        timings["export"] = time.perf_counter() - mark
        timings["export_rows"] = lines - 1
        return timings

    once()
    runs = [once() for _ in range(3)]
    return {key: round(statistics.median(r[key] for r in runs), 3) for key in runs[0]}


def _halo_report(setup: dict, timed: dict, database: str) -> str:
    print(
        f"\nHALO diagnosis ({database}; {setup['checkpoints']:,} checkpoints, "
        f"{setup['answers']:,} answers, {setup['judgments']:,} per-reply judgments of "
        f"{HALO_MODELS * HALO_PER_MODEL:,} replies, written in {setup['setup_s']} s)\n"
    )
    print("| HALO table (fresh request, study read included; median of 3) | seconds | CPU s |")
    print("| --- | ---: | ---: |")
    names = [k for k in timed if k.startswith("halo-")]
    for name in names:
        print(f"| {name} | {timed[name]:.3f} | {timed[f'cpu {name}']:.3f} |")
    print(f"| all eight, as the dashboard draws them (one read) | {timed['all']:.3f} | |")
    rows_per_s = round(timed["export_rows"] / timed["export"]) if timed["export"] else 0
    print(
        f"| halo raw export, CSV ({timed['export_rows']:,} rows, {rows_per_s:,} rows/s) | "
        f"{timed['export']:.3f} | |"
    )
    return (
        f"halo_max_table_s={max(timed[n] for n in names)} halo_all_tables_s={timed['all']} "
        f"halo_judgments={setup['judgments']} halo_export_rows_per_s={rows_per_s}"
    )


# --- Proposal review (issue #17) -----------------------------------------------------------

N_PROPOSALS, BIG_PROPOSALS, PROPOSAL_VOTES = 5_000, 50_000, 3
PROPOSAL_STUDIES = {
    "small": ("bench proposal review", N_PROPOSALS),
    "medium": ("bench proposal review (20,000)", 20_000),
    "big": ("bench proposal review (export)", BIG_PROPOSALS),
    "empty": ("bench proposal review (empty)", 0),
}
PROPOSAL_TABLES = ("proposal-acceptance", "proposal-decisions", "proposal-agreement")


def _proposal_setup() -> dict:
    """Child process: migrate, then (again) the three proposal-review studies of the module
    docstring, as rows: returns the numbers written."""
    _django()
    from django.core.management import call_command
    from django.db import connection

    from annotation.models import Answer, Assignment, Rater, Study, StudyItem

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    names = [name for name, _ in PROPOSAL_STUDIES.values()]
    for model, lookup in (
        (Answer, "assignment__item__study__name__in"),
        (Assignment, "item__study__name__in"),
        (StudyItem, "study__name__in"),
        (Rater, "study__name__in"),
        (Study, "name__in"),
    ):
        model.objects.filter(**{lookup: names}).delete()
    written = {
        size: _proposal_study(name, n, seed=n) for size, (name, n) in PROPOSAL_STUDIES.items()
    }
    # The planner's statistics, as autovacuum would have them a minute after a bulk load:
    # without them PostgreSQL guesses a handful of live answers and scans them all per chunk.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return {**written, "setup_s": round(time.perf_counter() - started, 1)}


def _proposal_study(name: str, n_proposals: int, *, seed: int) -> int:
    """One closed proposal-review study of ``n_proposals`` (see the module docstring); returns
    the answers written. Each model has its own acceptance odds, each rater a little noise."""
    from datetime import UTC, datetime, timedelta

    import numpy as np

    from annotation.kinds.proposal_review import ReviewLabel
    from annotation.models import (
        Answer,
        Assignment,
        AssignmentState,
        Rater,
        Study,
        StudyItem,
        StudyStatus,
    )

    rng = np.random.default_rng(seed)
    models = [f"bench-proposer-{m}" for m in range(6)]
    accept_odds = np.linspace(0.25, 0.7, len(models))
    study = Study.objects.create(
        name=name, kind="proposal_review", status=StudyStatus.CLOSED, overlap=PROPOSAL_VOTES
    )
    raters = Rater.objects.bulk_create(
        Rater(study=study, external_id=f"R{r:02d}", excluded=r == 7) for r in range(30)
    )
    start = datetime(2026, 5, 1, tzinfo=UTC)
    words = "opens the budget sheet types a total searches trains mails the team lead".split()
    answers = 0
    for first in range(0, n_proposals // 4, 500):  # 500 contexts at a time: flat memory
        items, chosen = [], []
        for c in range(first, min(first + 500, n_proposals // 4)):
            proposing = rng.permutation(len(models))[:4]
            proposals = [
                {"id": f"p{n}", "source": models[m], "text": " ".join(rng.choice(words, 20))}
                for n, m in enumerate(proposing)
            ]
            events = [
                {
                    "time": f"2026-03-02T09:{e:02d}:00",
                    "kind": "user activity",
                    "text": " ".join(rng.choice(words, 14)),
                }
                for e in range(5)
            ]
            items.append(
                StudyItem(
                    study=study,
                    position=c,
                    key=f"ctx-{c:06d}",
                    payload={
                        "context_id": f"ctx-{c:06d}",
                        "events": events,
                        "proposals": proposals,
                        "silent": [m for i, m in enumerate(models) if i not in proposing],
                        "sides": [p["id"] for p in proposals],
                    },
                    required_answers=PROPOSAL_VOTES,
                    completed_answers=PROPOSAL_VOTES,
                )
            )
            chosen.append(proposing)
        StudyItem.objects.bulk_create(items, batch_size=500)
        assignments = Assignment.objects.bulk_create(
            (
                Assignment(
                    item=item,
                    rater=raters[(c * PROPOSAL_VOTES + j) % len(raters)],
                    state=AssignmentState.DONE,
                    display={"order": item.payload["sides"]},
                    leased_at=start,
                    lease_expires_at=start,
                    completed_at=start,
                )
                for c, item in enumerate(items)
                for j in range(PROPOSAL_VOTES)
            ),
            batch_size=2000,
        )
        rows = []
        for n, assignment in enumerate(assignments):
            proposing = chosen[n // PROPOSAL_VOTES]
            accepted = rng.random(4) < accept_odds[proposing]
            reject_all = not accepted.any() and rng.random() < 0.5
            decisions = {f"p{i}": "accept" if ok else "reject" for i, ok in enumerate(accepted)}
            label = (
                ReviewLabel.REJECT_ALL
                if reject_all
                else ReviewLabel.SOME_ACCEPTED
                if accepted.any()
                else ReviewLabel.NONE_ACCEPTED
            )
            at = start + timedelta(seconds=first * PROPOSAL_VOTES + n)
            rows.append(
                Answer(
                    assignment=assignment,
                    idempotency_key=f"bench-{study.pk}-{first}-{n}",
                    label=label.value,
                    details={"decisions": decisions, "reject_all": reject_all},
                    display=assignment.display,
                    started_at=at,
                    submitted_at=at,
                    received_at=at,
                    time_on_item_s=float(rng.integers(15, 200)),
                )
            )
        Answer.objects.bulk_create(rows, batch_size=2000)
        answers += len(rows)
    return answers


def _proposal_tables() -> dict:
    """Child process: each proposal-review table of the 5,000-proposal study, each with a
    request of its own (database reads included), warm, median of 3."""
    _django()
    from annotation.models import Study
    from stats import tables
    from stats.selectors import TableRequest

    study = Study.objects.get(name=PROPOSAL_STUDIES["small"][0])
    out: dict = {}
    for name in PROPOSAL_TABLES:
        tables.build(name, TableRequest(study=study.pk))  # warm: imports, first query
        timings = []
        for _ in range(3):
            started = time.perf_counter()
            table = tables.build(name, TableRequest(study=study.pk))
            timings.append(time.perf_counter() - started)
        out[name] = round(statistics.median(timings), 3)
    decisions = tables.build("proposal-decisions", TableRequest(study=study.pk)).rows
    out["pooled_f1"] = round(next(r["f1"] for r in decisions if r["model"] == "POOLED"), 4)
    out["proposals"] = table.rows[0]["n_proposals"]
    out["decisions"] = table.rows[0]["n_decisions"]
    return out


def _proposal_export(size: str) -> dict:
    """Child process: stream the reward-model labels export of one study through the API
    view three times; count lines and bytes; report the fastest of the three (the one least
    slowed by whatever else the machine runs), this process's CPU time for it, and the
    process's peak RSS after all three."""
    _django()
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from annotation.models import Study

    user, _ = get_user_model().objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True}
    )
    client = APIClient(HTTP_HOST="localhost")
    client.force_authenticate(user)
    url = "/api/v1/exports/proposal-labels.jsonl?study={}"
    empty = Study.objects.get(name=PROPOSAL_STUDIES["empty"][0]).pk
    b"".join(client.get(url.format(empty)).streaming_content)  # warm: URLconf, imports
    before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    study = Study.objects.get(name=PROPOSAL_STUDIES[size][0]).pk
    runs = []
    for _ in range(3):
        started, cpu = time.perf_counter(), time.process_time()
        response = client.get(url.format(study))
        size_bytes = lines = 0
        for chunk in response.streaming_content:
            size_bytes += len(chunk)
            lines += chunk.count(b"\n")
        runs.append((time.perf_counter() - started, time.process_time() - cpu))
    elapsed, cpu = min(runs)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "rows": lines,
        "mb": round(size_bytes / 1e6, 1),
        "export_s": round(elapsed, 3),
        "cpu_s": round(cpu, 3),
        "rows_per_s": round(lines / elapsed),
        "rss_before_mb": round(before_kb / 1024, 1),
        "peak_rss_mb": round(peak_kb / 1024, 1),
    }


def _proposal_children(env: dict) -> dict:
    """Run the proposal-review part's children (in the database ``env`` names)."""
    return {
        "setup": _child("proposal-setup", "1", env),
        "timed": _child("proposal-tables", "1", env),
        **{size: _child("proposal-export", size, env) for size in ("small", "medium", "big")},
    }


def _proposal_report(results: dict) -> str:
    """Print the proposal-review part's figures; return its RESULT fields."""
    setup, timed, small, medium, big = (
        results[k] for k in ("setup", "timed", "small", "medium", "big")
    )
    answers = setup["small"] + setup["medium"] + setup["big"]
    print(
        f"\nProposal review ({answers:,} answers of three decisions each written in "
        f"{setup['setup_s']} s)\n"
    )
    print(
        f"| proposal-review tables, {timed['proposals']:,} proposals × {PROPOSAL_VOTES} "
        "decisions (own request each, warm, median of 3) | seconds |\n| --- | ---: |"
    )
    for name in PROPOSAL_TABLES:
        print(f"| {name} (10,000-resample CIs) | {timed[name]:.3f} |")
    print(
        "\n| reward-model labels export (API, JSONL; fastest of 3) | rows | MB | seconds | "
        "rows/s | web process CPU s | RSS before | peak RSS |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    for label, r in (
        ("5,000 proposals", small),
        ("20,000 proposals", medium),
        ("50,000 proposals", big),
    ):
        print(
            f"| {label} | {r['rows']:,} | {r['mb']} | {r['export_s']} | {r['rows_per_s']:,} | "
            f"{r['cpu_s']} | {r['rss_before_mb']} MB | {r['peak_rss_mb']} MB |"
        )
    print(f"\n(load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    slowest = max(timed[name] for name in PROPOSAL_TABLES)
    # Flat memory: the working set is one chunk of text and the two cursors' fetches of 2,000
    # rows, which a 5,000-proposal study does not fill; from 20,000 on it is the same.
    growth = big["peak_rss_mb"] - medium["peak_rss_mb"]
    return (
        f"proposal_tables_max_s={slowest} proposal_export_rows_per_s={small['rows_per_s']} "
        f"proposal_export_big_rows_per_s={big['rows_per_s']} "
        f"proposal_export_rss_growth_mb={growth:.1f} proposal_pooled_f1={timed['pooled_f1']}"
    )


def _export_table(small: dict, full: dict) -> str:
    lines = [
        "| raw judgments CSV export | rows | MB | seconds | rows/s | CPU s | rows per CPU s "
        "| database CPU s | RSS before | peak RSS |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, r in (("one run", small), ("everything", full)):
        db_cpu = "n/a" if r["db_cpu_s"] is None else r["db_cpu_s"]
        lines.append(
            f"| {label} | {r['rows']:,} | {r['mb']} | {r['export_s']} | {r['rows_per_s']:,} | "
            f"{r['cpu_s']} | {r['rows_per_cpu_s']:,} | {db_cpu} | {r['rss_before_mb']} MB | "
            f"{r['peak_rss_mb']} MB |"
        )
    return "\n".join(lines)


def _export_result(small: dict, full: dict) -> str:
    growth = full["peak_rss_mb"] - small["peak_rss_mb"]
    return (
        f"export_rows_per_s={full['rows_per_s']} export_rows_per_cpu_s={full['rows_per_cpu_s']} "
        f"export_db_cpu_s={full['db_cpu_s']} export_peak_rss_mb={full['peak_rss_mb']} "
        f"export_rows={full['rows']} export_rss_growth_mb={growth:.1f}"
    )


def _child(mode: str, arg: str, env: dict) -> dict:
    result = subprocess.run(
        [sys.executable, __file__, f"--{mode}", arg],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        sys.exit(f"{mode} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag in ("--setup", "--dashboard", "--export", "--halo-setup", "--halo-tables"):
        parser.add_argument(flag, help=argparse.SUPPRESS)
    for flag in ("--proposal-setup", "--proposal-tables", "--proposal-export"):
        parser.add_argument(flag, help=argparse.SUPPRESS)
    parser.add_argument(
        "--only", choices=["export", "halo", "proposals"], help="run one part alone"
    )
    args = parser.parse_args()
    if args.proposal_setup:
        print(json.dumps(_proposal_setup()))
        return
    if args.proposal_tables:
        print(json.dumps(_proposal_tables()))
        return
    if args.proposal_export:
        print(json.dumps(_proposal_export(args.proposal_export)))
        return
    if args.setup:
        print(json.dumps(_setup(Path(args.setup))))
        return
    if args.halo_setup:
        print(json.dumps(_halo_setup()))
        return
    if args.halo_tables:
        print(json.dumps(_halo_tables()))
        return
    database = (
        "PostgreSQL" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "SQLite"
    )
    if args.only == "halo":
        with tempfile.TemporaryDirectory(prefix="proactbench-bench-stats-") as tmp:
            env = {**os.environ, "PROACTWEB_VAR_DIR": tmp}
            halo = _halo_report(
                _child("halo-setup", "1", env), _child("halo-tables", "1", env), database
            )
        print(f"\nRESULT {halo} database={database}")
        return
    if args.only == "proposals":
        with tempfile.TemporaryDirectory(prefix="proactbench-bench-stats-") as tmp:
            results = _proposal_children({**os.environ, "PROACTWEB_VAR_DIR": tmp})
        print(f"\nRESULT {_proposal_report(results)} database={database}")
        return
    if args.dashboard:
        print(json.dumps(_dashboard()))
        return
    if args.export is not None:
        print(json.dumps(_export("" if args.export == "all" else args.export)))
        return

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from corpus_import import generate_corpus

    if args.only == "export":
        with tempfile.TemporaryDirectory(prefix="proactbench-bench-stats-") as tmp:
            env = {**os.environ, "PROACTWEB_VAR_DIR": tmp}
            corpus = Path(tmp) / "corpus.jsonl"
            generate_corpus(corpus)
            setup = _child("setup", str(corpus), env)
            small = _child("export", "bench dashboard run", env)
            full = _child("export", "all", env)
        print(f"\nRaw export ({database}; {setup['judgments']:,} judgments)\n")
        print(_export_table(small, full))
        print(f"\nRESULT {_export_result(small, full)} database={database}")
        return

    with tempfile.TemporaryDirectory(prefix="proactbench-bench-stats-") as tmp:
        env = {**os.environ, "PROACTWEB_VAR_DIR": tmp}
        corpus = Path(tmp) / "corpus.jsonl"
        generate_corpus(corpus)
        setup = _child("setup", str(corpus), env)
        dashboard = _child("dashboard", "1", env)
        small = _child("export", "bench dashboard run", env)
        full = _child("export", "all", env)
        halo_setup = _child("halo-setup", "1", env)
        halo_tables = _child("halo-tables", "1", env)
        proposal_results = _proposal_children(env)
    print(
        f"\nStatistics benchmark ({database}; {setup['judgments']:,} judgments and "
        f"{setup['votes']:,} human answers written in {setup['setup_s']} s)\n"
    )
    print("| dashboard numbers (median of 3, warm; queries included) | seconds |\n| --- | ---: |")
    for key, label in (
        (
            "run_panels_s",
            "run panels: leaderboard (64 cells × 1,000 resamples), judge agreement, "
            "style, disclosure, correlation",
        ),
        (
            "pairwise_study_s",
            f"pairwise study, {dashboard['preference_judgements']:,} votes: preference "
            "(8 rows × 10,000 resamples), per rater, nominal agreement (4 rows)",
        ),
        (
            "failure_mode_study_s",
            f"failure-mode study, {N_FAILS:,} fails × 2 labels: shares, agreement",
        ),
        ("dashboard_s", "dashboard page: run panels + the slower study's panels"),
        ("all_panels_s", "every panel above together"),
        (
            "human_agreement_s",
            f"(beside it) direct-rating study, {N_VOTES:,} ratings: human agreement, "
            "4 rows, five 10,000-resample CIs each",
        ),
        (
            "arena_ranking_s",
            f"(beside it) arena study, {N_ARENA_ITEMS * ARENA_PER_ITEM:,} answers: the "
            f"arena-ranking table, {dashboard['arena_battles']:,} battles among "
            f"{dashboard['arena_sources']} sources (one rater excluded), fit + 1,000 resamples",
        ),
        (
            "arena_study_s",
            "(beside it) the arena study's panels: ranking and pairs (one fit), human agreement",
        ),
    ):
        print(f"| {label} | {dashboard[key]:.3f} |")
    print("\n" + _export_table(small, full))
    halo = _halo_report(halo_setup, halo_tables, database)
    proposals = _proposal_report(proposal_results)
    print(
        f"\nRESULT dashboard_s={dashboard['dashboard_s']} {_export_result(small, full)} "
        f"all_panels_s={dashboard['all_panels_s']} "
        f"human_agreement_s={dashboard['human_agreement_s']} "
        f"arena_ranking_s={dashboard['arena_ranking_s']} "
        f"arena_battles={dashboard['arena_battles']} "
        f"arena_study_s={dashboard['arena_study_s']} "
        f"{halo} {proposals} "
        f"database={database}"
    )


if __name__ == "__main__":
    main()
