"""Seeded, vectorised item bootstrap.

Resampling ``I`` items with replacement is the same as drawing how many copies of each item go
into the resample: a Multinomial(I, 1/I, …, 1/I) vector. Every statistic here is a function of
*sums* of per-item contributions (counts of passes, a unit's coincidence matrix, a pair's
confusion cell, …), and items with identical contribution vectors are interchangeable, so we
draw copies per distinct contribution *profile* instead: Multinomial(I, count_p / I) over the P
distinct profiles. The resampled sums have exactly the same distribution as with per-item index
resampling, at a cost of B × P instead of B × I (P is small: a handful of verdict patterns).
tests/stats/test_resampling.py checks this against the textbook index loop.
"""

from __future__ import annotations

import zlib

import numpy as np

DEFAULT_SEED = 20260501
"""Base seed of every bootstrap (the dashboard, the API and ``export_stats`` all use it)."""

LEADERBOARD_RESAMPLES = 1_000
HUMAN_RESAMPLES = 10_000
BATTLE_RESAMPLES = 1_000  # the Bradley–Terry ranking's bootstrap over battles
# What a request may ask of it: enough for a 95 % percentile interval, and a bounded cost
# (each resample is one fit: ~1 ms with tens of sources, whatever the battle count).
BATTLE_RESAMPLES_RANGE = (100, 10_000)
CONFIDENCE = 0.95


def rng_for(seed: int, *key: str) -> np.random.Generator:
    """A generator for one named computation, e.g. ``rng_for(seed, "leaderboard", model, type)``.

    Seeding from the name (CRC-32 of each part) rather than from the order of computation keeps a
    figure the same whatever else is computed beside it (another model added, a filter changed).
    """
    words = [zlib.crc32(part.encode("utf-8")) for part in key]
    return np.random.default_rng(np.random.SeedSequence([seed, *words]))


def item_bootstrap_sums(
    contributions: np.ndarray, *, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """Column sums of ``contributions`` (items × m) over ``resamples`` item-bootstrap samples.

    Returns a (resamples × m) float array. With no items, every sum is 0.
    """
    contributions = np.asarray(contributions, dtype=float)
    if contributions.ndim == 1:
        contributions = contributions[:, None]
    n_items = contributions.shape[0]
    if n_items == 0:
        return np.zeros((resamples, contributions.shape[1]))
    profiles, counts = np.unique(contributions, axis=0, return_counts=True)
    copies = rng.multinomial(n_items, counts / n_items, size=resamples)
    return copies @ profiles


def percentile_interval(values: np.ndarray, level: float = CONFIDENCE) -> tuple[float, float]:
    """The percentile bootstrap interval (linear interpolation between order statistics).

    Resamples where the statistic is undefined (NaN: e.g. no non-tie judgement drawn) are left
    out; with none defined the interval is (NaN, NaN).
    """
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return (float("nan"), float("nan"))
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return (float(low), float(high))


def safe_ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, NaN where the denominator is 0 (no warning)."""
    numerator = np.asarray(numerator, dtype=float)
    denominator = np.asarray(denominator, dtype=float)
    out = np.full(np.broadcast(numerator, denominator).shape, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out
