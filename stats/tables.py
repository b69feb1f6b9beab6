"""Every statistics table the Workbench serves, with stable, documented columns.

A ``Table`` is what the dashboard shows, the REST API returns (JSON or CSV) and
``export_stats`` writes: named columns with a type and a description (the API schema and
docs/statistics.md are generated from the same descriptions), rows as dicts. Rates and shares
are proportions (0–1), never percentages; a value that is undefined (no data, a degenerate
resample) is NaN here, ``null`` in JSON and an empty field in CSV.

This module turns the pure functions' results into rows; it does not touch the ORM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmark.vocabulary import FAILURE_MODES, VERDICT_ORDER
from stats.compute.correlation import CorrelationRow, MeanCorrelationRow
from stats.compute.disclosure import DisclosureRow
from stats.compute.failure_modes import FailureModeRow
from stats.compute.human import Estimate, HumanAgreementRow
from stats.compute.leaderboard import LeaderboardRow
from stats.compute.preference import AnnotatorRow, PreferenceRow
from stats.compute.style import StyleSensitivity


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # str, int, float, bool
    description: str


@dataclass
class Table:
    name: str
    title: str
    columns: tuple[Column, ...]
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def as_json(self) -> dict[str, Any]:
        """JSON-ready: NaN becomes null (JSON has no NaN)."""
        return {
            "table": self.name,
            "title": self.title,
            "params": self.params,
            "columns": self.column_names,
            "rows": [{k: json_value(row.get(k)) for k in self.column_names} for row in self.rows],
            "notes": self.notes,
        }


def json_value(value: Any) -> Any:
    if isinstance(value, np.generic):  # NumPy scalars as Python ones
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _c(name: str, kind: str, description: str) -> Column:
    return Column(name, kind, description)


def _ci(prefix: str, what: str) -> tuple[Column, Column]:
    return (
        _c(f"{prefix}_ci_low", "float", f"Lower end of the 95% CI of {what}."),
        _c(f"{prefix}_ci_high", "float", f"Upper end of the 95% CI of {what}."),
    )


def _model_columns() -> tuple[Column, Column]:
    return (
        _c("model", "str", "The model's endpoint handle (unique)."),
        _c("model_display", "str", "The model's display name."),
    )


# --- Leaderboard ------------------------------------------------------------------------------

LEADERBOARD = (
    *_model_columns(),
    _c("trigger_type", "str", "ALL (every trigger, micro-averaged) or EMERGENT/CRITICAL/RECOVERY."),
    _c("condition", "str", "vanilla or rubric_injected."),
    _c("verdicts", "str", "Verdict source: primary, adjudicated, or a judge's handle."),
    _c("n_expected", "int", "Replies in the cell, scored or not (SKIPPED, missing, errors)."),
    _c("n", "int", "Scored replies (PASS + PARTIAL + FAIL)."),
    _c("coverage", "float", "n / n_expected."),
    _c("n_pass", "int", "PASS verdicts."),
    _c("n_partial", "int", "PARTIAL verdicts."),
    _c("n_fail", "int", "FAIL verdicts."),
    _c("pass_rate", "float", "n_pass / n."),
    *_ci("pass", "the pass rate (1,000 bootstrap resamples of triggers)"),
    _c("partial_rate", "float", "n_partial / n."),
    *_ci("partial", "the partial rate"),
    _c("weighted_score", "float", "(n_pass + 0.5 n_partial) / n."),
    *_ci("weighted", "the weighted score"),
)


def leaderboard_rows(
    rows: list[LeaderboardRow], *, display: dict[str, str], condition: str, verdicts: str
) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        s = row.scores
        out.append(
            {
                "model": row.model,
                "model_display": display.get(row.model, row.model),
                "trigger_type": row.trigger_type,
                "condition": condition,
                "verdicts": verdicts,
                "n_expected": s.n_expected,
                "n": s.n,
                "coverage": s.coverage,
                "n_pass": s.n_pass,
                "n_partial": s.n_partial,
                "n_fail": s.n_fail,
                "pass_rate": s.pass_rate,
                "pass_ci_low": s.pass_ci[0],
                "pass_ci_high": s.pass_ci[1],
                "partial_rate": s.partial_rate,
                "partial_ci_low": s.partial_ci[0],
                "partial_ci_high": s.partial_ci[1],
                "weighted_score": s.weighted_score,
                "weighted_ci_low": s.weighted_ci[0],
                "weighted_ci_high": s.weighted_ci[1],
            }
        )
    return out


# --- Judge agreement --------------------------------------------------------------------------

JUDGE_AGREEMENT = (
    _c("trigger_type", "str", "ALL or a trigger type."),
    _c("judge_a", "str", "First judge (ALL on the all-judges row)."),
    _c("judge_b", "str", "Second judge (ALL on the all-judges row)."),
    _c("n_units", "int", "Replies both judges scored (all-judges row: scored by at least two)."),
    _c("agreement", "float", "Share of those replies with the same verdict."),
    _c("cohen_kappa", "float", "Cohen's kappa, unweighted."),
    _c("linear_kappa", "float", "Cohen's kappa, linearly weighted (Fail < Partial < Pass)."),
    _c("alpha_nominal", "float", "Krippendorff's alpha, nominal."),
    _c("alpha_ordinal", "float", "Krippendorff's alpha, ordinal (Fail < Partial < Pass)."),
    _c("kendall_tau", "float", "Kendall's tau-b between the judges' model rankings (weighted)."),
    _c("kendall_p", "float", "Two-sided p of kendall_tau."),
    _c("n_models", "int", "Models ranked by both judges."),
)

# --- Style sensitivity ------------------------------------------------------------------------

STYLE_SENSITIVITY = (
    *_model_columns(),
    _c("configuration", "str", "What the configurations are: style or phase."),
    _c("n_configurations", "int", "Configurations with triggers for this model (OLS points)."),
    _c("pass_rate", "float", "The model's pass rate over those triggers."),
    _c("slope", "float", "b_m: OLS slope of the model's logits on the mean logit."),
    _c("slope_se", "float", "Standard error of b_m."),
    *_ci("slope", "b_m (t distribution)"),
    _c("slope_p", "float", "Two-sided p of b_m = 0."),
    _c("intercept", "float", "a_m: OLS intercept."),
    _c("r_squared", "float", "R² of the fit."),
)

STYLE_LOGITS = (
    *_model_columns(),
    _c("configuration", "str", "The style's index (1-24) or the phase (trigger type)."),
    _c("n", "int", "Scored triggers of the model in this configuration."),
    _c("k", "int", "Of which passed."),
    _c("logit", "float", "log((k + 0.5) / (n - k + 0.5))."),
    _c("difficulty", "float", "Mean logit of every model in this configuration."),
)


def style_rows(
    result: StyleSensitivity,
    *,
    display: dict[str, str],
    configuration: str,
    pass_rates: dict[str, float],
) -> list[dict[str, Any]]:
    return [
        {
            "model": model,
            "model_display": display.get(model, model),
            "configuration": configuration,
            "n_configurations": fit.n,
            "pass_rate": pass_rates.get(model, float("nan")),
            "slope": fit.slope,
            "slope_se": fit.slope_se,
            "slope_ci_low": fit.slope_ci[0],
            "slope_ci_high": fit.slope_ci[1],
            "slope_p": fit.slope_p,
            "intercept": fit.intercept,
            "r_squared": fit.r_squared,
        }
        for model, fit in zip(result.models, result.fits, strict=True)
    ]


def style_logit_rows(
    result: StyleSensitivity, *, display: dict[str, str], counts: dict
) -> list[dict[str, Any]]:
    out = []
    for i, model in enumerate(result.models):
        for j, configuration in enumerate(result.configurations):
            n, k = counts.get((model, configuration), (0, 0))
            if not n:
                continue
            out.append(
                {
                    "model": model,
                    "model_display": display.get(model, model),
                    "configuration": str(configuration),
                    "n": n,
                    "k": k,
                    "logit": float(result.logits[i, j]),
                    "difficulty": float(result.difficulty[j]),
                }
            )
    return out


# --- Disclosure distance ----------------------------------------------------------------------

DISCLOSURE_DISTANCE = (
    *_model_columns(),
    _c("n", "int", "Scored RECOVERY replies with a known disclosure distance."),
    _c("n_without_distance", "int", "Scored RECOVERY replies whose trigger has no known anchor."),
    _c("mean_distance", "float", "Mean d = trigger turn - first disclosure turn."),
    _c("mean_outcome", "float", "Mean outcome (score 1 / 0.5 / 0)."),
    _c("slope", "float", "OLS slope of the outcome on d (per turn)."),
    _c("slope_se", "float", "Standard error of the slope."),
    *_ci("slope", "the slope"),
    _c("slope_p", "float", "Two-sided p of slope = 0."),
    _c("intercept", "float", "OLS intercept."),
)


def disclosure_rows(rows: list[DisclosureRow], *, display: dict[str, str]) -> list[dict]:
    return [
        {
            "model": r.model,
            "model_display": display.get(r.model, r.model),
            "n": r.fit.n,
            "n_without_distance": r.n_without_distance,
            "mean_distance": r.mean_distance,
            "mean_outcome": r.mean_outcome,
            "slope": r.fit.slope,
            "slope_se": r.fit.slope_se,
            "slope_ci_low": r.fit.slope_ci[0],
            "slope_ci_high": r.fit.slope_ci[1],
            "slope_p": r.fit.slope_p,
            "intercept": r.fit.intercept,
        }
        for r in rows
    ]


# --- Benchmark correlation --------------------------------------------------------------------

MEAN = "(mean)"

BENCHMARK_CORRELATION = (
    _c("trigger_type", "str", "ALL or a trigger type: whose per-model scores are correlated."),
    _c("benchmark", "str", "The external benchmark, or (mean) for the mean r of the type."),
    _c("n_models", "int", "Models with both scores."),
    _c("n_benchmarks", "int", "On (mean) rows: benchmarks averaged."),
    _c("r", "float", "Pearson r (on (mean) rows: the mean r over benchmarks)."),
    _c("ci_low", "float", "95% CI low: Fisher z; on (mean) rows a model bootstrap."),
    _c("ci_high", "float", "95% CI high."),
    _c("p_value", "float", "Two-sided p of r = 0."),
    _c("p_holm", "float", "Holm-Bonferroni adjusted p within the trigger type's tests."),
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


# --- Human agreement --------------------------------------------------------------------------

HUMAN_AGREEMENT = (
    _c("group", "str", "ALL or the items' trigger type."),
    _c("n_items", "int", "Items with at least one label."),
    _c("n_ratings", "int", "Labels."),
    _c("n_raters", "int", "People who labelled."),
    _c("alpha_ordinal", "float", "Krippendorff's alpha, ordinal (empty for unordered labels)."),
    *_ci("alpha_ordinal", "ordinal alpha (10,000 item-bootstrap resamples)"),
    _c("alpha_nominal", "float", "Krippendorff's alpha, nominal."),
    *_ci("alpha_nominal", "nominal alpha"),
    _c("fleiss_kappa", "float", "Fleiss' kappa (items with at least two labels)."),
    *_ci("fleiss_kappa", "Fleiss' kappa"),
    _c("gold_accuracy", "float", "Share of labels equal to the item's gold label."),
    _c("n_gold_compared", "int", "Labels compared with gold."),
    _c("n_majority", "int", "Items with a majority label and a judge verdict."),
    _c("n_majority_ties", "int", "Items left out because their top labels tie."),
    _c("majority_kappa", "float", "Cohen's kappa, majority label vs judge, unweighted."),
    *_ci("majority_kappa", "that kappa"),
    _c("majority_kappa_quadratic", "float", "The same, quadratic-weighted."),
    *_ci("majority_kappa_quadratic", "the quadratic-weighted kappa"),
    *(
        _c(f"majority_{m}_judge_{j}", "int", f"Items: majority label {m}, judge {j}.")
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


# --- Preference -------------------------------------------------------------------------------

PREFERENCE = (
    _c("raters", "str", "all, or without_excluded (raters a study excluded left out)."),
    _c("stratum", "str", "ALL or the judge's verdict on the vanilla reply (PASS/PARTIAL/FAIL)."),
    _c("n_items", "int", "Items judged."),
    _c("n_judgements", "int", "Judgements, ties included."),
    _c("n_ties", "int", "Tie judgements (left out of the rate)."),
    _c("n_decided", "int", "Non-tie judgements."),
    _c("n_injected", "int", "Judgements preferring the rubric-injected reply."),
    _c("injected_rate", "float", "n_injected / n_decided."),
    _c("p_value", "float", "Two-sided exact binomial p of injected_rate = 0.5."),
    _c("wilson_low", "float", "Wilson 95% interval, low."),
    _c("wilson_high", "float", "Wilson 95% interval, high."),
    _c("bootstrap_low", "float", "Item-clustered percentile bootstrap 95% CI, low (10,000)."),
    _c("bootstrap_high", "float", "Item-clustered percentile bootstrap 95% CI, high."),
    _c("left_share", "float", "Position bias: share of non-tie judgements choosing the left."),
    _c("left_p", "float", "Two-sided exact binomial p of left_share = 0.5."),
)


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


PREFERENCE_RATERS = (
    _c("annotator", "str", "The rater."),
    _c("n_judgements", "int", "Judgements, ties included."),
    _c("n_ties", "int", "Tie judgements."),
    _c("injected_rate", "float", "Share of non-tie judgements preferring rubric-injected."),
    _c("left_share", "float", "Share of non-tie judgements choosing the left response."),
    _c("median_seconds", "float", "Median time per judgement."),
    _c("excluded", "bool", "The study excluded this rater."),
)


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


# --- Failure modes ----------------------------------------------------------------------------

FAILURE_MODE_COLUMNS = (
    _c("model", "str", "The model, or POOLED for every model's fails together."),
    _c("n_fails", "int", "Failed replies with a failure-mode label."),
    *(_c(f"n_{m}", "int", f"Fails labelled {m}.") for m in FAILURE_MODES),
    *(_c(f"share_{m}", "float", f"n_{m} / n_fails.") for m in FAILURE_MODES),
)


def failure_mode_rows(rows: list[FailureModeRow]) -> list[dict[str, Any]]:
    return [
        {
            "model": r.model,
            "n_fails": r.n_fails,
            **{f"n_{m}": r.counts.get(m, 0) for m in FAILURE_MODES},
            **{f"share_{m}": r.shares.get(m, float("nan")) for m in FAILURE_MODES},
        }
        for r in rows
    ]


# --- Registry ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableSpec:
    name: str
    title: str
    columns: tuple[Column, ...]
    source: str  # "run" (judgments of a run) or "study" (human annotations)
    description: str


SPECS = {
    spec.name: spec
    for spec in (
        TableSpec(
            "leaderboard",
            "Leaderboard",
            LEADERBOARD,
            "run",
            "Per model x trigger type and overall: n, pass rate, partial rate, weighted score, "
            "bootstrap CIs.",
        ),
        TableSpec(
            "judge-agreement",
            "Judge agreement",
            JUDGE_AGREEMENT,
            "run",
            "Cohen's kappa (unweighted, linear) per judge pair, Krippendorff's alpha, Kendall's "
            "tau between the judges' rankings.",
        ),
        TableSpec(
            "style-sensitivity",
            "Style sensitivity",
            STYLE_SENSITIVITY,
            "run",
            "Per model: OLS of its Laplace logits per style on the mean logit (b_m).",
        ),
        TableSpec(
            "style-logits",
            "Style logits",
            STYLE_LOGITS,
            "run",
            "Per model x style: k, n, Laplace logit and the style's mean logit.",
        ),
        TableSpec(
            "disclosure-distance",
            "Disclosure distance",
            DISCLOSURE_DISTANCE,
            "run",
            "Per model: OLS of the RECOVERY outcome on the disclosure distance d.",
        ),
        TableSpec(
            "benchmark-correlation",
            "External benchmark correlation",
            BENCHMARK_CORRELATION,
            "run",
            "Pearson r of each trigger type's per-model score with each uploaded benchmark; "
            "Fisher-z CI, Holm-Bonferroni p; mean r per type.",
        ),
        TableSpec(
            "human-agreement",
            "Human agreement",
            HUMAN_AGREEMENT,
            "study",
            "A study's labels (any kind; Study 1's direct ratings): alpha (ordinal, nominal), "
            "Fleiss' kappa, gold accuracy, majority label vs judge (kappa, confusion matrix), "
            "per trigger type.",
        ),
        TableSpec(
            "preference",
            "Pairwise preference",
            PREFERENCE,
            "study",
            "Rubric-injected vs vanilla: win rate without ties, exact binomial p, Wilson and "
            "item-clustered bootstrap CIs, per stratum, position bias.",
        ),
        TableSpec(
            "preference-raters",
            "Pairwise preference per rater",
            PREFERENCE_RATERS,
            "study",
            "Per rater: n, ties, injected rate, left share, median time.",
        ),
        TableSpec(
            "failure-modes",
            "Failure modes",
            FAILURE_MODE_COLUMNS,
            "study",
            "Per model: labelled fails and the share of each failure mode; pooled row.",
        ),
    )
}
