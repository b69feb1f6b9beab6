"""Failure modes of failed replies (the source's Table 2): per model, the number of labelled
fails and the share of each category; then a pooled row over every model's fails (a
micro-average: each fail counts once, so a model with more fails weighs more)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stats.interfaces import FailureModeLabels

POOLED = "POOLED"


@dataclass(frozen=True)
class FailureModeRow:
    model: str
    n_fails: int
    counts: dict[str, int]
    shares: dict[str, float]


def _row(model: str, categories: np.ndarray, names: tuple[str, ...]) -> FailureModeRow:
    counts = {name: int(np.sum(categories == name)) for name in names}
    n = int(categories.size)
    return FailureModeRow(
        model=model,
        n_fails=n,
        counts=counts,
        shares={name: (count / n if n else float("nan")) for name, count in counts.items()},
    )


def failure_mode_table(labels: FailureModeLabels) -> list[FailureModeRow]:
    """One row per model (by name), then ``POOLED``."""
    rows = [
        _row(model, labels.category[labels.model == model], labels.categories)
        for model in sorted(set(labels.model.tolist()))
    ]
    rows.append(_row(POOLED, labels.category, labels.categories))
    return rows
