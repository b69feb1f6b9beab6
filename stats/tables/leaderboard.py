"""The leaderboard: per model × trigger type and overall, n, pass / partial rates and the
weighted score with bootstrap CIs (docs/statistics.md, "Leaderboard")."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from stats import charts, selectors
from stats.compute.leaderboard import ALL, TYPE_ORDER, LeaderboardRow, leaderboard
from stats.compute.resampling import LEADERBOARD_RESAMPLES
from stats.tables.base import (
    RUN,
    Aside,
    Bootstrap,
    Built,
    Cell,
    Column,
    Display,
    Table,
    TableSpec,
    ci_columns,
    model_columns,
    register,
)

BOOTSTRAP = Bootstrap(LEADERBOARD_RESAMPLES, "triggers")
PHASES = [(t, f"phase-{t.lower()}") for t in TYPE_ORDER]

SCORE_COLUMNS = (
    Column("condition", "str", "vanilla or rubric_injected."),
    Column("verdicts", "str", "Verdict source: primary, adjudicated, or a judge's handle."),
    Column("n_expected", "int", "Replies in the cell, scored or not (SKIPPED, missing, errors)."),
    Column("n", "int", "Scored replies (PASS + PARTIAL + FAIL)."),
    Column("coverage", "float", "n / n_expected."),
    Column("n_pass", "int", "PASS verdicts."),
    Column("n_partial", "int", "PARTIAL verdicts."),
    Column("n_fail", "int", "FAIL verdicts."),
    Column("pass_rate", "float", "n_pass / n."),
    *ci_columns(
        "pass", f"the pass rate ({BOOTSTRAP.resamples:,} bootstrap resamples of {BOOTSTRAP.of})"
    ),
    Column("partial_rate", "float", "n_partial / n."),
    *ci_columns("partial", "the partial rate"),
    Column("weighted_score", "float", "(n_pass + 0.5 n_partial) / n."),
    *ci_columns("weighted", "the weighted score"),
)
"""A cell's figures after what names the cell; the leaderboard by domain has them too."""

COLUMNS = (
    *model_columns(),
    Column(
        "trigger_type",
        "str",
        "ALL (every trigger, micro-averaged) or EMERGENT/CRITICAL/RECOVERY/INTERVENTION.",
    ),
    *SCORE_COLUMNS,
)


def score_fields(
    row: LeaderboardRow, *, display: dict[str, str], condition: str, verdicts: str
) -> dict[str, Any]:
    """The model columns and ``SCORE_COLUMNS`` of one computed row."""
    s = row.scores
    return {
        "model": row.model,
        "model_display": display.get(row.model, row.model),
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


def leaderboard_rows(
    rows: list[LeaderboardRow], *, display: dict[str, str], condition: str, verdicts: str
) -> list[dict[str, Any]]:
    return [
        {
            **score_fields(row, display=display, condition=condition, verdicts=verdicts),
            "trigger_type": row.trigger_type,
        }
        for row in rows
    ]


def build(request: selectors.TableRequest) -> Built:
    replies = selectors.replies_for(request)
    rows = leaderboard(
        models=replies.model,
        trigger_types=replies.trigger_type,
        clusters=replies.trigger_id,
        verdicts=replies.verdict,
        resamples=BOOTSTRAP.resamples,
        seed=request.seed,
    )
    out = leaderboard_rows(
        rows,
        display=replies.display,
        condition=str(request.condition),
        verdicts=request.verdicts.label,
    )
    return out, []


def triggers_link(row: dict[str, Any], request: selectors.TableRequest) -> str:
    """The cell's triggers in the sample viewer: this model, phase (none for ALL), condition
    and verdict source."""
    run = selectors.require_run(request)
    query = {"model": row["model"], "condition": row["condition"]}
    if row["trigger_type"] != ALL:
        query["type"] = row["trigger_type"]
    if request.verdicts.kind != "primary":
        query["verdicts"] = request.verdicts.label
    return f"{reverse('stats:run_triggers', args=[run.pk])}?{urlencode(query)}"


def _label(row: dict) -> str:
    return row.get("model_display") or row["model"]


def leaderboard_charts(table: Table) -> list[charts.Chart]:
    overall = [r for r in table.rows if r["trigger_type"] == ALL]
    present = {r["trigger_type"] for r in table.rows}
    by_model: dict[str, list] = {}
    for row in table.rows:
        if row["trigger_type"] != ALL:
            by_model.setdefault(_label(row), []).append(
                (row["trigger_type"], row["pass_rate"], row["pass_ci_low"], row["pass_ci_high"])
            )
    return [
        charts.ci_bars(
            [(_label(r), r["pass_rate"], r["pass_ci_low"], r["pass_ci_high"]) for r in overall],
            title="Pass rate, all triggers (95% bootstrap CI)",
        ),
        charts.ci_bars(
            [
                (_label(r), r["weighted_score"], r["weighted_ci_low"], r["weighted_ci_high"])
                for r in overall
            ],
            title="Weighted score (Pass 1, Partial 0.5, Fail 0)",
            css="bar alt",
        ),
        charts.grouped_ci_bars(
            list(by_model.items()),
            title="Pass rate by phase (trigger type)",
            # The types present only: a run without INTERVENTION triggers draws as it always did.
            series=[(t, css) for t, css in PHASES if t in present],
        ),
    ]


SCORE_CELLS = (
    Cell("Triggers", "n_expected"),
    Cell(
        "Scored",
        "n",
        aside=Aside(
            "{coverage:pct}%",
            when=lambda r: r["coverage"] < 1,
            badge=True,
            title="coverage: scored / triggers",
        ),
    ),
    Cell("Pass % [95% CI]", "pass_rate", "pct", ci=("pass_ci_low", "pass_ci_high")),
    Cell("Partial %", "partial_rate", "pct"),
    Cell(
        "Weighted % [95% CI]", "weighted_score", "pct", ci=("weighted_ci_low", "weighted_ci_high")
    ),
)
"""The dashboard's cells of ``SCORE_COLUMNS``, after the cell naming the row."""


LEADERBOARD = register(
    TableSpec(
        name="leaderboard",
        title="Leaderboard",
        description="Per model x trigger type and overall: n, pass rate, partial rate, weighted "
        "score, bootstrap CIs.",
        columns=COLUMNS,
        needs=RUN,
        build=build,
        display=Display(
            # A model's ALL row names it; its phase rows, indented, name the trigger type.
            # Each links to its triggers in the sample viewer.
            link=triggers_link,
            overall=("trigger_type", ALL),
            row_class="phase",
            empty="No replies in this condition.",
            cells=(Cell("Model", "trigger_type", "trigger", overall="model_display"), *SCORE_CELLS),
        ),
        charts=leaderboard_charts,
        bootstrap=BOOTSTRAP,
    )
)
