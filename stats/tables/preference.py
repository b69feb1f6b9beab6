"""Pairwise preference: rubric-injected vs vanilla (de-swapped), overall and per stratum of the
judge's verdict on the vanilla reply, with and without excluded raters; and per rater
(docs/statistics.md, "Pairwise preference")."""

from __future__ import annotations

from typing import Any

from stats import charts, selectors
from stats.compute.preference import (
    ALL,
    AnnotatorRow,
    PreferenceRow,
    preference_by_annotator,
    preference_table,
)
from stats.compute.resampling import HUMAN_RESAMPLES
from stats.tables.base import (
    STUDY,
    Aside,
    Bootstrap,
    Built,
    Cell,
    Column,
    Display,
    Table,
    TableSpec,
    register,
)

BOOTSTRAP = Bootstrap(HUMAN_RESAMPLES, "items (each keeping all its judgements)")

COLUMNS = (
    Column("raters", "str", "all, or without_excluded (raters a study excluded left out)."),
    Column(
        "stratum", "str", "ALL or the judge's verdict on the vanilla reply (PASS/PARTIAL/FAIL)."
    ),
    Column("n_items", "int", "Items judged."),
    Column("n_judgements", "int", "Judgements, ties included."),
    Column("n_ties", "int", "Tie judgements (left out of the rate)."),
    Column("n_decided", "int", "Non-tie judgements."),
    Column("n_injected", "int", "Judgements preferring the rubric-injected reply."),
    Column("injected_rate", "float", "n_injected / n_decided."),
    Column("p_value", "float", "Two-sided exact binomial p of injected_rate = 0.5."),
    Column("wilson_low", "float", "Wilson 95% interval, low."),
    Column("wilson_high", "float", "Wilson 95% interval, high."),
    Column(
        "bootstrap_low",
        "float",
        f"Item-clustered percentile bootstrap 95% CI, low ({BOOTSTRAP.resamples:,}).",
    ),
    Column("bootstrap_high", "float", "Item-clustered percentile bootstrap 95% CI, high."),
    Column("left_share", "float", "Position bias: share of non-tie judgements choosing the left."),
    Column("left_p", "float", "Two-sided exact binomial p of left_share = 0.5."),
)

RATER_COLUMNS = (
    Column("annotator", "str", "The rater."),
    Column("n_judgements", "int", "Judgements, ties included."),
    Column("n_ties", "int", "Tie judgements."),
    Column("injected_rate", "float", "Share of non-tie judgements preferring rubric-injected."),
    Column("left_share", "float", "Share of non-tie judgements choosing the left response."),
    Column("median_seconds", "float", "Median time per judgement."),
    Column("excluded", "bool", "The study excluded this rater."),
)


STREAM_NOTES = {
    "app": "bootstrap stream: the app's (seeded per rater set and stratum, independent of item "
    "order); stream=release draws as the ProactBench release does",
    "release": "bootstrap stream: the ProactBench release's (numpy.random.default_rng(seed) per "
    "figure, items in file order; stream=release with seed 2026 reproduces its published CI)",
}


def preference_rows(rows: list[PreferenceRow]) -> list[dict[str, Any]]:
    return [
        {
            "raters": r.raters,
            "stratum": r.stratum,
            "n_items": r.n_items,
            "n_judgements": r.n_judgements,
            "n_ties": r.n_ties,
            "n_decided": r.injected.n,
            "n_injected": r.injected.k,
            "injected_rate": r.injected.rate,
            "p_value": r.injected.p_value,
            "wilson_low": r.injected.wilson[0],
            "wilson_high": r.injected.wilson[1],
            "bootstrap_low": r.bootstrap_ci[0],
            "bootstrap_high": r.bootstrap_ci[1],
            "left_share": r.left.rate,
            "left_p": r.left.p_value,
        }
        for r in rows
    ]


def preference_rater_rows(rows: list[AnnotatorRow]) -> list[dict[str, Any]]:
    return [
        {
            "annotator": r.annotator_id,
            "n_judgements": r.n_judgements,
            "n_ties": r.n_ties,
            "injected_rate": r.injected_rate,
            "left_share": r.left_share,
            "median_seconds": r.median_seconds,
            "excluded": r.excluded,
        }
        for r in rows
    ]


def build(request: selectors.TableRequest) -> Built:
    judgements, excluded, notes = selectors.preference_for(request, table="preference")
    rows = preference_table(
        judgements,
        excluded_annotators=excluded,
        seed=request.seed,
        resamples=BOOTSTRAP.resamples,
        stream=request.stream,
    )
    return preference_rows(rows), [*notes, STREAM_NOTES[request.stream]]


def build_raters(request: selectors.TableRequest) -> Built:
    judgements, excluded, notes = selectors.preference_for(request, table="preference-raters")
    rows = preference_by_annotator(judgements, excluded_annotators=excluded)
    return preference_rater_rows(rows), notes


def preference_chart(table: Table) -> list[charts.Chart]:
    rows = [r for r in table.rows if r["raters"] == "all"]
    return [
        charts.ci_bars(
            [
                (
                    "All items"
                    if r["stratum"] == ALL
                    else f"Vanilla judged {r['stratum'].title()}",
                    r["injected_rate"],
                    r["bootstrap_low"],
                    r["bootstrap_high"],
                )
                for r in rows
            ],
            title="Prefer the rubric-injected reply (ties excluded; item-clustered 95% CI)",
            reference=0.5,
        )
    ]


PREFERENCE = register(
    TableSpec(
        name="preference",
        title="Pairwise preference",
        description="Rubric-injected vs vanilla: win rate without ties, exact binomial p, Wilson "
        "and item-clustered bootstrap CIs, per stratum, position bias.",
        columns=COLUMNS,
        needs=STUDY,
        build=build,
        display=Display(
            cells=(
                Cell("Raters", "raters"),
                Cell("Stratum", "stratum", "title"),
                Cell("Items", "n_items"),
                Cell("Judgements (ties)", "n_judgements", also="n_ties"),
                Cell("Injected %", "injected_rate", "pct"),
                Cell("p", "p_value", "pvalue"),
                Cell("Wilson", format="pct", ci=("wilson_low", "wilson_high")),
                Cell("Bootstrap", format="pct", ci=("bootstrap_low", "bootstrap_high")),
                Cell("Left %", "left_share", "pct"),
            ),
        ),
        charts=preference_chart,
        bootstrap=BOOTSTRAP,
    )
)

PREFERENCE_RATERS = register(
    TableSpec(
        name="preference-raters",
        title="Pairwise preference per rater",
        description="Per rater: n, ties, injected rate, left share, median time.",
        columns=RATER_COLUMNS,
        needs=STUDY,
        build=build_raters,
        display=Display(
            notes=False,  # the preference panel's notes: the same judgements
            empty="No judgements yet.",
            cells=(
                Cell("Rater", "annotator"),
                Cell("Judgements (ties)", "n_judgements", also="n_ties"),
                Cell("Injected %", "injected_rate", "pct"),
                Cell("Left %", "left_share", "pct"),
                Cell("Median s", "median_seconds", "num", digits=1),
                Cell("Excluded", aside=Aside("excluded", when=lambda r: r["excluded"], badge=True)),
            ),
        ),
    )
)
