"""Failure modes as an LLM classifier labels them: the paper's Table 2 for every run. Per model,
the RECOVERY replies its primary judge failed that the run's classifier labelled, the share of
each failure mode with a 95% Wilson interval, and the replies it could not classify; a pooled
row (docs/statistics.md, "Failure modes (LLM classifier)"). The computation is the human
table's (``stats.compute.failure_modes``); only the labels' source differs."""

from __future__ import annotations

from typing import Any

from benchmark.vocabulary import FAILURE_MODES
from stats import selectors
from stats.compute.failure_modes import POOLED, failure_mode_table
from stats.tables.base import RUN, Built, Cell, Column, Display, TableSpec, register
from stats.tables.failure_modes import LABELS, failure_mode_chart

NAME = "failure-modes-llm"

COLUMNS = (
    Column("classifier", "str", "The run's failure-mode classifier."),
    Column("model", "str", "The model, or POOLED for every model's fails together."),
    Column("n_classified", "int", "Failed RECOVERY replies the classifier labelled."),
    Column(
        "n_classifier_errors",
        "int",
        "Failed RECOVERY replies it could not label (unparseable output or a quote not in the "
        "reply after k tries): not in any share.",
    ),
    *(Column(f"n_{m}", "int", f"Replies labelled {m}.") for m in FAILURE_MODES),
    *(
        column
        for m in FAILURE_MODES
        for column in (
            Column(f"share_{m}", "float", f"n_{m} / n_classified."),
            Column(f"share_{m}_ci_low", "float", f"Lower end of the 95% Wilson CI of share_{m}."),
            Column(f"share_{m}_ci_high", "float", f"Upper end of the 95% Wilson CI of share_{m}."),
        )
    ),
)


def build(request: selectors.TableRequest) -> Built:
    found, notes = selectors.classifications_for(request)
    if not found.classifier:
        return [], notes
    rows: list[dict[str, Any]] = []
    for r in failure_mode_table(found.labels):
        errors = sum(found.errors.values()) if r.model == POOLED else found.errors.get(r.model, 0)
        row: dict[str, Any] = {
            "classifier": found.classifier,
            "model": r.model,
            "n_classified": r.n_fails,
            "n_classifier_errors": errors,
        }
        for m in FAILURE_MODES:
            row[f"n_{m}"] = r.counts.get(m, 0)
            row[f"share_{m}"] = r.shares.get(m, float("nan"))
            row[f"share_{m}_ci_low"], row[f"share_{m}_ci_high"] = r.cis[m]
        rows.append(row)
    # A model whose every reply was a classifier error still gets its row.
    for model in sorted(set(found.errors) - {r["model"] for r in rows}):
        rows.insert(
            len(rows) - 1,
            {
                "classifier": found.classifier,
                "model": model,
                "n_classified": 0,
                "n_classifier_errors": found.errors[model],
                **{f"n_{m}": 0 for m in FAILURE_MODES},
                **{
                    f"share_{m}{end}": float("nan")
                    for m in FAILURE_MODES
                    for end in ("", "_ci_low", "_ci_high")
                },
            },
        )
    return rows, [*notes, "CI: Wilson score interval of each share, per row"]


FAILURE_MODES_LLM_TABLE = register(
    TableSpec(
        name=NAME,
        title="Failure modes (LLM classifier)",
        description="Per model and pooled: the failed RECOVERY replies the run's failure-mode "
        "classifier labelled, each mode's share with a Wilson CI, and classifier errors.",
        columns=COLUMNS,
        needs=RUN,
        build=build,
        display=Display(
            empty="No failure-mode classifications for this run.",
            overall=("model", POOLED),
            cells=(
                Cell("Model", "model"),
                Cell("Classified", "n_classified"),
                Cell("Errors", "n_classifier_errors"),
                *(
                    Cell(
                        f"{LABELS[m]} % [CI]",
                        f"share_{m}",
                        "pct",
                        ci=(f"share_{m}_ci_low", f"share_{m}_ci_high"),
                    )
                    for m in FAILURE_MODES
                ),
            ),
        ),
        charts=failure_mode_chart,
    )
)
