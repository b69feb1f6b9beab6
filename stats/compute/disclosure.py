"""Disclosure distance: does a RECOVERY reply fail more when the facts it should draw on were
disclosed long ago? ``d = t_trigger − t_first_disclosure`` (turns) for each RECOVERY trigger;
per model, OLS of the reply's outcome (score 1 / 0.5 / 0, a linear probability model) on d:
slope with SE, CI and p. A significantly negative slope would point at retrieval over
distance; the source finds none for most models (the gap is policy, not memory)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stats.compute.resampling import CONFIDENCE
from stats.compute.style import OlsFit, ols_fit


@dataclass(frozen=True)
class DisclosureRow:
    model: str
    n_without_distance: int
    mean_distance: float
    mean_outcome: float
    fit: OlsFit


def disclosure_distance_table(
    *,
    models: np.ndarray,
    distances: np.ndarray,
    outcomes: np.ndarray,
    level: float = CONFIDENCE,
) -> list[DisclosureRow]:
    """Inputs aligned per scored RECOVERY reply; a NaN distance (no anchor known) is left out
    and counted."""
    models = np.asarray(models)
    distances = np.asarray(distances, dtype=float)
    outcomes = np.asarray(outcomes, dtype=float)
    rows = []
    for model in sorted(set(models.tolist())):
        mine = models == model
        known = mine & ~np.isnan(distances)
        rows.append(
            DisclosureRow(
                model=str(model),
                n_without_distance=int((mine & np.isnan(distances)).sum()),
                mean_distance=float(distances[known].mean()) if known.any() else float("nan"),
                mean_outcome=float(outcomes[known].mean()) if known.any() else float("nan"),
                fit=ols_fit(distances[known], outcomes[known], level=level),
            )
        )
    return rows
