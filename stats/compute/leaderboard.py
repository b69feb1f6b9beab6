"""Leaderboard: per model × trigger type and overall — n, pass rate, partial rate, weighted score
(Pass 1 / Partial 0.5 / Fail 0), each with a 95% percentile bootstrap CI.

Conventions of the source (release README, "Metrics convention"): rates are over scored
triggers only (SKIPPED, missing rows and judge errors excluded, but counted in ``n_expected`` so
coverage shows); "overall" pools every trigger of the model (micro-average).

Bootstrap: 1,000 resamples of the cell's *triggers* with replacement (a trigger's replies, when
a run draws several samples per trigger, move together); the three rates of one resample come
from the same draw. Seeded per (model, trigger type) — see ``resampling.rng_for``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmark.vocabulary import TRIGGER_TYPES
from stats.compute import PARTIAL, PASS
from stats.compute.resampling import (
    CONFIDENCE,
    DEFAULT_SEED,
    LEADERBOARD_RESAMPLES,
    item_bootstrap_sums,
    percentile_interval,
    rng_for,
    safe_ratio,
)

ALL = "ALL"
POOLED = "POOLED"  # every model's replies together (the breakdown by domain)
# The release's trigger types, then the Workbench's (INTERVENTION): only types present get rows.
TYPE_ORDER = TRIGGER_TYPES


@dataclass(frozen=True)
class CellScores:
    n_expected: int
    n: int
    n_pass: int
    n_partial: int
    n_fail: int
    pass_rate: float
    partial_rate: float
    weighted_score: float
    pass_ci: tuple[float, float]
    partial_ci: tuple[float, float]
    weighted_ci: tuple[float, float]

    @property
    def coverage(self) -> float:
        return self.n / self.n_expected if self.n_expected else float("nan")


@dataclass(frozen=True)
class LeaderboardRow:
    model: str
    group: str  # ALL, or a trigger type (the leaderboard) or a domain key (by domain)
    scores: CellScores

    @property
    def trigger_type(self) -> str:
        """The leaderboard's name for the group."""
        return self.group


def cell_scores(
    *,
    clusters: np.ndarray,
    verdicts: np.ndarray,
    resamples: int = LEADERBOARD_RESAMPLES,
    rng: np.random.Generator,
    level: float = CONFIDENCE,
) -> CellScores:
    """Scores of one cell. ``clusters`` (the trigger of each reply) and ``verdicts`` (codes,
    -1 = not scored) are aligned arrays of the cell's replies."""
    clusters = np.asarray(clusters)
    verdicts = np.asarray(verdicts)
    scored = verdicts >= 0
    n_pass = int(np.sum(verdicts == PASS))
    n_partial = int(np.sum(verdicts == PARTIAL))
    n = int(scored.sum())
    # Per-trigger contributions (scored replies, passes, partials); triggers with no scored
    # reply carry no information and are not resampled.
    _, cluster_index = np.unique(clusters[scored], return_inverse=True)
    contributions = (
        np.column_stack(
            [
                np.bincount(cluster_index),
                np.bincount(cluster_index, weights=verdicts[scored] == PASS),
                np.bincount(cluster_index, weights=verdicts[scored] == PARTIAL),
            ]
        )
        if n
        else np.zeros((0, 3))
    )
    sums = item_bootstrap_sums(contributions, resamples=resamples, rng=rng)
    boot_pass = safe_ratio(sums[:, 1], sums[:, 0])
    boot_partial = safe_ratio(sums[:, 2], sums[:, 0])
    boot_weighted = boot_pass + 0.5 * boot_partial
    nan = float("nan")
    return CellScores(
        n_expected=int(verdicts.size),
        n=n,
        n_pass=n_pass,
        n_partial=n_partial,
        n_fail=n - n_pass - n_partial,
        pass_rate=n_pass / n if n else nan,
        partial_rate=n_partial / n if n else nan,
        weighted_score=(n_pass + 0.5 * n_partial) / n if n else nan,
        pass_ci=percentile_interval(boot_pass, level),
        partial_ci=percentile_interval(boot_partial, level),
        weighted_ci=percentile_interval(boot_weighted, level),
    )


def leaderboard(
    *,
    models: np.ndarray,
    trigger_types: np.ndarray,
    clusters: np.ndarray,
    verdicts: np.ndarray,
    resamples: int = LEADERBOARD_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = CONFIDENCE,
    seed_key: str = "leaderboard",
) -> list[LeaderboardRow]:
    """One row per model × (ALL, then each trigger type present), models by overall pass rate
    (best first, then name). All inputs are aligned per reply."""
    return scores_by_group(
        models=models,
        groups=trigger_types,
        order=TYPE_ORDER,
        clusters=clusters,
        verdicts=verdicts,
        resamples=resamples,
        seed=seed,
        level=level,
        seed_key=seed_key,
    )


