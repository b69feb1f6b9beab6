"""HALO diagnosis tables that compare (docs/statistics.md, "HALO diagnosis"): two models on
their shared checkpoints, effort beside quality across models, and the annotators with each
other, per question. The per-model tables are in ``halo``."""

from __future__ import annotations

from typing import Any

from stats import charts, selectors
from stats.compute import halo
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
from stats.tables.halo import NAN, ci_values, judgments_for

PAIRED = Bootstrap(halo.PAIRED_RESAMPLES, "shared checkpoints, per pair and figure")
REPLIES = Bootstrap(halo.REPLY_RESAMPLES, "replies (each keeping all its answers)")


# --- Paired comparison ------------------------------------------------------------------------

MEASURE_NAMES = {
    "intervention": "intervention rate (L1–L3)",
    "acceptability": "acceptability",
    "accepted_action": "accepted interventions (share of judgments)",
    "accepted_restraint": "accepted L0 replies (share of judgments)",
}
PAIRED_COLUMNS = (
    Column("model_a", "str", "The first model of the pair (by name)."),
    Column("model_b", "str", "The second."),
    Column("n_checkpoints", "int", "Shared checkpoints: both models judged there."),
    *(
        column
        for measure, what in MEASURE_NAMES.items()
        for column in (
            Column(f"{measure}_a", "float", f"Model a's {what}, mean over shared checkpoints."),
            Column(f"{measure}_b", "float", f"Model b's {what}."),
            Column(f"delta_{measure}", "float", f"a − b: {what}."),
            *ci_columns(f"delta_{measure}", f"Δ {what} ({PAIRED.caption})"),
        )
    ),
)


def build_paired(request: selectors.TableRequest) -> Built:
    judgments, notes = judgments_for(request, "halo-paired")
    out = []
    for r in halo.paired_table(judgments, seed=request.seed, resamples=PAIRED.resamples):
        row: dict[str, Any] = {
            "model_a": r.model_a,
            "model_b": r.model_b,
            "n_checkpoints": r.n_checkpoints,
        }
        for measure in MEASURE_NAMES:
            row[f"{measure}_a"], row[f"{measure}_b"] = r.a[measure], r.b[measure]
            row[f"delta_{measure}"] = r.delta[measure]
            row.update(ci_values(f"delta_{measure}", r.ci[measure]))
        out.append(row)
    if not out:
        notes.append("no two models were judged at a common checkpoint")
    return out, [
        *notes,
        "per checkpoint, each model's share over its judgments there; each shared checkpoint "
        "weighs the same; Δ acceptability = Δ accepted interventions + Δ accepted restraint",
    ]


register(
    TableSpec(
        name="halo-paired",
        title="HALO: paired comparison of two models",
        description="Every pair of models on the checkpoints where both were judged: Δ "
        "intervention rate and Δ acceptability (and its split into accepted action and accepted "
        "restraint), with paired bootstrap CIs over the shared checkpoints.",
        columns=PAIRED_COLUMNS,
        needs=STUDY,
        build=build_paired,
        display=Display(
            empty="No two models share a checkpoint yet.",
            cells=(
                Cell("Model a", "model_a"),
                Cell("Model b", "model_b"),
                Cell("Shared", "n_checkpoints"),
                ci_cell("Δ intervenes [CI]", "delta_intervention", "pct"),
                ci_cell("Δ acceptable [CI]", "delta_acceptability", "pct"),
                ci_cell("Δ accepted action", "delta_accepted_action", "pct"),
                ci_cell("Δ accepted restraint", "delta_accepted_restraint", "pct"),
            ),
        ),
        bootstrap=PAIRED,
    )
)


# --- Effort beside quality --------------------------------------------------------------------

EFFORT_COLUMNS = (
    Column("model", "str", "The reply's source (a model's handle)."),
    Column("n_replies", "int", "Distinct replies judged."),
    Column("n_judgments", "int", "Judgments."),
    Column("acceptability", "float", "Share of judgments accepting the reply."),
    *(
        column
        for measure in halo.EFFORT_MEASURES
        for column in (
            Column(f"n_with_{measure}", "int", f"Replies that recorded {measure}."),
            Column(f"mean_{measure}", "float", f"Mean {measure} over those replies."),
        )
    ),
)


def build_effort(request: selectors.TableRequest) -> Built:
    judgments, notes = judgments_for(request, "halo-effort")
    out = []
    for r in halo.effort_table(judgments):
        row: dict[str, Any] = {
            "model": r.model,
            "n_replies": r.n_replies,
            "n_judgments": r.n_judgments,
            "acceptability": r.acceptability,
        }
        for measure in halo.EFFORT_MEASURES:
            row[f"n_with_{measure}"] = r.n_with[measure]
            row[f"mean_{measure}"] = r.mean[measure]
        out.append(row)
    return out, [
        *notes,
        "effort is the reply's own (reasoning tokens summed over its calls, retrieval rounds "
        "completed), averaged over its model's replies that recorded it; see "
        "halo-effort-correlation for its association with acceptability",
    ]


