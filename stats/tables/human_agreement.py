"""Human agreement: a study's labels (any kind; Study 1's direct ratings) — Krippendorff's alpha,
Fleiss' kappa, gold accuracy, majority label vs judge — per trigger type and overall
(docs/statistics.md, "Human agreement")."""

from __future__ import annotations

from typing import Any

from benchmark.vocabulary import VERDICT_ORDER
from stats import selectors
from stats.compute.human import Estimate, HumanAgreementRow, human_agreement_table
from stats.compute.resampling import HUMAN_RESAMPLES
from stats.tables.base import (
    STUDY,
    Aside,
    Bootstrap,
    Built,
    Cell,
    Column,
    Display,
    TableSpec,
    ci_cell,
    ci_columns,
    register,
)

NAME = "human-agreement"
BOOTSTRAP = Bootstrap(HUMAN_RESAMPLES, "items")

COLUMNS = (
    Column("group", "str", "ALL or the items' trigger type."),
    Column("n_items", "int", "Items with at least one label."),
    Column("n_ratings", "int", "Labels."),
    Column("n_raters", "int", "People who labelled."),
    Column("alpha_ordinal", "float", "Krippendorff's alpha, ordinal (empty for unordered labels)."),
    *ci_columns(
        "alpha_ordinal", f"ordinal alpha ({BOOTSTRAP.resamples:,} item-bootstrap resamples)"
    ),
    Column("alpha_nominal", "float", "Krippendorff's alpha, nominal."),
    *ci_columns("alpha_nominal", "nominal alpha"),
    Column("fleiss_kappa", "float", "Fleiss' kappa (items with at least two labels)."),
    *ci_columns("fleiss_kappa", "Fleiss' kappa"),
    Column("gold_accuracy", "float", "Share of labels equal to the item's gold label."),
    Column("n_gold_compared", "int", "Labels compared with gold."),
    Column("n_majority", "int", "Items with a majority label and a judge verdict."),
    Column(
        "n_majority_ties",
        "int",
        "Items whose top labels tie: left out with majority=drop, broken Partial > Pass > Fail "
        "with majority=release.",
    ),
    Column("majority_kappa", "float", "Cohen's kappa, majority label vs judge, unweighted."),
    *ci_columns("majority_kappa", "that kappa"),
    Column("majority_kappa_quadratic", "float", "The same, quadratic-weighted."),
    *ci_columns("majority_kappa_quadratic", "the quadratic-weighted kappa"),
    *(
        Column(f"majority_{m}_judge_{j}", "int", f"Items: majority label {m}, judge {j}.")
        for m in VERDICT_ORDER
        for j in VERDICT_ORDER
    ),
)


def _estimate(prefix: str, estimate: Estimate | None) -> dict[str, float]:
    nan = float("nan")
    if estimate is None:
        return {prefix: nan, f"{prefix}_ci_low": nan, f"{prefix}_ci_high": nan}
    return {
        prefix: estimate.value,
        f"{prefix}_ci_low": estimate.ci[0],
        f"{prefix}_ci_high": estimate.ci[1],
    }


def human_agreement_rows(
    rows: list[HumanAgreementRow], categories: tuple[str, ...]
) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        row = {
            "group": r.group,
            "n_items": r.n_items,
            "n_ratings": r.n_ratings,
            "n_raters": r.n_raters,
            **_estimate("alpha_ordinal", r.alpha_ordinal),
            **_estimate("alpha_nominal", r.alpha_nominal),
            **_estimate("fleiss_kappa", r.fleiss_kappa),
            "gold_accuracy": r.gold_accuracy,
            "n_gold_compared": r.n_gold_compared,
            "n_majority": r.n_majority,
            "n_majority_ties": r.n_majority_ties,
            **_estimate("majority_kappa", r.majority_kappa),
            **_estimate("majority_kappa_quadratic", r.majority_kappa_quadratic),
        }
        if tuple(categories) == VERDICT_ORDER:
            for i, m in enumerate(VERDICT_ORDER):
                for j, judge in enumerate(VERDICT_ORDER):
                    row[f"majority_{m}_judge_{judge}"] = int(r.confusion[i, j])
        out.append(row)
    return out


def build(request: selectors.TableRequest) -> Built:
    matrix, notes = selectors.label_matrix_for(request, table=NAME)
    tie_rule = selectors.majority_tie_rule(request, matrix.categories)
    rows = human_agreement_table(
        matrix, seed=request.seed, resamples=BOOTSTRAP.resamples, tie_rule=tie_rule
    )
    return human_agreement_rows(rows, matrix.categories), [
        *notes,
        selectors.majority_note(request),
    ]


HUMAN_AGREEMENT = register(
    TableSpec(
        name=NAME,
        title="Human agreement",
        description="A study's labels (any kind; Study 1's direct ratings): alpha (ordinal, "
        "nominal), Fleiss' kappa, gold accuracy, majority label vs judge (kappa, confusion "
        "matrix), per trigger type.",
        columns=COLUMNS,
        needs=STUDY,
        build=build,
        display=Display(
            cells=(
                Cell("Group", "group", "title"),
                Cell("Items", "n_items"),
                Cell("Ratings (raters)", "n_ratings", also="n_raters"),
                ci_cell("α ordinal [CI]", "alpha_ordinal"),
                ci_cell("α nominal [CI]", "alpha_nominal"),
                ci_cell("Fleiss κ [CI]", "fleiss_kappa"),
                Cell(
                    "Gold accuracy % (n)",
                    "gold_accuracy",
                    "pct",
                    aside=Aside("({n_gold_compared})", when=lambda r: bool(r["n_gold_compared"])),
                ),
                Cell("Majority vs judge κ", "majority_kappa", "num", digits=2),
                Cell("κ quadratic", "majority_kappa_quadratic", "num", digits=2),
                Cell("Ties", "n_majority_ties"),
            ),
        ),
        bootstrap=BOOTSTRAP,
    )
)