def scores_by_group(
    *,
    models: np.ndarray,
    groups: np.ndarray,
    order: Sequence[str],
    clusters: np.ndarray,
    verdicts: np.ndarray,
    resamples: int = LEADERBOARD_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = CONFIDENCE,
    seed_key: str = "leaderboard",
) -> list[LeaderboardRow]:
    """One row per model × (ALL, then each group present: those of ``order`` in its order, then
    any other by name), models by overall pass rate (best first, then name). ``groups`` is the
    reply's trigger type for the leaderboard, its domain for the breakdown by domain; a cell is
    seeded ``rng_for(seed, seed_key, model, group)``, so a model's ALL row does not depend on
    the grouping. All inputs are aligned per reply."""
    models = np.asarray(models)
    groups = np.asarray(groups)
    clusters = np.asarray(clusters)
    verdicts = np.asarray(verdicts)
    present = [g for g in order if np.any(groups == g)]
    present += sorted(set(groups.tolist()) - set(order))
    by_model: dict[str, list[LeaderboardRow]] = {}
    for model in np.unique(models).tolist():
        in_model = models == model
        rows = []
        for group in [ALL, *present]:
            mask = in_model if group == ALL else in_model & (groups == group)
            if not mask.any():
                continue
            scores = cell_scores(
                clusters=clusters[mask],
                verdicts=verdicts[mask],
                resamples=resamples,
                rng=rng_for(seed, seed_key, str(model), group),
                level=level,
            )
            rows.append(LeaderboardRow(str(model), group, scores))
        by_model[str(model)] = rows

    def rank(model: str) -> tuple[float, str]:
        overall = by_model[model][0].scores.pass_rate
        return (-overall if overall == overall else 1.0, model)  # NaN last

    return [row for model in sorted(by_model, key=rank) for row in by_model[model]]


def leaderboard_by_domain(
    *,
    models: np.ndarray,
    domains: np.ndarray,
    order: Sequence[str],
    clusters: np.ndarray,
    verdicts: np.ndarray,
    resamples: int = LEADERBOARD_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = CONFIDENCE,
) -> list[LeaderboardRow]:
    """The leaderboard's figures per model × (ALL, then each domain present, in ``order``),
    models ranked as on the leaderboard, then ``POOLED`` × (ALL, each domain): every model's
    replies together, resampled by trigger (a trigger's replies from every model move together,
    since the triggers, not the models, are the sample). Seeded as the leaderboard's cells, so a
    model's ALL row is the leaderboard's ALL row, CIs included. Inputs are aligned per reply."""
    common: dict[str, Any] = {
        "groups": domains,
        "order": order,
        "clusters": clusters,
        "verdicts": verdicts,
        "resamples": resamples,
        "seed": seed,
        "level": level,
    }
    pooled = np.full(np.asarray(models).size, POOLED, dtype=object)
    return scores_by_group(models=models, **common) + scores_by_group(models=pooled, **common)


def score_matrix(
    *,
    models: np.ndarray,
    trigger_types: np.ndarray,
    verdicts: np.ndarray,
    metric: str = "weighted",
) -> tuple[list[str], list[str], np.ndarray]:
    """Point estimates only: models × (ALL, then each trigger type present) of the weighted
    score (``metric="weighted"``) or the pass rate (``"pass"``); NaN where a model has no scored
    reply of a type. For rankings and correlations, where no CI is needed."""
    models = np.asarray(models)
    trigger_types = np.asarray(trigger_types)
    verdicts = np.asarray(verdicts)
    scored = verdicts >= 0
    if metric == "weighted":
        value = np.where(verdicts == PASS, 1.0, np.where(verdicts == PARTIAL, 0.5, 0.0))
    elif metric == "pass":
        value = (verdicts == PASS).astype(float)
    else:
        raise ValueError(f"unknown metric {metric!r}")
    names = np.unique(models).tolist()
    types = [ALL] + [t for t in TYPE_ORDER if np.any(trigger_types == t)]
    out = np.full((len(names), len(types)), np.nan)
    _, model_index = np.unique(models, return_inverse=True)
    for j, trigger_type in enumerate(types):
        mask = scored if trigger_type == ALL else scored & (trigger_types == trigger_type)
        n = np.bincount(model_index[mask], minlength=len(names))
        total = np.bincount(model_index[mask], weights=value[mask], minlength=len(names))
        out[:, j] = safe_ratio(total, n)
    return [str(n) for n in names], types, out