register(
    TableSpec(
        name="halo-effort",
        title="HALO: effort beside quality",
        description="Per model: acceptability beside the mean reasoning tokens and retrieval "
        "rounds of its replies.",
        columns=EFFORT_COLUMNS,
        needs=STUDY,
        build=build_effort,
        display=Display(
            cells=(
                Cell("Model", "model"),
                Cell("Replies", "n_replies"),
                Cell("Acceptable %", "acceptability", "pct"),
                Cell(
                    "Reasoning tokens (replies)",
                    "mean_reasoning_tokens",
                    "num",
                    digits=0,
                    aside=Aside("({n_with_reasoning_tokens})", when=lambda r: True),
                ),
                Cell(
                    "Retrieval rounds (replies)",
                    "mean_retrieval_rounds",
                    "num",
                    digits=2,
                    aside=Aside("({n_with_retrieval_rounds})", when=lambda r: True),
                ),
            ),
        ),
        charts=lambda table: [
            charts.scatter(
                [
                    (r["model"], r["acceptability"], r[f"mean_{measure}"], NAN, NAN)
                    for r in table.rows
                ],
                title=f"Mean {measure.replace('_', ' ')} against acceptability",
                x_label="acceptable",
                y_label=measure.replace("_", " "),
            )
            for measure in halo.EFFORT_MEASURES
            if any(r[f"n_with_{measure}"] for r in table.rows)
        ],
    )
)

EFFORT_CORRELATION_COLUMNS = (
    Column("measure", "str", "reasoning_tokens or retrieval_rounds (the model's mean)."),
    Column("method", "str", "pearson or spearman."),
    Column("n_models", "int", "Models with the measure and a judgment."),
    Column("r", "float", "Pearson r or Spearman ρ with acceptability, at model level."),
    *ci_columns("r", "r (Fisher z; Spearman's with SE sqrt(1.06 / (n − 3)); n ≥ 4)"),
    Column("p_value", "float", "Two-sided p (scipy.stats.pearsonr / spearmanr)."),
    Column("note", "str", "Why r or its interval is missing, when it is."),
)


def build_effort_correlation(request: selectors.TableRequest) -> Built:
    judgments, notes = judgments_for(request, "halo-effort-correlation")
    rows = halo.effort_correlation_table(halo.effort_table(judgments))
    return [
        {
            "measure": r.measure,
            "method": r.method,
            "n_models": r.correlation.n,
            "r": r.correlation.r,
            **ci_values("r", r.correlation.ci),
            "p_value": r.correlation.p_value,
            "note": r.note,
        }
        for r in rows
    ], [
        *notes,
        "a model-level association over few points (one per model), not a causal effect",
    ]


register(
    TableSpec(
        name="halo-effort-correlation",
        title="HALO: effort and acceptability across models",
        description="Pearson r and Spearman ρ between a model's mean reasoning tokens (or "
        "retrieval rounds) and its acceptability, with Fisher-z CIs where at least four models "
        "allow, and a note where they do not.",
        columns=EFFORT_CORRELATION_COLUMNS,
        needs=STUDY,
        build=build_effort_correlation,
        display=Display(
            cells=(
                Cell("Effort", "measure"),
                Cell("Method", "method", "title"),
                Cell("Models", "n_models"),
                ci_cell("r [CI]", "r"),
                Cell("p", "p_value", "pvalue"),
                Cell("Note", "note"),
            ),
        ),
    )
)


# --- Agreement per question -------------------------------------------------------------------

AGREEMENT_COLUMNS = (
    Column(
        "question",
        "str",
        "level, acceptable, timing, intensity, or issue_<name> (an other issue flagged or not).",
    ),
    Column("alpha_level", "str", "ordinal (the level) or nominal: how alpha weighs disagreement."),
    Column("n_replies", "int", "Replies with at least two answers to the question."),
    Column("n_ratings", "int", "Answers to it on those replies."),
    Column("percent_agreement", "float", "Mean over those replies of the agreeing answer pairs."),
    Column("alpha", "float", "Krippendorff's alpha."),
    *ci_columns("alpha", f"alpha ({REPLIES.caption})"),
    Column("fleiss_kappa", "float", "Fleiss' kappa."),
    *ci_columns("fleiss_kappa", "Fleiss' kappa"),
)


def build_agreement(request: selectors.TableRequest) -> Built:
    judgments, notes = judgments_for(request, "halo-agreement")
    rows = halo.agreement_table(judgments, seed=request.seed, resamples=REPLIES.resamples)
    return [
        {
            "question": r.question,
            "alpha_level": "ordinal" if r.ordinal else "nominal",
            "n_replies": r.n_units,
            "n_ratings": r.n_ratings,
            "percent_agreement": r.percent_agreement,
            "alpha": r.alpha,
            **ci_values("alpha", r.alpha_ci),
            "fleiss_kappa": r.fleiss_kappa,
            **ci_values("fleiss_kappa", r.fleiss_ci),
        }
        for r in rows
    ], [
        *notes,
        "timing and intensity are asked of rejected interventions, other issues of rejected "
        "replies: their agreement is over the annotators who were asked (conditional)",
        "HALO reports no inter-annotator agreement (one judgment per reply); with k = 1 these "
        "are empty",
    ]


register(
    TableSpec(
        name="halo-agreement",
        title="HALO: agreement per question",
        description="Per question (level, acceptable, timing, intensity, each other issue): "
        "percent agreement, Krippendorff's alpha and Fleiss' kappa over the replies two or more "
        "annotators answered, with reply-bootstrap CIs.",
        columns=AGREEMENT_COLUMNS,
        needs=STUDY,
        build=build_agreement,
        display=Display(
            cells=(
                Cell("Question", "question"),
                Cell("Replies (answers)", "n_replies", also="n_ratings"),
                Cell("Agreement %", "percent_agreement", "pct"),
                ci_cell("α [CI]", "alpha"),
                ci_cell("Fleiss κ [CI]", "fleiss_kappa"),
            ),
        ),
        bootstrap=REPLIES,
    )
)
