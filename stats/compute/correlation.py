"""External benchmarks: does a trigger type's score track what other benchmarks measure?

For each (trigger type, benchmark): Pearson r over the models that have both scores, two-sided
p (``scipy.stats.pearsonr``), a 95% CI by Fisher's z (``tanh(atanh r ± z_crit / sqrt(n − 3))``,
needs n ≥ 4), and the Holm–Bonferroni adjusted p within the trigger type's family (its tests
against every benchmark; ``holm`` below — statsmodels' ``multipletests`` gives the same numbers,
the tests check it, but it runs a full garbage collection on every call). Then the mean r per
trigger type over its benchmarks, with a percentile CI from resampling *models* (1,000 seeded
resamples; a resample where a correlation is undefined leaves that benchmark out of its mean).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from stats.compute.resampling import (
    CONFIDENCE,
    DEFAULT_SEED,
    LEADERBOARD_RESAMPLES,
    percentile_interval,
    rng_for,
)


@dataclass(frozen=True)
class Correlation:
    n: int
    r: float
    ci: tuple[float, float]
    p_value: float


def pearson_with_fisher_ci(
    x: np.ndarray, y: np.ndarray, *, level: float = CONFIDENCE
) -> Correlation:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    n = int(x.size)
    nan = float("nan")
    if n < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return Correlation(n, nan, (nan, nan), nan)
    result = scipy_stats.pearsonr(x, y)
    r = float(result.statistic)
    if n < 4 or abs(r) == 1:
        ci = (nan, nan) if n < 4 else (r, r)
    else:
        z_crit = scipy_stats.norm.ppf(1 - (1 - level) / 2)
        half = z_crit / np.sqrt(n - 3)
        ci = (float(np.tanh(np.arctanh(r) - half)), float(np.tanh(np.arctanh(r) + half)))
    return Correlation(n, r, ci, float(result.pvalue))


def _resampled_r(x: np.ndarray, y: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Pearson r of (x, y) under each row of model indices (resamples × n); NaN where a
    resample has no spread."""
    xs, ys = x[index], y[index]
    xs = xs - xs.mean(axis=1, keepdims=True)
    ys = ys - ys.mean(axis=1, keepdims=True)
    denominator = np.sqrt((xs**2).sum(axis=1) * (ys**2).sum(axis=1))
    out = np.full(index.shape[0], np.nan)
    np.divide((xs * ys).sum(axis=1), denominator, out=out, where=denominator > 1e-12)
    return out


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm–Bonferroni step-down adjusted p: with p sorted ascending, the i-th (0-based) is
    ``max_{j ≤ i} min(1, (m − j) · p_(j))``; returned in the input order."""
    p_values = np.asarray(p_values, dtype=float)
    m = p_values.size
    order = np.argsort(p_values, kind="stable")
    stepped = np.minimum(1.0, (m - np.arange(m)) * p_values[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(stepped)
    return adjusted


@dataclass(frozen=True)
class CorrelationRow:
    trigger_type: str
    benchmark: str
    correlation: Correlation
    p_holm: float


@dataclass(frozen=True)
class MeanCorrelationRow:
    trigger_type: str
    n_benchmarks: int
    mean_r: float
    ci: tuple[float, float]


def benchmark_correlations(
    *,
    type_scores: np.ndarray,
    type_names: list[str],
    benchmark_scores: np.ndarray,
    benchmark_names: list[str],
    seed: int = DEFAULT_SEED,
    resamples: int = LEADERBOARD_RESAMPLES,
    level: float = CONFIDENCE,
) -> tuple[list[CorrelationRow], list[MeanCorrelationRow]]:
    """``type_scores`` is models × trigger types, ``benchmark_scores`` models × benchmarks (the
    same model order; NaN where a model has no score)."""
    type_scores = np.asarray(type_scores, dtype=float)
    benchmark_scores = np.asarray(benchmark_scores, dtype=float)
    rows: list[CorrelationRow] = []
    means: list[MeanCorrelationRow] = []
    for t, type_name in enumerate(type_names):
        family = [
            pearson_with_fisher_ci(type_scores[:, t], benchmark_scores[:, b], level=level)
            for b in range(len(benchmark_names))
        ]
        tested = [i for i, c in enumerate(family) if not np.isnan(c.p_value)]
        adjusted = np.full(len(family), np.nan)
        if tested:
            adjusted[tested] = holm(np.array([family[i].p_value for i in tested]))
        rows += [
            CorrelationRow(type_name, benchmark_names[b], family[b], float(adjusted[b]))
            for b in range(len(benchmark_names))
        ]
        if not tested:
            continue
        rng = rng_for(seed, "benchmark-correlation", type_name)
        boot = []
        for b in tested:
            keep = ~(np.isnan(type_scores[:, t]) | np.isnan(benchmark_scores[:, b]))
            x, y = type_scores[keep, t], benchmark_scores[keep, b]
            index = rng.integers(0, x.size, size=(resamples, x.size))
            boot.append(_resampled_r(x, y, index))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a resample with no defined r
            boot_mean = np.nanmean(np.vstack(boot), axis=0)
        means.append(
            MeanCorrelationRow(
                trigger_type=type_name,
                n_benchmarks=len(tested),
                mean_r=float(np.mean([family[i].r for i in tested])),
                ci=percentile_interval(boot_mean, level),
            )
        )
    return rows, means
