"""Statistics benchmark: the dashboard's numbers at full scale, and a ~200,000-row raw export.

Data (generated, in a fresh database): the full-size corpus of bench/corpus_import.py (198
dialogues, 624 triggers), a finished run of 16 models × 624 triggers judged by 3 judges (29,952
judgments, verdicts drawn from each model's ability, the judges agreeing most of the time),
6 external benchmark scores per model, and a second run of 16 models × 624 triggers × 2
conditions × 3 samples × 3 judges (179,712 judgments) so the export has ~210,000 rows.
Human votes have no tables yet (the annotation app, issue #4): 5,000 pairwise votes and 5,000
direct ratings are generated as the ``stats.interfaces`` structures its selectors will fill.

Targets (issue #5): every number on the dashboard in ≤ 1 s — the five run panels (leaderboard
with 1,000-resample CIs, judge agreement, style sensitivity, disclosure distance, benchmark
correlation: database reads included), the preference table (10,000 item-clustered resamples
per row) and per-rater table on the 5,000 votes, and the failure-mode table; the raw CSV
export streamed with peak memory flat in the row count (the full export and a 30,000-row one
are compared, each in its own process). Human agreement (Study 1's table, not a dashboard
panel) is timed beside it.

    python bench/stats.py                    # embedded default (SQLite in a temp folder)
    DATABASE_URL=postgres://…/scratch python bench/stats.py   # a scratch PostgreSQL database

Ends with ``RESULT dashboard_s= export_rows_per_s= export_peak_rss_mb= …``.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
N_MODELS, N_JUDGES, N_VOTES = 16, 3, 5000


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

    from benchmark.corpus.importer import corpus_import
    from benchmark.models import (
        Dialogue,
        EvaluationRun,
        EvaluationUnit,
        Judgment,
        JudgmentState,
        ModelEndpoint,
        Provider,
        RunStatus,
        Trigger,
    )
    from stats.models import ExternalBenchmarkScore

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
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
            defaults={"display_name": name, "provider": Provider.REPLAY, "model_name": name},
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
    return {"judgments": total, "setup_s": round(time.perf_counter() - started, 1)}


def _verdict_probabilities(logit: float) -> list[float]:
    import math

    p_pass = 1 / (1 + math.exp(-logit))
    p_partial = (1 - p_pass) * 0.35
    return [1 - p_pass - p_partial, p_partial, p_pass]


def _human_inputs():
    import numpy as np

    from stats.interfaces import (
        FAILURE_MODES,
        INJECTED,
        TIE,
        VANILLA,
        FailureModeLabel,
        FailureModeLabels,
        LabelMatrix,
        PreferenceJudgements,
        PreferenceRecord,
        RatedItem,
        Rating,
    )

    rng = np.random.default_rng(9)
    votes = PreferenceJudgements.from_records(
        PreferenceRecord(
            item_id=f"item-{i % 1250}",
            annotator_id=f"P{i % 40:02d}",
            choice=rng.choice([INJECTED, VANILLA, TIE], p=[0.78, 0.2, 0.02]),
            injected_on_left=bool(rng.random() < 0.5),
            seconds=float(rng.integers(15, 600)),
            vanilla_verdict=("PASS", "PARTIAL", "FAIL")[i % 1250 % 3],
        )
        for i in range(N_VOTES)
    )
    items = [
        RatedItem(f"r{i}", ("EMERGENT", "CRITICAL", "RECOVERY")[i % 3], "PASS") for i in range(1000)
    ]
    ratings = [
        Rating(
            f"r{i % 1000}", f"A{(i * 7) % 60:02d}", ("Fail", "Partial", "Pass")[rng.integers(0, 3)]
        )
        for i in range(N_VOTES)
    ]
    fails = FailureModeLabels.from_records(
        FailureModeLabel(f"bench-model-{i % 8:02d}", f"f{i}", FAILURE_MODES[rng.integers(0, 5)])
        for i in range(1079)
    )
    return votes, LabelMatrix.from_records(ratings, items), fails


def _dashboard() -> dict:
    """Child process: time every number of the dashboard (warm: imports and the first query
    done once before timing), three times; report the median."""
    _django()
    from benchmark.models import EvaluationRun
    from stats.compute.failure_modes import failure_mode_table
    from stats.compute.human import human_agreement_table
    from stats.compute.preference import preference_by_annotator, preference_table
    from stats.dashboard import dashboard_panels
    from stats.selectors import TableRequest

    run = EvaluationRun.objects.get(name="bench dashboard run")
    votes, ratings, fails = _human_inputs()

    def once() -> dict:
        timings = {}
        started = time.perf_counter()
        panels = dashboard_panels(TableRequest(run=run))
        timings["run_panels_s"] = time.perf_counter() - started
        errors = [p.error for p in panels.values() if p.error]
        assert not errors, errors
        mark = time.perf_counter()
        preference_table(votes, excluded_annotators=frozenset({"P07"}))
        preference_by_annotator(votes, excluded_annotators=frozenset({"P07"}))
        failure_mode_table(fails)
        timings["preference_s"] = time.perf_counter() - mark
        timings["dashboard_s"] = time.perf_counter() - started
        mark = time.perf_counter()
        human_agreement_table(ratings)
        timings["human_agreement_s"] = time.perf_counter() - mark
        timings["leaderboard_rows"] = len(panels["leaderboard"].table.rows)
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
    started = time.perf_counter()
    response = client.get(url)
    size = lines = 0
    for chunk in response.streaming_content:
        size += len(chunk)
        lines += chunk.count(b"\r\n")
    elapsed = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rows = lines - 1  # the header; no field holds a CRLF here
    return {
        "rows": rows,
        "mb": round(size / 1e6, 1),
        "export_s": round(elapsed, 2),
        "rows_per_s": round(rows / elapsed),
        "rss_before_mb": round(before_kb / 1024, 1),
        "peak_rss_mb": round(peak_kb / 1024, 1),
    }


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
    for flag in ("--setup", "--dashboard", "--export"):
        parser.add_argument(flag, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setup:
        print(json.dumps(_setup(Path(args.setup))))
        return
    if args.dashboard:
        print(json.dumps(_dashboard()))
        return
    if args.export is not None:
        print(json.dumps(_export("" if args.export == "all" else args.export)))
        return

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from corpus_import import generate_corpus

    with tempfile.TemporaryDirectory(prefix="proactbench-bench-stats-") as tmp:
        env = {**os.environ, "PROACTWEB_VAR_DIR": tmp}
        corpus = Path(tmp) / "corpus.jsonl"
        generate_corpus(corpus)
        setup = _child("setup", str(corpus), env)
        dashboard = _child("dashboard", "1", env)
        small = _child("export", "bench dashboard run", env)
        full = _child("export", "all", env)
    database = (
        "PostgreSQL" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "SQLite"
    )
    print(
        f"\nStatistics benchmark ({database}; {setup['judgments']:,} judgments written in "
        f"{setup['setup_s']} s)\n"
    )
    print("| dashboard numbers (median of 3, warm) | seconds |\n| --- | ---: |")
    for key, label in (
        (
            "run_panels_s",
            "run panels: leaderboard (64 cells × 1,000 resamples), judge agreement, "
            "style, disclosure, correlation — queries included",
        ),
        (
            "preference_s",
            f"preference on {N_VOTES:,} votes (8 rows × 10,000 resamples), raters, "
            "failure modes (1,079 fails)",
        ),
        ("dashboard_s", "dashboard total"),
        (
            "human_agreement_s",
            f"(Study 1 table, not on the dashboard) human agreement on "
            f"{N_VOTES:,} ratings: 4 rows, five 10,000-resample CIs each",
        ),
    ):
        print(f"| {label} | {dashboard[key]:.3f} |")
    print("\n| raw judgments CSV export | rows | MB | seconds | rows/s | RSS before | peak RSS |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, r in (("one run", small), ("everything", full)):
        print(
            f"| {label} | {r['rows']:,} | {r['mb']} | {r['export_s']} | {r['rows_per_s']:,} | "
            f"{r['rss_before_mb']} MB | {r['peak_rss_mb']} MB |"
        )
    growth = full["peak_rss_mb"] - small["peak_rss_mb"]
    print(
        f"\nRESULT dashboard_s={dashboard['dashboard_s']} export_rows_per_s={full['rows_per_s']} "
        f"export_peak_rss_mb={full['peak_rss_mb']} export_rows={full['rows']} "
        f"export_rss_growth_mb={growth:.1f} human_agreement_s={dashboard['human_agreement_s']} "
        f"database={database}"
    )


if __name__ == "__main__":
    main()
