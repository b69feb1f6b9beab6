"""Agreement between raters (judges or people): Cohen's κ (unweighted, linear, quadratic),
Krippendorff's α (nominal, ordinal, interval) from the coincidence matrix, Fleiss' κ, Kendall's τ
between rankings, per-item majority labels and 3×3 confusion matrices; item-bootstrap CIs.

Labels are integer category codes 0..K-1 (for verdicts FAIL 0 < PARTIAL 1 < PASS 2), -1 = no
label. A ratings matrix is items × raters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as scipy_stats

from stats.compute.resampling import (
    CONFIDENCE,
    HUMAN_RESAMPLES,
    item_bootstrap_sums,
    percentile_interval,
)

Weights = Literal["none", "linear", "quadratic"]
Level = Literal["nominal", "ordinal", "interval"]
TieRule = Literal["exclude", "lowest", "release"]

MAJORITY_RULES: dict[str, TieRule] = {"drop": "exclude", "release": "release"}
"""The ``majority`` option of the tables that compare a majority label with a judge (its value →
the tie rule of ``majority_labels``): ``drop`` leaves tied items out, ``release`` breaks ties as
the ProactBench release does."""

RELEASE_TIE_PRIORITY = (1, 2, 0)
"""The release's tie break on verdict codes (FAIL 0, PARTIAL 1, PASS 2): Partial, then Pass, then
Fail (``dataset/human_eval/analyze_results.py``, ``majority_vote_consensus``: "middle wins ties,
then Pass over Fail")."""


# --- Counts and confusion ---------------------------------------------------------------------


def label_counts(ratings: np.ndarray, n_categories: int) -> np.ndarray:
    """items × raters codes (-1 missing) → items × K counts of each category."""
    ratings = np.asarray(ratings)
    counts = np.zeros((ratings.shape[0], n_categories), dtype=np.int64)
    for category in range(n_categories):
        counts[:, category] = np.sum(ratings == category, axis=1)
    return counts


def confusion_matrix(a: np.ndarray, b: np.ndarray, n_categories: int) -> np.ndarray:
    """K × K counts, rows = a's label, columns = b's label; pairs with a missing label skipped."""
    a, b = np.asarray(a), np.asarray(b)
    both = (a >= 0) & (b >= 0)
    cells = a[both] * n_categories + b[both]
    return np.bincount(cells, minlength=n_categories**2).reshape(n_categories, n_categories)


# --- Cohen's kappa ----------------------------------------------------------------------------


def _disagreement_weights(n_categories: int, weights: Weights) -> np.ndarray:
    i, j = np.indices((n_categories, n_categories))
    if weights == "none":
        return (i != j).astype(float)
    span = max(n_categories - 1, 1)
    if weights == "linear":
        return np.abs(i - j) / span
    if weights == "quadratic":
        return ((i - j) / span) ** 2
    raise ValueError(f"unknown weights {weights!r}")


def kappa_from_confusion(confusion: np.ndarray, weights: Weights = "none") -> np.ndarray:
    """Cohen's κ_w = 1 − Σ w·O / Σ w·E (E from the margins) for one K × K matrix or a stack
    (… × K × K). NaN where undefined (no pairs, or chance disagreement 0)."""
    confusion = np.asarray(confusion, dtype=float)
    n_categories = confusion.shape[-1]
    w = _disagreement_weights(n_categories, weights)
    total = confusion.sum(axis=(-2, -1))
    rows = confusion.sum(axis=-1)
    cols = confusion.sum(axis=-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = rows[..., :, None] * cols[..., None, :] / total[..., None, None]
        observed_d = (w * confusion).sum(axis=(-2, -1))
        expected_d = (w * expected).sum(axis=(-2, -1))
        kappa = 1 - observed_d / expected_d
    return np.where((total > 0) & (expected_d > 0), kappa, np.nan)


def cohen_kappa(
    a: np.ndarray, b: np.ndarray, n_categories: int, weights: Weights = "none"
) -> float:
    return float(kappa_from_confusion(confusion_matrix(a, b, n_categories), weights))


def cohen_kappa_ci(
    a: np.ndarray,
    b: np.ndarray,
    n_categories: int,
    *,
    weights: Weights = "none",
    rng: np.random.Generator,
    resamples: int = HUMAN_RESAMPLES,
    level: float = CONFIDENCE,
) -> tuple[float, float]:
    """Percentile CI of κ resampling the labelled pairs (items)."""
    a, b = np.asarray(a), np.asarray(b)
    both = (a >= 0) & (b >= 0)
    one_hot = np.eye(n_categories**2)[a[both] * n_categories + b[both]]
    sums = item_bootstrap_sums(one_hot, resamples=resamples, rng=rng)
    boot = kappa_from_confusion(sums.reshape(resamples, n_categories, n_categories), weights)
    return percentile_interval(boot, level)


# --- Krippendorff's alpha ---------------------------------------------------------------------


def unit_coincidences(counts: np.ndarray) -> np.ndarray:
    """Per-unit coincidence matrices (units × K × K): o_ck(u) = n_uc (n_uk − [c = k]) / (m_u − 1).
    Units with fewer than two labels are unpairable and contribute zeros."""
    counts = np.asarray(counts, dtype=float)
    m = counts.sum(axis=1)
    pairs = counts[:, :, None] * counts[:, None, :]
    pairs -= counts[:, :, None] * np.eye(counts.shape[1])[None]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = pairs / (m - 1)[:, None, None]
    out[m < 2] = 0.0
    return out


def alpha_from_coincidences(coincidence: np.ndarray, level: Level = "nominal") -> np.ndarray:
    """Krippendorff's α = 1 − (n − 1) Σ o_ck δ²_ck / Σ n_c n_k δ²_ck for a K × K coincidence
    matrix or a stack of them. δ² is the metric: nominal [c ≠ k]; ordinal
    (Σ_{g=c..k} n_g − (n_c + n_k)/2)² from the marginals n_g; interval (c − k)²
    (Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability")."""
    o = np.asarray(coincidence, dtype=float)
    n_categories = o.shape[-1]
    marginals = o.sum(axis=-1)
    n = marginals.sum(axis=-1)
    c, k = np.indices((n_categories, n_categories))
    if level == "nominal":
        delta = np.broadcast_to((c != k).astype(float), o.shape)
    elif level == "interval":
        delta = np.broadcast_to(((c - k) ** 2).astype(float), o.shape)
    elif level == "ordinal":
        lo, hi = np.minimum(c, k), np.maximum(c, k)
        cumulative = np.cumsum(marginals, axis=-1)
        between = cumulative[..., hi] - cumulative[..., lo] + marginals[..., lo]
        delta = (between - (marginals[..., lo] + marginals[..., hi]) / 2) ** 2
    else:
        raise ValueError(f"unknown level {level!r}")
    observed = (o * delta).sum(axis=(-2, -1))
    expected = (marginals[..., :, None] * marginals[..., None, :] * delta).sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = 1 - (n - 1) * observed / expected
    return np.where(expected > 0, alpha, np.nan)


def krippendorff_alpha(counts: np.ndarray, level: Level = "nominal") -> float:
    """α from items × K label counts (``label_counts`` of a ratings matrix)."""
    return float(alpha_from_coincidences(unit_coincidences(counts).sum(axis=0), level))


def krippendorff_alpha_ci(
    counts: np.ndarray,
    level: Level = "nominal",
    *,
    rng: np.random.Generator,
    resamples: int = HUMAN_RESAMPLES,
    level_ci: float = CONFIDENCE,
) -> tuple[float, float]:
    """Percentile CI of α resampling items (each keeps all its labels)."""
    per_unit = unit_coincidences(counts)
    pairable = np.asarray(counts).sum(axis=1) >= 2
    n_categories = per_unit.shape[1]
    flat = per_unit[pairable].reshape(int(pairable.sum()), n_categories**2)
    sums = item_bootstrap_sums(flat, resamples=resamples, rng=rng)
    boot = alpha_from_coincidences(sums.reshape(resamples, n_categories, n_categories), level)
    return percentile_interval(boot, level_ci)


# --- Fleiss' kappa ----------------------------------------------------------------------------


def _fleiss_contributions(counts: np.ndarray) -> np.ndarray:
    """Per item (with ≥ 2 labels): [P_i, n_i1 … n_iK]."""
    counts = np.asarray(counts, dtype=float)
    counts = counts[counts.sum(axis=1) >= 2]
    m = counts.sum(axis=1)
    p_item = ((counts**2).sum(axis=1) - m) / (m * (m - 1))
    return np.column_stack([p_item, counts])


def _fleiss_from_sums(sums: np.ndarray, n_items: int) -> np.ndarray:
    p_bar = sums[..., 0] / n_items
    labels = sums[..., 1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = labels / labels.sum(axis=-1, keepdims=True)
        p_chance = (shares**2).sum(axis=-1)
        kappa = (p_bar - p_chance) / (1 - p_chance)
    return np.where(p_chance < 1, kappa, np.nan)


def fleiss_kappa(counts: np.ndarray) -> float:
    """Fleiss' κ from items × K counts. Items may have different numbers of raters:
    P_i = (Σ_j n_ij² − n_i) / (n_i (n_i − 1)), P̄ = mean P_i, p_j = Σ_i n_ij / Σ_i n_i,
    κ = (P̄ − Σ p_j²) / (1 − Σ p_j²); items with fewer than two labels are left out. With a
    constant number of raters this is Fleiss (1971) exactly."""
    contributions = _fleiss_contributions(counts)
    if contributions.shape[0] == 0:
        return float("nan")
    return float(_fleiss_from_sums(contributions.sum(axis=0), contributions.shape[0]))


def fleiss_kappa_ci(
    counts: np.ndarray,
    *,
    rng: np.random.Generator,
    resamples: int = HUMAN_RESAMPLES,
    level: float = CONFIDENCE,
) -> tuple[float, float]:
    contributions = _fleiss_contributions(counts)
    if contributions.shape[0] == 0:
        return (float("nan"), float("nan"))
    sums = item_bootstrap_sums(contributions, resamples=resamples, rng=rng)
    return percentile_interval(_fleiss_from_sums(sums, contributions.shape[0]), level)


# --- Majority label, accuracy, rankings -------------------------------------------------------


def majority_labels(counts: np.ndarray, tie_rule: TieRule = "exclude") -> np.ndarray:
    """Each item's most frequent label. Tie rule, when two or more labels share the top count:
    ``exclude`` (default) — the item has no majority label (-1) and is left out of
    majority-vs-judge statistics (and counted as a tie); ``lowest`` — the lowest code among the
    tied labels (for verdicts: the stricter one, Fail before Partial before Pass); ``release`` —
    the ProactBench release's rule for verdicts, Partial before Pass before Fail
    (``RELEASE_TIE_PRIORITY``; only for the three verdict codes). Items with no label get -1."""
    counts = np.asarray(counts)
    top = counts.max(axis=1)
    is_top = (counts == top[:, None]) & (top[:, None] > 0)
    first = np.argmax(is_top, axis=1)
    tied = is_top.sum(axis=1) > 1
    labels = np.where(top > 0, first, -1)
    if tie_rule == "exclude":
        labels = np.where(tied, -1, labels)
    elif tie_rule == "release":
        if counts.shape[1] != len(RELEASE_TIE_PRIORITY):
            raise ValueError("the release tie rule is defined for the three verdicts only")
        priority = np.array(RELEASE_TIE_PRIORITY)
        preferred = priority[np.argmax(is_top[:, priority], axis=1)]
        labels = np.where(top > 0, preferred, -1)
    elif tie_rule != "lowest":
        raise ValueError(f"unknown tie rule {tie_rule!r}")
    return labels


def accuracy_against_gold(ratings: np.ndarray, gold: np.ndarray) -> tuple[float, int]:
    """Share of labels equal to their item's gold label, and how many labels were compared
    (items without gold, -1, and missing labels are left out)."""
    ratings = np.asarray(ratings)
    gold = np.asarray(gold)
    compared = (ratings >= 0) & (gold[:, None] >= 0)
    n = int(compared.sum())
    hits = int(np.sum((ratings == gold[:, None]) & compared))
    return (hits / n if n else float("nan"), n)


@dataclass(frozen=True)
class Tau:
    tau: float
    p_value: float
    n: int


def kendall_tau(x: np.ndarray, y: np.ndarray) -> Tau:
    """Kendall's τ-b between two score vectors (e.g. per-model scores under two judges), pairs
    with a NaN left out."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = ~(np.isnan(x) | np.isnan(y))
    if keep.sum() < 2:
        return Tau(float("nan"), float("nan"), int(keep.sum()))
    result = scipy_stats.kendalltau(x[keep], y[keep])
    return Tau(float(result.statistic), float(result.pvalue), int(keep.sum()))
