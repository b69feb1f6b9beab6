"""Pairwise judge vs people: on the pairs of replies of an arena or pairwise study that LLM
pairwise judges compared too (``judge_pairs RUN --pairs study=ID``), each judge's verdict
against the people's majority — accuracy and Cohen's κ over {A better, B better, tie} with
bootstrap CIs over pairs, and the confusion matrix — for its verdict that survives the swap
(the inconsistent pairs counted beside it) and for each order on its own, so that a judge's
position bias shows against people (docs/statistics.md, "Pairwise judge vs people")."""

from __future__ import annotations

from typing import Any

import numpy as np

from stats import selectors
from stats.compute.pairwise_judge_human import (
    CATEGORIES,
    ORDERS,
    JudgeHumanRow,
    judge_vs_people,
    people_labels,
)
from stats.compute.resampling import HUMAN_RESAMPLES
from stats.tables.base import (
    STUDY,
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

NAME = "pairwise-judge-human"
BOOTSTRAP = Bootstrap(HUMAN_RESAMPLES, "pairs (seeded)")
ORDER_LABELS = dict(zip(ORDERS, ("both orders", "A shown first", "B shown first"), strict=True))

COLUMNS = (
    Column("judge", "str", "The LLM pairwise judge, by the name its verdicts are stored under."),
    Column(
        "order",
        "str",
        "Which verdict of the judge: both (the verdict it gives in both orders, where it "
        "survives the swap), ab (its verdict with the item's side A shown first, flips "
        "included), ba (with side B shown first).",
    ),
    Column("n", "int", "Pairs compared: a people's majority and this verdict of the judge."),
    Column(
        "n_inconsistent",
        "int",
        "Pairs with a people's majority on which the judge's verdict flips with the order: left "
        "out of the both row (the same count on each of the judge's rows; the ab and ba rows "
        "include them).",
    ),
    Column(
        "n_no_verdict",
        "int",
        "Pairs with a people's majority and no such verdict of the judge (not asked, a judge "
        "error, or, for both, answered in one order only).",
    ),
    Column("accuracy", "float", "Share of the n pairs where the judge gives the people's label."),
    *ci_columns("accuracy", f"accuracy ({BOOTSTRAP.resamples:,} bootstrap resamples of pairs)"),
    Column("kappa", "float", "Cohen's kappa, people vs judge, unweighted, over A, B, tie."),
    *ci_columns("kappa", "that kappa"),
    *(
        Column(
            f"human_{h}_judge_{j}",
            "int",
            f"Pairs: people's majority {h}, judge {j} (A, B: that side better; tie: tie or both "
            "bad).",
        )
        for h in CATEGORIES
        for j in CATEGORIES
    ),
)


def table_row(r: JudgeHumanRow) -> dict[str, Any]:
    a = r.agreement
    row: dict[str, Any] = {
        "judge": r.judge,
        "order": r.order,
        "n": a.n,
        "n_inconsistent": r.n_inconsistent,
        "n_no_verdict": r.n_no_verdict,
        "accuracy": a.accuracy,
        "accuracy_ci_low": a.accuracy_ci[0],
        "accuracy_ci_high": a.accuracy_ci[1],
        "kappa": a.kappa,
        "kappa_ci_low": a.kappa_ci[0],
        "kappa_ci_high": a.kappa_ci[1],
    }
    for i, h in enumerate(CATEGORIES):
        for j, judge in enumerate(CATEGORIES):
            row[f"human_{h}_judge_{judge}"] = int(a.confusion[i, j])
    return row


def build(request: selectors.TableRequest) -> Built:
    pairs, notes = selectors.judged_pairs_for(request, table=NAME)
    tie_rule = selectors.majority_tie_rule(request, CATEGORIES)
    people = people_labels(pairs.human, tie_rule)
    answered = int((pairs.human.sum(axis=1) > 0).sum())
    labelled = int((people >= 0).sum())
    notes = [
        f"{pairs.item_id.size:,} pairs of replies in the study, {answered:,} answered; people's "
        f"label per pair: the majority of its raters' labels over A better, B better and tie, "
        f"both bad counted as a tie (so in the judges' verdicts too); a pair whose top labels "
        f"tie has none (with an even k, any even split) and is left out: "
        f"{answered - labelled:,} of the answered pairs, {labelled:,} with a label",
        *notes,
    ]
    if not pairs.judges:
        return [], [
            *notes,
            "no LLM pairwise verdict on this study's pairs yet: judge_pairs RUN --judge JUDGE "
            "--pairs study=ID asks for them",
        ]
    rows = [
        table_row(r)
        for judge, (ab, ba) in pairs.judges.items()
        for r in judge_vs_people(
            people, ab, ba, judge=judge, seed=request.seed, resamples=BOOTSTRAP.resamples
        )
    ]
    return rows, [
        *notes,
        "the judge's verdict: both — the one it gives in both orders (a flip, tie against both "
        "bad included, is inconsistent: counted in n_inconsistent, left out of that row); ab / "
        "ba — its verdict with side A / side B shown first, flips included (position bias "
        "shows as more A in ab and more B in ba than people say)",
        f"95% CIs: percentile bootstrap over pairs, {BOOTSTRAP.resamples:,} resamples, seeded "
        f"by judge and order (seed {request.seed})",
    ]


def _disagreements(row: dict[str, Any]) -> str:
    """The off-diagonal cells, e.g. "A→B 3, tie→A 1" (people → judge)."""
    cells = [
        f"{h}→{j} {row[f'human_{h}_judge_{j}']}"
        for h in CATEGORIES
        for j in CATEGORIES
        if h != j and row[f"human_{h}_judge_{j}"]
    ]
    return ", ".join(cells) or "none"


def _inconsistent(row: dict[str, Any]) -> int | float:
    return row["n_inconsistent"] if row["order"] == "both" else np.nan


PAIRWISE_JUDGE_HUMAN = register(
    TableSpec(
        name=NAME,
        title="Pairwise judge vs people",
        description="On the pairs of an arena or pairwise study that LLM pairwise judges "
        "compared too: each judge's verdict (the one that survives the swap, and each order on "
        "its own) against the people's majority — pairs compared, inconsistent pairs, accuracy "
        "and Cohen's kappa over A better / B better / tie (both bad as tie) with bootstrap CIs "
        "over pairs, and the confusion matrix.",
        columns=COLUMNS,
        needs=STUDY,
        build=build,
        display=Display(
            empty="No LLM pairwise verdict on this study's pairs yet.",
            overall=("order", "both"),
            derive={
                "verdict": lambda row: ORDER_LABELS[row["order"]],
                "inconsistent": _inconsistent,
                "disagreements": _disagreements,
            },
            cells=(
                Cell("Judge", "judge"),
                Cell("Verdict", "verdict"),
                Cell("Pairs", "n"),
                Cell("Inconsistent (left out)", "inconsistent"),
                Cell("No verdict", "n_no_verdict"),
                ci_cell("Accuracy % [CI]", "accuracy", "pct"),
                ci_cell("κ [CI]", "kappa"),
                Cell("Disagreements (people → judge)", "disagreements"),
            ),
        ),
        bootstrap=BOOTSTRAP,
    )
)
