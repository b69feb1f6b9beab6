"""A judge's self-consistency: the same judge asked about the same reply several times (epoch
0 is the judgment, 1, 2, … its repeats). Per group of replies with at least two verdicts from
the judge: the share whose verdicts all agree, Krippendorff's α (ordinal, Fail < Partial < Pass)
with the epochs as the "raters", and the flip rate — the share of repeats whose verdict differs
from epoch 0's. Every CI is a seeded percentile bootstrap over replies (each keeps all its
epochs)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stats.compute import agreement
from stats.compute.resampling import (
    HUMAN_RESAMPLES,
    item_bootstrap_sums,
    percentile_interval,
    safe_ratio,
)

NAN_CI = (float("nan"), float("nan"))


@dataclass(frozen=True)
class Consistency:
    n_units: int  # replies with ≥ 2 verdicts
    n_repeats: int  # repeats compared with an epoch-0 verdict
    all_agree: float
    all_agree_ci: tuple[float, float]
    alpha: float
    alpha_ci: tuple[float, float]
    flip_rate: float
    flip_rate_ci: tuple[float, float]


def self_consistency(
    epochs: np.ndarray,
    n_categories: int,
    *,
    rngs: tuple[np.random.Generator, np.random.Generator, np.random.Generator],
    resamples: int = HUMAN_RESAMPLES,
) -> Consistency:
    """``epochs``: replies × epochs verdict codes (-1: none; column 0 is the judgment).
    ``rngs``: the generators of the agreement, α and flip-rate bootstraps."""
    epochs = np.asarray(epochs, dtype=np.int64).reshape(len(epochs), -1)
    counts = agreement.label_counts(epochs, n_categories)
    kept = counts.sum(axis=1) >= 2
    epochs, counts = epochs[kept], counts[kept]
    n = int(kept.sum())
    if n == 0:
        return Consistency(0, 0, float("nan"), NAN_CI, float("nan"), NAN_CI, float("nan"), NAN_CI)
    agree = (counts.max(axis=1) == counts.sum(axis=1)).astype(float)
    agree_sums = item_bootstrap_sums(agree, resamples=resamples, rng=rngs[0])[:, 0]
    first = epochs[:, :1]
    compared = (epochs[:, 1:] >= 0) & (first >= 0)
    flips = np.column_stack(
        [((epochs[:, 1:] != first) & compared).sum(axis=1), compared.sum(axis=1)]
    )
    flip_sums = item_bootstrap_sums(flips, resamples=resamples, rng=rngs[2])
    n_repeats = int(flips[:, 1].sum())
    return Consistency(
        n_units=n,
        n_repeats=n_repeats,
        all_agree=float(agree.mean()),
        all_agree_ci=percentile_interval(agree_sums / n),
        alpha=agreement.krippendorff_alpha(counts, "ordinal"),
        alpha_ci=agreement.krippendorff_alpha_ci(
            counts, "ordinal", rng=rngs[1], resamples=resamples
        ),
        flip_rate=float(flips[:, 0].sum() / n_repeats) if n_repeats else float("nan"),
        flip_rate_ci=percentile_interval(safe_ratio(flip_sums[:, 0], flip_sums[:, 1]))
        if n_repeats
        else NAN_CI,
    )
