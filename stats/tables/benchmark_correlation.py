"""External benchmarks: Pearson r of each trigger type's per-model weighted score with each
uploaded benchmark, Fisher-z CIs, Holm-adjusted p, and a mean r per type with a model bootstrap
CI (docs/statistics.md, "External benchmarks")."""

from __future__ import annotations

from typing import Any

from stats import selectors
from stats.compute.correlation import CorrelationRow, MeanCorrelationRow, benchmark_correlations
from stats.compute.leaderboard import score_matrix
from stats.compute.resampling import LEADERBOARD_RESAMPLES
from stats.tables.base import (
    RUN,
    Bootstrap,
    Built,
    Cell,
    Column,
    Display,
    TableSpec,
    register,
)

MEAN = "(mean)"
METRIC = "weighted"  # the per-model score correlated: the weighted score
BOOTSTRAP = Bootstrap(LEADERBOARD_RESAMPLES, "models (the mean r's CI)")

COLUMNS = (
    Column("trigger_type", "str", "ALL or a trigger type: whose per-model scores are correlated."),
    Column("benchmark", "str", "The external benchmark, or (mean) for the mean r of the type."),
    Column("n_models", "int", "Models with both scores."),
    Column("n_benchmarks", "int", "On (mean) rows: benchmarks averaged."),
    Column("r", "float", "Pearson r (on (mean) rows: the mean r over benchmarks)."),
    Column("ci_low", "float", "95% CI low: Fisher z; on (mean) rows a model bootstrap."),
    Column("ci_high", "float", "95% CI high."),
    Column("p_value", "float", "Two-sided p of r = 0."),
    Column("p_holm", "float", "Holm-Bonferroni adjusted p within the trigger type's tests."),
)


def correlation_rows(
    rows: list[CorrelationRow], means: list[MeanCorrelationRow]
) -> list[dict[str, Any]]:
    nan = float("nan")
    out = []
    for type_name in dict.fromkeys(r.trigger_type for r in rows):
        for r in rows:
            if r.trigger_type != type_name:
                continue
            c = r.correlation
            out.append(
                {
                    "trigger_type": r.trigger_type,
                    "benchmark": r.benchmark,
                    "n_models": c.n,
                    "n_benchmarks": 1,
                    "r": c.r,
                    "ci_low": c.ci[0],
                    "ci_high": c.ci[1],
                    "p_value": c.p_value,
                    "p_holm": r.p_holm,
                }
            )
        for m in means:
            if m.trigger_type == type_name:
                out.append(
                    {
                        "trigger_type": m.trigger_type,
                        "benchmark": MEAN,
                        "n_models": None,
                        "n_benchmarks": m.n_benchmarks,
                        "r": m.mean_r,
                        "ci_low": m.ci[0],
                        "ci_high": m.ci[1],
                        "p_value": nan,
                        "p_holm": nan,
                    }
                )
    return out


def build(request: selectors.TableRequest) -> Built:
    replies = selectors.replies_for(request)
    names, types, scores = score_matrix(
        models=replies.model,
        trigger_types=replies.trigger_type,
        verdicts=replies.verdict,
        metric=METRIC,
    )
    benchmarks, external = selectors.benchmark_scores(names)
    rows, means = benchmark_correlations(
        type_scores=scores,
        type_names=types,
        benchmark_scores=external,
        benchmark_names=benchmarks,
        seed=request.seed,
        resamples=BOOTSTRAP.resamples,
    )
    notes = [] if benchmarks else ["no external benchmark scores uploaded for these models"]
    return correlation_rows(rows, means), notes


BENCHMARK_CORRELATION = register(
    TableSpec(
        name="benchmark-correlation",
        title="External benchmark correlation",
        description="Pearson r of each trigger type's per-model score with each uploaded "
        "benchmark; Fisher-z CI, Holm-Bonferroni p; mean r per type.",
        columns=COLUMNS,
        needs=RUN,
        build=build,
        display=Display(
            heading="External benchmarks",
            overall=("benchmark", MEAN),
            note_link=("upload a CSV", "stats:benchmark_scores"),
            cells=(
                Cell("Triggers", "trigger_type", "title"),
                Cell("Benchmark", "benchmark"),
                # On (mean) rows: how many benchmarks the mean is over.
                Cell("Models", "n_models", fallback="n_benchmarks"),
                Cell("r [95% CI]", "r", "num", digits=2, ci=("ci_low", "ci_high")),
                Cell("p", "p_value", "pvalue"),
                Cell("p (Holm)", "p_holm", "pvalue"),
            ),
        ),
        bootstrap=BOOTSTRAP,
    )
)
