"""Human agreement (Study 1 and any direct-rating study), per group (trigger type) and overall:
Krippendorff's α — ordinal when the categories are ordered (Fail < Partial < Pass), and nominal
always — and Fleiss' κ, each with an item-bootstrap CI; accuracy of every label against gold;
the per-item majority label against the judge: Cohen's κ unweighted and quadratic-weighted
(with item-bootstrap CIs) and the K × K confusion matrix (rows: majority, columns: judge).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stats.compute import agreement
from stats.compute.resampling import CONFIDENCE, DEFAULT_SEED, HUMAN_RESAMPLES, rng_for
from stats.interfaces import LabelMatrix

ALL = "ALL"


@dataclass(frozen=True)
class Estimate:
    value: float
    ci: tuple[float, float]


@dataclass(frozen=True)
class HumanAgreementRow:
    group: str
    n_items: int
    n_ratings: int
    n_raters: int
    alpha_ordinal: Estimate | None  # None when the categories are unordered
    alpha_nominal: Estimate
    fleiss_kappa: Estimate
    gold_accuracy: float
    n_gold_compared: int
    n_majority: int  # items with a majority label and a judge label
    n_majority_ties: int  # items whose top labels tie (left out or broken by the tie rule)
    majority_kappa: Estimate
    majority_kappa_quadratic: Estimate
    confusion: np.ndarray  # K × K, rows majority label, columns judge label


def human_agreement_row(
    matrix: LabelMatrix,
    *,
    group: str = ALL,
    seed: int = DEFAULT_SEED,
    resamples: int = HUMAN_RESAMPLES,
    level: float = CONFIDENCE,
    tie_rule: agreement.TieRule = "exclude",
) -> HumanAgreementRow:
    k = len(matrix.categories)
    counts = agreement.label_counts(matrix.labels, k)

    def rng(name: str) -> np.random.Generator:
        return rng_for(seed, "human-agreement", group, name)

    def alpha(level_name: agreement.Level) -> Estimate:
        return Estimate(
            agreement.krippendorff_alpha(counts, level_name),
            agreement.krippendorff_alpha_ci(
                counts,
                level_name,
                rng=rng(f"alpha-{level_name}"),
                resamples=resamples,
                level_ci=level,
            ),
        )

    majority = agreement.majority_labels(counts, tie_rule)
    rated = counts.sum(axis=1) > 0
    # Tied items are counted whatever the rule does with them (drops them, or breaks the tie).
    ties = rated & (agreement.majority_labels(counts, "exclude") < 0)
    compared = (majority >= 0) & (matrix.judge >= 0)

    def majority_kappa(weights: agreement.Weights) -> Estimate:
        return Estimate(
            agreement.cohen_kappa(majority, matrix.judge, k, weights),
            agreement.cohen_kappa_ci(
                majority,
                matrix.judge,
                k,
                weights=weights,
                rng=rng(f"kappa-{weights}"),
                resamples=resamples,
                level=level,
            ),
        )

    accuracy, n_gold = agreement.accuracy_against_gold(matrix.labels, matrix.gold)
    return HumanAgreementRow(
        group=group,
        n_items=int(rated.sum()),
        n_ratings=int((matrix.labels >= 0).sum()),
        n_raters=int(np.any(matrix.labels >= 0, axis=0).sum()),
        alpha_ordinal=alpha("ordinal") if matrix.ordered else None,
        alpha_nominal=alpha("nominal"),
        fleiss_kappa=Estimate(
            agreement.fleiss_kappa(counts),
            agreement.fleiss_kappa_ci(counts, rng=rng("fleiss"), resamples=resamples, level=level),
        ),
        gold_accuracy=accuracy,
        n_gold_compared=n_gold,
        n_majority=int(compared.sum()),
        n_majority_ties=int(ties.sum()),
        majority_kappa=majority_kappa("none"),
        majority_kappa_quadratic=majority_kappa("quadratic"),
        confusion=agreement.confusion_matrix(majority, matrix.judge, k),
    )


def human_agreement_table(
    matrix: LabelMatrix,
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = HUMAN_RESAMPLES,
    level: float = CONFIDENCE,
    tie_rule: agreement.TieRule = "exclude",
) -> list[HumanAgreementRow]:
    """Overall, then one row per group (in order of first appearance)."""
    groups = [g for g in dict.fromkeys(matrix.groups.tolist()) if g]
    rows = [
        human_agreement_row(
            matrix, group=ALL, seed=seed, resamples=resamples, level=level, tie_rule=tie_rule
        )
    ]
    for group in groups:
        rows.append(
            human_agreement_row(
                matrix.items_where(matrix.groups == group),
                group=group,
                seed=seed,
                resamples=resamples,
                level=level,
                tie_rule=tie_rule,
            )
        )
    return rows
