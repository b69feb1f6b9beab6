"""Paired injection effect: per model × trigger type and overall, how the rubric-injected
condition changes the pass rate and the weighted score of the *same* replies' prompts.

Pairs: a model's vanilla reply and its rubric-injected reply to the same trigger and sample
(``pair_units``), kept when both have a verdict. On the pairs of a cell:

- pass rate and weighted score (code / 2: Pass 1, Partial 0.5, Fail 0) of each condition, and
  Δ = injected − vanilla of both;
- a 95% percentile bootstrap CI of each Δ, resampling the cell's *triggers* with replacement
  (a trigger's pairs, when a run draws several samples, move together — the leaderboard's
  resampling unit), the two Δ of one resample from the same draw, seeded per (model, trigger
  type) with ``resampling.rng_for(seed, "injection-effect", model, type)``;
- McNemar's exact test on pass / not pass (McNemar 1947; the exact, conditional form):
  b = pairs that pass vanilla and do not pass injected, c = the reverse; under H0 b ~
  Binomial(b + c, 1/2), p = two-sided binomial test of min(b, c) (``scipy.stats.binomtest``),
  which is min(1, 2 · P[X ≤ min(b, c)]). With no discordant pair (b + c = 0) there is no
  evidence of an effect and p = 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest

from stats.compute import PASS
from stats.compute.leaderboard import ALL, TYPE_ORDER
from stats.compute.resampling import (
    CONFIDENCE,
    DEFAULT_SEED,
    LEADERBOARD_RESAMPLES,
    item_bootstrap_sums,
    percentile_interval,
    rng_for,
    safe_ratio,
)

SEED_KEY = "injection-effect"


@dataclass(frozen=True)
class EffectRow:
    model: str
    trigger_type: str  # ALL or a trigger type
    n_pairs: int
    vanilla_pass_rate: float
    injected_pass_rate: float
    vanilla_weighted: float
    injected_weighted: float
    delta_pass: float
    delta_pass_ci: tuple[float, float]
    delta_weighted: float
    delta_weighted_ci: tuple[float, float]
    b: int  # vanilla pass, injected not
    c: int  # injected pass, vanilla not
    mcnemar_p: float


def pair_units(
    keys_a: tuple[np.ndarray, ...], keys_b: tuple[np.ndarray, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """Index arrays (into side a, into side b) of the entries whose keys match, e.g. (model,
    trigger id, sample) of the vanilla and of the injected replies; in side a's order. A key
    occurs at most once per side (the unit's unique key)."""
    position = {key: i for i, key in enumerate(zip(*(k.tolist() for k in keys_b), strict=True))}
    ia, ib = [], []
    for i, key in enumerate(zip(*(k.tolist() for k in keys_a), strict=True)):
        j = position.get(key)
        if j is not None:
            ia.append(i)
            ib.append(j)
    return np.asarray(ia, dtype=np.int64), np.asarray(ib, dtype=np.int64)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p of ``b`` and ``c`` discordant pairs (1 when there are none)."""
    if b + c == 0:
        return 1.0
    return float(binomtest(min(b, c), b + c, 0.5, alternative="two-sided").pvalue)


def effect_cell(
    *,
    clusters: np.ndarray,
    vanilla: np.ndarray,
    injected: np.ndarray,
    resamples: int = LEADERBOARD_RESAMPLES,
    rng: np.random.Generator,
    level: float = CONFIDENCE,
) -> tuple:
    """The figures of one cell from its pairs: ``clusters`` (the trigger of each pair) and the
    two verdict codes (all scored), aligned. Returns the ``EffectRow`` fields after the cell's
    name, in order."""
    clusters = np.asarray(clusters)
    vanilla = np.asarray(vanilla)
    injected = np.asarray(injected)
    n = int(vanilla.size)
    v_pass = vanilla == PASS
    i_pass = injected == PASS
    b = int(np.sum(v_pass & ~i_pass))
    c = int(np.sum(i_pass & ~v_pass))
    # Per-trigger sums: pairs, passes and scores of each condition.
    _, index = np.unique(clusters, return_inverse=True)
    contributions = (
        np.column_stack(
            [
                np.bincount(index),
                np.bincount(index, weights=v_pass),
                np.bincount(index, weights=i_pass),
                np.bincount(index, weights=vanilla / 2),
                np.bincount(index, weights=injected / 2),
            ]
        )
        if n
        else np.zeros((0, 5))
    )
    sums = item_bootstrap_sums(contributions, resamples=resamples, rng=rng)
    boot_pass = safe_ratio(sums[:, 2] - sums[:, 1], sums[:, 0])
    boot_weighted = safe_ratio(sums[:, 4] - sums[:, 3], sums[:, 0])
    totals = contributions.sum(axis=0) if n else np.zeros(5)
    nan = float("nan")
    rates = [float(t / n) if n else nan for t in totals[1:]]
    return (
        n,
        rates[0],
        rates[1],
        rates[2],
        rates[3],
        rates[1] - rates[0],
        percentile_interval(boot_pass, level),
        rates[3] - rates[2],
        percentile_interval(boot_weighted, level),
        b,
        c,
        mcnemar_exact(b, c),
    )


def injection_effects(
    *,
    models: np.ndarray,
    trigger_types: np.ndarray,
    clusters: np.ndarray,
    vanilla: np.ndarray,
    injected: np.ndarray,
    resamples: int = LEADERBOARD_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = CONFIDENCE,
) -> list[EffectRow]:
    """One row per model (by name) × (ALL, then each trigger type present), from aligned pairs:
    the model, trigger type and trigger of each pair and its vanilla and injected verdict codes
    (-1: none; such pairs are dropped)."""
    models = np.asarray(models)
    trigger_types = np.asarray(trigger_types)
    clusters = np.asarray(clusters)
    vanilla = np.asarray(vanilla)
    injected = np.asarray(injected)
    both = (vanilla >= 0) & (injected >= 0)
    present = [t for t in TYPE_ORDER if np.any(both & (trigger_types == t))]
    present += sorted(set(trigger_types[both].tolist()) - set(TYPE_ORDER))
    out = []
    for model in sorted(set(models[both].tolist())):
        in_model = both & (models == model)
        for trigger_type in [ALL, *present]:
            mask = in_model if trigger_type == ALL else in_model & (trigger_types == trigger_type)
            if not mask.any():
                continue
            figures = effect_cell(
                clusters=clusters[mask],
                vanilla=vanilla[mask],
                injected=injected[mask],
                resamples=resamples,
                rng=rng_for(seed, SEED_KEY, str(model), trigger_type),
                level=level,
            )
            out.append(EffectRow(str(model), trigger_type, *figures))
    return out
