"""Judge-ranking benchmark: an LLM pairwise judge's verdicts on a 75,000-comparison run as the
ranking tables' battles (``battles=judge``), read by streaming the verdicts
(``selectors.run_pairwise_battles``, two rows per comparison) and by counting them in the
database (``selectors.run_pairwise_battle_counts``, one ``GROUP BY``), and the tables the
dashboard draws from them.

Data (generated, seeded, in a fresh database): the full-size corpus of bench/corpus_import.py
(198 dialogues, 624 triggers); a finished run of 16 models at every trigger (vanilla, one
sample); every two models compared at every trigger (120 pairs × 624 = 74,880 comparisons);
two pairwise judges, each in both orders (299,520 verdicts): the winner drawn from the models'
abilities as Bradley–Terry strengths (15 % ties, a third of them both bad), and in one order
replaced by "the reply shown first wins" 7 % (judge 0) or 25 % (judge 1) of the time — position
bias, so some comparisons flip.

Timed (warm, median of 3): the stream and the counts, each into ``Battles``; the
``arena-ranking`` table from a fresh request (the counts, the fit, 1,000 resamples); both ranking
panels as the dashboard draws them (one fit); the ``pairwise-judge-consistency`` table (it reads
every verdict). Peak RSS of the process.

    python bench/judge_ranking.py                                  # SQLite in a temp folder
    DATABASE_URL=postgres://…/scratch python bench/judge_ranking.py  # a scratch PostgreSQL db

It empties the runs of the database it is given. Ends with ``RESULT stream_s= counts_s= …``.
"""

import itertools
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
N_MODELS, TIE_SHARE, SEED = 16, 0.15, 20261216
FIRST_WINS = (0.07, 0.25)  # each judge's share of verdicts replaced by "the first shown wins"


def _django() -> None:
    import django

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proactweb.settings")
    django.setup()


def _setup(corpus: Path) -> dict:
    import numpy as np
    from django.core.management import call_command
    from django.db import connection

    from annotation.models import Answer, Assignment, Rater, Study, StudyItem
    from benchmark.corpus.importer import corpus_import
    from benchmark.models import (
        EvaluationRun,
        EvaluationUnit,
        ModelEndpoint,
        PairwiseComparison,
        PairwiseJudgment,
        RunStatus,
        Trigger,
    )
    from benchmark.providers.replay import REPLAY

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    for model in (Answer, Assignment, StudyItem, Rater, Study):  # they PROTECT the runs
        model.objects.all().delete()
    EvaluationRun.objects.all().delete()
    with corpus.open("rb") as stream:
        corpus_import(stream=stream, source=corpus.name)
    endpoints = [
        ModelEndpoint.objects.get_or_create(
            name=name, defaults={"display_name": name, "provider": REPLAY, "model_name": name}
        )[0]
        for name in [f"bench-model-{i:02d}" for i in range(N_MODELS)]
        + [f"bench-pairwise-judge-{j}" for j in range(len(FIRST_WINS))]
    ]
    models, judges = endpoints[:N_MODELS], endpoints[N_MODELS:]
    run = EvaluationRun.objects.create(
        name="bench judge-ranking run",
        status=RunStatus.DONE,
        conditions=["vanilla"],
        primary_judge=judges[0],
    )
    run.endpoints.set(models)
    run.pairwise_judges.set(judges)
    triggers = list(Trigger.objects.order_by("id").values_list("id", flat=True))
    units = EvaluationUnit.objects.bulk_create(
        (
            EvaluationUnit(run=run, trigger_id=t, endpoint=m, condition="vanilla", state="done")
            for t in triggers
            for m in models
        ),
        batch_size=5000,
    )
    at = {(u.trigger_id, u.endpoint_id): u.pk for u in units}
    comparisons = PairwiseComparison.objects.bulk_create(
        (
            PairwiseComparison(
                run=run, trigger_id=t, unit_a_id=at[(t, a.pk)], unit_b_id=at[(t, b.pk)]
            )
            for t in triggers
            for a, b in itertools.combinations(models, 2)
        ),
        batch_size=5000,
    )
    rng = np.random.default_rng(SEED)
    strength = np.linspace(-1.5, 1.5, N_MODELS)
    index = {m.pk: i for i, m in enumerate(models)}
    model_of = {u.pk: index[u.endpoint_id] for u in units}
    n = len(comparisons)
    a = np.array([model_of[c.unit_a_id] for c in comparisons])
    b = np.array([model_of[c.unit_b_id] for c in comparisons])
    p_a = (1 - TIE_SHARE) / (1 + np.exp(strength[b] - strength[a]))
    draw = rng.random(n)
    truth = np.where(draw < p_a, 0, np.where(draw < 1 - TIE_SHARE, 1, 2))
    truth = np.where((truth == 2) & (rng.random(n) < 1 / 3), 3, truth)
    winners = ("model_a", "model_b", "tie", "tie (bothbad)")
    verdicts = 0
    for judge, first_wins in zip(judges, FIRST_WINS, strict=True):
        biased_order = rng.integers(0, 2, n)  # the order whose verdict may go to the first
        biased = rng.random(n) < first_wins
        rows = []
        for k, comparison in enumerate(comparisons):
            for o, order in enumerate(("ab", "ba")):
                code = truth[k]
                if biased[k] and biased_order[k] == o:
                    code = o  # A when A is shown first (ab), B when B is (ba)
                rows.append(
                    PairwiseJudgment(
                        comparison=comparison,
                        judge=judge,
                        judge_name=judge.name,
                        order=order,
                        state="done",
                        winner=winners[code],
                    )
                )
        PairwiseJudgment.objects.bulk_create(rows, batch_size=5000)
        verdicts += len(rows)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # what autovacuum does within a minute of a bulk load
    return {"comparisons": n, "verdicts": verdicts, "setup_s": time.perf_counter() - started}


