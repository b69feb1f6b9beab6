"""Failure modes: per model, its labelled fails and each failure mode's share, and a pooled row
over every model's fails (docs/statistics.md, "Failure modes")."""

from __future__ import annotations

from typing import Any

from benchmark.vocabulary import FAILURE_MODES, FailureMode
from stats import charts, selectors
from stats.compute.failure_modes import POOLED, FailureModeRow, failure_mode_table
from stats.tables.base import STUDY, Built, Cell, Column, Display, Table, TableSpec, register

NAME = "failure-modes"
LABELS = {mode.value: mode.label for mode in FailureMode}
CHART_CATEGORIES = [(m, LABELS[m], f"mode-{i}") for i, m in enumerate(FAILURE_MODES)]

COLUMNS = (
    Column("model", "str", "The model, or POOLED for every model's fails together."),
    Column("n_fails", "int", "Failed replies with a failure-mode label."),
    *(Column(f"n_{m}", "int", f"Fails labelled {m}.") for m in FAILURE_MODES),
    *(Column(f"share_{m}", "float", f"n_{m} / n_fails.") for m in FAILURE_MODES),
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


def build(request: selectors.TableRequest) -> Built:
    labels, notes = selectors.failure_mode_labels_for(request, table=NAME)
    return failure_mode_rows(failure_mode_table(labels)), notes


def failure_mode_chart(table: Table) -> list[charts.Chart]:
    return [
        charts.stacked_shares(
            [(r["model"], [(m, r[f"share_{m}"]) for m in FAILURE_MODES]) for r in table.rows],
            title="Failure modes of failed replies",
            categories=CHART_CATEGORIES,
        )
    ]


FAILURE_MODE_TABLE = register(
    TableSpec(
        name=NAME,
        title="Failure modes",
        description="Per model: labelled fails and the share of each failure mode; pooled row.",
        columns=COLUMNS,
        needs=STUDY,
        build=build,
        display=Display(
            overall=("model", POOLED),
            cells=(
                Cell("Model", "model"),
                Cell("Fails", "n_fails"),
                *(Cell(f"{LABELS[m]} %", f"share_{m}", "pct") for m in FAILURE_MODES),
            ),
        ),
        charts=failure_mode_chart,
    )
)
