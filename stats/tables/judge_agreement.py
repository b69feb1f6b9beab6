"""Judge agreement: per trigger type and overall, for each pair of a run's judges, raw
agreement, Cohen's kappa, Krippendorff's alpha and Kendall's tau between their rankings; with
three or more judges an all-judges alpha (docs/statistics.md, "Judge agreement")."""

from __future__ import annotations

import numpy as np

from stats import selectors
from stats.compute import agreement
from stats.compute.leaderboard import ALL, TYPE_ORDER, score_matrix
from stats.tables.base import RUN, Aside, Built, Cell, Column, Display, TableSpec, register

COLUMNS = (
    Column("trigger_type", "str", "ALL or a trigger type."),
    Column("judge_a", "str", "First judge (ALL on the all-judges row)."),
    Column("judge_b", "str", "Second judge (ALL on the all-judges row)."),
    Column(
        "n_units", "int", "Replies both judges scored (all-judges row: scored by at least two)."
    ),
    Column("agreement", "float", "Share of those replies with the same verdict."),
    Column("cohen_kappa", "float", "Cohen's kappa, unweighted."),
    Column("linear_kappa", "float", "Cohen's kappa, linearly weighted (Fail < Partial < Pass)."),
    Column("alpha_nominal", "float", "Krippendorff's alpha, nominal."),
    Column("alpha_ordinal", "float", "Krippendorff's alpha, ordinal (Fail < Partial < Pass)."),
    Column(
        "kendall_tau", "float", "Kendall's tau-b between the judges' model rankings (weighted)."
    ),
    Column("kendall_p", "float", "Two-sided p of kendall_tau."),
    Column("n_models", "int", "Models ranked by both judges."),
)


def build(request: selectors.TableRequest) -> Built:
    run = selectors.require_run(request)
    replies = selectors.replies_for(request)  # the units; their verdicts are not used here
    judges, matrix = selectors.judge_matrix(replies=replies, run=run, condition=request.condition)
    rows = []
    types = [ALL] + [t for t in TYPE_ORDER if np.any(replies.trigger_type == t)]
    for trigger_type in types:
        mask = (
            np.ones(replies.unit_id.size, bool)
            if trigger_type == ALL
            else (replies.trigger_type == trigger_type)
        )
        sub = matrix[mask]
        scores = {}
        for j, judge in enumerate(judges):
            names, _, values = score_matrix(
                models=replies.model[mask],
                trigger_types=replies.trigger_type[mask],
                verdicts=sub[:, j],
            )
            scores[judge] = dict(zip(names, values[:, 0], strict=True))
        models = sorted(set(replies.model[mask].tolist()))
        for a in range(len(judges)):
            for b in range(a + 1, len(judges)):
                x, y = sub[:, a], sub[:, b]
                both = (x >= 0) & (y >= 0)
                counts = agreement.label_counts(sub[:, [a, b]], 3)
                tau = agreement.kendall_tau(
                    np.array([scores[judges[a]].get(m, np.nan) for m in models]),
                    np.array([scores[judges[b]].get(m, np.nan) for m in models]),
                )
                rows.append(
                    {
                        "trigger_type": trigger_type,
                        "judge_a": judges[a],
                        "judge_b": judges[b],
                        "n_units": int(both.sum()),
                        "agreement": float(np.mean(x[both] == y[both])) if both.any() else np.nan,
                        "cohen_kappa": agreement.cohen_kappa(x, y, 3),
                        "linear_kappa": agreement.cohen_kappa(x, y, 3, "linear"),
                        "alpha_nominal": agreement.krippendorff_alpha(counts, "nominal"),
                        "alpha_ordinal": agreement.krippendorff_alpha(counts, "ordinal"),
                        "kendall_tau": tau.tau,
                        "kendall_p": tau.p_value,
                        "n_models": tau.n,
                    }
                )
        if len(judges) > 2:
            counts = agreement.label_counts(sub, 3)
            rows.append(
                {
                    "trigger_type": trigger_type,
                    "judge_a": ALL,
                    "judge_b": ALL,
                    "n_units": int((counts.sum(axis=1) >= 2).sum()),
                    "agreement": np.nan,
                    "cohen_kappa": np.nan,
                    "linear_kappa": np.nan,
                    "alpha_nominal": agreement.krippendorff_alpha(counts, "nominal"),
                    "alpha_ordinal": agreement.krippendorff_alpha(counts, "ordinal"),
                    "kendall_tau": np.nan,
                    "kendall_p": np.nan,
                    "n_models": None,
                }
            )
    notes = [] if len(judges) > 1 else [f"run {run.pk} has fewer than two judges"]
    return rows, notes


def _judges(row: dict) -> str:
    if row["judge_a"] == ALL:
        return "all judges"
    return f"{row['judge_a']} · {row['judge_b']}"


JUDGE_AGREEMENT = register(
    TableSpec(
        name="judge-agreement",
        title="Judge agreement",
        description="Cohen's kappa (unweighted, linear) per judge pair, Krippendorff's alpha, "
        "Kendall's tau between the judges' rankings.",
        columns=COLUMNS,
        needs=RUN,
        build=build,
        display=Display(
            derive={"judges": _judges},
            cells=(
                Cell("Triggers", "trigger_type", "title"),
                Cell("Judges", "judges"),
                Cell("n", "n_units"),
                Cell("Agreement %", "agreement", "pct"),
                Cell("Cohen κ", "cohen_kappa", "num"),
                Cell("Linear κ", "linear_kappa", "num"),
                Cell("α ordinal", "alpha_ordinal", "num"),
                Cell(
                    "Kendall τ (rankings)",
                    "kendall_tau",
                    "num",
                    aside=Aside(
                        "({n_models} models, p {kendall_p:pvalue})",
                        when=lambda r: bool(r["n_models"]),
                    ),
                ),
            ),
        ),
    )
)
