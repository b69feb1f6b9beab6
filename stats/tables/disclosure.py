"""Disclosure distance: per model, OLS of the RECOVERY outcome on d = trigger turn − first
disclosure turn (docs/statistics.md, "Disclosure distance")."""

from __future__ import annotations

from typing import Any

from benchmark.models import TriggerType
from stats import selectors
from stats.compute.disclosure import DisclosureRow, disclosure_distance_table
from stats.tables.base import (
    RUN,
    Built,
    Cell,
    Column,
    Display,
    TableSpec,
    ci_columns,
    model_columns,
    register,
)

COLUMNS = (
    *model_columns(),
    Column("n", "int", "Scored RECOVERY replies with a known disclosure distance."),
    Column(
        "n_without_distance", "int", "Scored RECOVERY replies whose trigger has no known anchor."
    ),
    Column("mean_distance", "float", "Mean d = trigger turn - first disclosure turn."),
    Column("mean_outcome", "float", "Mean outcome (score 1 / 0.5 / 0)."),
    Column("slope", "float", "OLS slope of the outcome on d (per turn)."),
    Column("slope_se", "float", "Standard error of the slope."),
    *ci_columns("slope", "the slope"),
    Column("slope_p", "float", "Two-sided p of slope = 0."),
    Column("intercept", "float", "OLS intercept."),
)


def disclosure_rows(rows: list[DisclosureRow], *, display: dict[str, str]) -> list[dict[str, Any]]:
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


def build(request: selectors.TableRequest) -> Built:
    replies = selectors.replies_for(request)
    keep = (replies.trigger_type == TriggerType.RECOVERY) & (replies.verdict >= 0)
    distances = selectors.disclosure_distances(
        replies.trigger_id[keep], replies.dialogue_id[keep], replies.turn[keep]
    )
    rows = disclosure_distance_table(
        models=replies.model[keep],
        distances=distances,
        outcomes=replies.verdict[keep] / 2,
    )
    return disclosure_rows(rows, display=replies.display), []


DISCLOSURE_DISTANCE = register(
    TableSpec(
        name="disclosure-distance",
        title="Disclosure distance",
        description="Per model: OLS of the RECOVERY outcome on the disclosure distance d.",
        columns=COLUMNS,
        needs=RUN,
        build=build,
        display=Display(
            heading="Disclosure distance (RECOVERY)",
            cells=(
                Cell("Model", "model_display"),
                Cell("n", "n"),
                Cell("No anchor", "n_without_distance"),
                Cell("Mean d (turns)", "mean_distance", "num", digits=1),
                Cell("Mean score", "mean_outcome", "num", digits=2),
                Cell(
                    "Slope per turn [95% CI]",
                    "slope",
                    "num",
                    digits=3,
                    ci=("slope_ci_low", "slope_ci_high"),
                ),
                Cell("p", "slope_p", "pvalue"),
            ),
        ),
    )
)
