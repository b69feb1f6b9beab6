"""The failure-mode classifier against people: on the replies a failure-mode study of the run
labelled (each reply's annotators' majority; tied replies dropped) and the classifier labelled
too — accuracy with a seeded item-bootstrap CI, Cohen's κ over the five modes and one-vs-rest
per mode, and the confusion matrix, one row per people's label (docs/statistics.md, "Failure
modes: classifier vs people")."""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmark.vocabulary import FAILURE_MODES
from stats import selectors
from stats.compute.failure_modes import ALL, classifier_vs_people
from stats.compute.resampling import HUMAN_RESAMPLES, rng_for
from stats.tables.base import (
    RUN,
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
from stats.tables.failure_modes import LABELS

NAME = "failure-modes-llm-vs-human"
BOOTSTRAP = Bootstrap(HUMAN_RESAMPLES, "replies")

COLUMNS = (
    Column("reference", "str", "The people's labels: 'study N (majority)'."),
    Column("classifier", "str", "The run's failure-mode classifier."),
    Column(
        "category",
        "str",
        "ALL: every reply both labelled; a failure mode: the replies people gave that label.",
    ),
    Column("n", "int", "Replies in the row."),
    Column(
        "accuracy",
        "float",
        "Share of the row's replies the classifier labels as people do (on a mode's row: that "
        "mode's recall).",
    ),
    *ci_columns("accuracy", f"accuracy ({BOOTSTRAP.resamples:,} reply-bootstrap resamples)"),
    Column(
        "kappa",
        "float",
        "Cohen's kappa, people vs classifier: over the five modes (ALL), or the mode against "
        "the rest over every reply both labelled.",
    ),
    *ci_columns("kappa", "that kappa"),
    *(
        Column(
            f"classifier_{m}",
            "int",
            f"Replies of the row the classifier labelled {m} (a mode's row: a row of the "
            "confusion matrix, people × classifier).",
        )
        for m in FAILURE_MODES
    ),
)


def build(request: selectors.TableRequest) -> Built:
    found, notes = selectors.classifications_for(request)
    references, reference_notes = selectors.failure_mode_references(request)
    notes = [*notes, *reference_notes]
    if not found.classifier:
        return [], notes
    classified = {
        int(unit): selectors.FAILURE_MODE_CODES[mode]
        for unit, mode in zip(
            found.labels.item_id if found.labels.item_id is not None else [],
            found.labels.category.tolist(),
            strict=True,
        )
    }
    rows: list[dict[str, Any]] = []
    for reference in references:
        shared = sorted(set(reference.by_unit) & set(classified))
        if not shared:
            notes.append(f"{reference.name}: no reply both the study and the classifier labelled")
            continue
        people = np.array([selectors.FAILURE_MODE_CODES[reference.by_unit[u]] for u in shared])
        labels = np.array([classified[u] for u in shared])
        for r in classifier_vs_people(
            labels,
            people,
            FAILURE_MODES,
            rng_for_row=lambda category, ref=reference.name: rng_for(
                request.seed, NAME, ref, found.classifier, category
            ),
            resamples=BOOTSTRAP.resamples,
        ):
            rows.append(
                {
                    "reference": reference.name,
                    "classifier": found.classifier,
                    "category": r.category,
                    "n": r.n,
                    "accuracy": r.accuracy,
                    "accuracy_ci_low": r.accuracy_ci[0],
                    "accuracy_ci_high": r.accuracy_ci[1],
                    "kappa": r.kappa,
                    "kappa_ci_low": r.kappa_ci[0],
                    "kappa_ci_high": r.kappa_ci[1],
                    **{f"classifier_{m}": r.counts[m] for m in FAILURE_MODES},
                }
            )
    return rows, notes


FAILURE_MODES_LLM_VS_HUMAN_TABLE = register(
    TableSpec(
        name=NAME,
        title="Failure modes: classifier vs people",
        description="The run's failure-mode classifier against a failure-mode study's majority "
        "labels on the same replies: accuracy with a bootstrap CI, Cohen's kappa overall and "
        "one-vs-rest per mode, confusion matrix (people × classifier).",
        columns=COLUMNS,
        needs=RUN,
        build=build,
        display=Display(
            empty="No reply labelled by both the classifier and a failure-mode study.",
            overall=("category", ALL),
            derive={"category_label": lambda row: LABELS.get(row["category"], row["category"])},
            cells=(
                Cell("Reference", "reference"),
                Cell("People's label", "category_label"),
                Cell("Replies", "n"),
                ci_cell("Accuracy % [CI]", "accuracy", "pct"),
                ci_cell("κ [CI]", "kappa"),
                *(Cell(f"→ {LABELS[m]}", f"classifier_{m}") for m in FAILURE_MODES),
            ),
        ),
        bootstrap=BOOTSTRAP,
    )
)