def _timed() -> dict:
    from collections import Counter

    from benchmark.models import EvaluationRun
    from stats import selectors, tables
    from stats.interfaces import Battles
    from stats.selectors import TableRequest, VerdictSource

    run = EvaluationRun.objects.get(name="bench judge-ranking run")
    judge = "bench-pairwise-judge-0"

    def request() -> TableRequest:
        return TableRequest(run=run, battles="judge", verdicts=VerdictSource("judge", judge))

    def once() -> dict:
        out: dict = {}
        mark = time.perf_counter()
        skipped: Counter = Counter()
        streamed = Battles.from_records(
            (b.source_a, b.source_b, b.winner)
            for b in selectors.run_pairwise_battles(run=run, judge=judge, skipped=skipped)
        )
        out["stream_s"] = time.perf_counter() - mark
        mark = time.perf_counter()
        left_out: Counter = Counter()
        counts = selectors.run_pairwise_battle_counts(run=run, judge=judge, skipped=left_out)
        counted = Battles.from_counts((c.source_a, c.source_b, c.winner, c.count) for c in counts)
        out["counts_s"] = time.perf_counter() - mark
        assert len(counted) == len(streamed) and left_out == skipped, (left_out, skipped)
        out["battles"], out["inconsistent"], out["count_rows"] = (
            len(counted),
            left_out["inconsistent"],
            len(counts),
        )
        mark = time.perf_counter()
        ranking = tables.build("arena-ranking", request())
        out["ranking_s"] = time.perf_counter() - mark
        assert len(ranking.rows) == N_MODELS
        mark = time.perf_counter()
        shared = request()
        for name in ("arena-ranking", "arena-pairs"):
            tables.build(name, shared)
        out["panels_s"] = time.perf_counter() - mark
        mark = time.perf_counter()
        tables.build("pairwise-judge-consistency", TableRequest(run=run))
        out["consistency_s"] = time.perf_counter() - mark
        return out

    once()
    runs = [once() for _ in range(3)]
    return {
        key: statistics.median(r[key] for r in runs) if key.endswith("_s") else runs[0][key]
        for key in runs[0]
    }


def main() -> None:
    database = (
        "PostgreSQL" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "SQLite"
    )
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from corpus_import import generate_corpus

    with tempfile.TemporaryDirectory(prefix="proactbench-bench-judge-") as tmp:
        os.environ["PROACTWEB_VAR_DIR"] = tmp
        _django()
        corpus = Path(tmp) / "corpus.jsonl"
        generate_corpus(corpus)
        setup = _setup(corpus)
        timed = _timed()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\nJudge ranking ({database}; {setup['comparisons']:,} comparisons, "
        f"{setup['verdicts']:,} verdicts of 2 judges written in {setup['setup_s']:.1f} s; "
        f"judge 0: {timed['battles']:,} consistent, {timed['inconsistent']:,} flips)\n"
    )
    print("| step (warm, median of 3) | seconds |\n| --- | ---: |")
    for key, label in (
        ("stream_s", "battles streamed (two verdict rows per comparison) into Battles"),
        ("counts_s", f"battles counted by one GROUP BY ({timed['count_rows']} rows) into Battles"),
        ("ranking_s", "arena-ranking, battles=judge: counts, fit, 1,000 resamples"),
        ("panels_s", "both ranking panels, as the dashboard draws them (one fit)"),
        ("consistency_s", "pairwise-judge-consistency (reads every verdict of both judges)"),
    ):
        print(f"| {label} | {timed[key]:.3f} |")
    print(
        f"\nRESULT stream_s={timed['stream_s']:.3f} counts_s={timed['counts_s']:.3f} "
        f"ranking_s={timed['ranking_s']:.3f} panels_s={timed['panels_s']:.3f} "
        f"consistency_s={timed['consistency_s']:.3f} comparisons={setup['comparisons']} "
        f"peak_rss_mb={peak:.0f} database={database}"
    )


if __name__ == "__main__":
    main()
