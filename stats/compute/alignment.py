"""Judge–human alignment: one judge's verdicts against people's (a direct-rating study's
per-item majority label, or adjudicated final verdicts), per group (trigger type) and overall.

- n: items with both a human label and a judge verdict.
- Accuracy = Σ_k C_kk / n, the share of items where the judge gives the people's label.
- Cohen's κ (unweighted) from the same 3 × 3 confusion matrix C (rows: people, columns: judge):
  κ = (p_o − p_e) / (1 − p_e), p_o = accuracy, p_e = Σ_k (row_k / n)(col_k / n)
  (Cohen 1960; ``agreement.kappa_from_confusion``).
- Percentile CIs from one item bootstrap per row: the resampled confusion matrices give both the
  accuracy and the κ of each resample (``resampling.item_bootstrap_sums``), seeded by the
  reference, judge and group so a figure does not move when another judge is added.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stats.compute import agreement
from stats.compute.resampling import (
    CONFIDENCE,
    DEFAULT_SEED,
    HUMAN_RESAMPLES,
    item_bootstrap_sums,
    percentile_interval,
    rng_for,
)

ALL = "ALL"


@dataclass(frozen=True)
class AlignmentRow:
    reference: str
    judge: str
    group: str
    n: int
    accuracy: float
    accuracy_ci: tuple[float, float]
    kappa: float
    kappa_ci: tuple[float, float]
    confusion: np.ndarray  # K × K, rows the people's label, columns the judge's


def alignment_row(
    human: np.ndarray,
    judge: np.ndarray,
    n_categories: int,
    *,
    rng: np.random.Generator,
    resamples: int = HUMAN_RESAMPLES,
    level: float = CONFIDENCE,
    reference: str = "",
    judge_name: str = "",
    group: str = ALL,
) -> AlignmentRow:
    """``human`` and ``judge``: one code per item (-1: none); items lacking either are left out."""
    human, judge = np.asarray(human), np.asarray(judge)
    confusion = agreement.confusion_matrix(human, judge, n_categories)
    n = int(confusion.sum())
    both = (human >= 0) & (judge >= 0)
    one_hot = np.eye(n_categories**2)[human[both] * n_categories + judge[both]]
    sums = item_bootstrap_sums(one_hot, resamples=resamples, rng=rng).reshape(
        resamples, n_categories, n_categories
    )
    totals = sums.sum(axis=(1, 2))
    hits = np.trace(sums, axis1=1, axis2=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot_accuracy = np.where(totals > 0, hits / totals, np.nan)
    return AlignmentRow(
        reference=reference,
        judge=judge_name,
        group=group,
        n=n,
        accuracy=float(np.trace(confusion) / n) if n else float("nan"),
        accuracy_ci=percentile_interval(boot_accuracy, level),
        kappa=float(agreement.kappa_from_confusion(confusion)),
        kappa_ci=percentile_interval(agreement.kappa_from_confusion(sums), level),
        confusion=confusion,
    )


def alignment_table(
    human: np.ndarray,
    judges: dict[str, np.ndarray],
    groups: np.ndarray,
    n_categories: int,
    *,
    reference: str,
    seed: int = DEFAULT_SEED,
    resamples: int = HUMAN_RESAMPLES,
    level: float = CONFIDENCE,
) -> list[AlignmentRow]:
    """For each judge (in the given order): overall, then one row per group in order of first
    appearance."""
    groups = np.asarray(groups, dtype=object)
    names = [g for g in dict.fromkeys(groups.tolist()) if g]
    rows = []
    for judge_name, verdicts in judges.items():
        for group in (ALL, *names):
            keep = np.ones(groups.size, dtype=bool) if group == ALL else groups == group
            rows.append(
                alignment_row(
                    np.asarray(human)[keep],
                    np.asarray(verdicts)[keep],
                    n_categories,
                    rng=rng_for(seed, "judge-human-alignment", reference, judge_name, group),
                    resamples=resamples,
                    level=level,
                    reference=reference,
                    judge_name=judge_name,
                    group=group,
                )
            )
    return rows
