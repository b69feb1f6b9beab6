"""Failure modes of failed replies (the source's Table 2): per model, the number of labelled
fails and the share of each category with a 95% Wilson interval; then a pooled row over every
model's fails (a micro-average: each fail counts once, so a model with more fails weighs more).
The labels may come from people (a failure-mode study's majority) or from an LLM classifier: the
same computation serves both.

``classifier_vs_people`` compares the two on the replies both labelled."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from statsmodels.stats.proportion import proportion_confint

from stats.compute import agreement
from stats.compute.resampling import (
    CONFIDENCE,
    HUMAN_RESAMPLES,
    item_bootstrap_sums,
    percentile_interval,
)
from stats.interfaces import FailureModeLabels

POOLED = "POOLED"
ALL = "ALL"


@dataclass(frozen=True)
class FailureModeRow:
    model: str
    n_fails: int
    counts: dict[str, int]
    shares: dict[str, float]
    cis: dict[str, tuple[float, float]]  # Wilson interval of each share


def wilson_interval(count: int, n: int, level: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval of count / n (Wilson 1927); NaN for n = 0."""
    if n == 0:
        return (float("nan"), float("nan"))
    low, high = proportion_confint(count, n, alpha=1 - level, method="wilson")
    return (float(low), float(high))


def _row(model: str, categories: np.ndarray, names: tuple[str, ...]) -> FailureModeRow:
    counts = {name: int(np.sum(categories == name)) for name in names}
    n = int(categories.size)
    return FailureModeRow(
        model=model,
        n_fails=n,
        counts=counts,
        shares={name: (count / n if n else float("nan")) for name, count in counts.items()},
        cis={name: wilson_interval(count, n) for name, count in counts.items()},
    )


def failure_mode_table(labels: FailureModeLabels) -> list[FailureModeRow]:
    """One row per model (by name), then ``POOLED``."""
    rows = [
        _row(model, labels.category[labels.model == model], labels.categories)
        for model in sorted(set(labels.model.tolist()))
    ]
    rows.append(_row(POOLED, labels.category, labels.categories))
    return rows


# --- Classifier vs people ---------------------------------------------------------------------


@dataclass(frozen=True)
class ClassifierAgreementRow:
    """``category`` ALL: every reply both labelled; ``accuracy`` is the share where the
    classifier gives the people's label, ``kappa`` Cohen's κ over the K categories, ``counts``
    the classifier's labels. ``category`` c: the replies people labelled c; ``accuracy`` is the
    share the classifier also labelled c (c's recall), ``kappa`` the one-vs-rest κ of c over
    every reply both labelled, ``counts`` the classifier's labels of those replies (c's row of
    the confusion matrix)."""

    category: str
    n: int
    counts: dict[str, int]
    accuracy: float
    accuracy_ci: tuple[float, float]
    kappa: float
    kappa_ci: tuple[float, float]


def _accuracy(hits: np.ndarray, rng: np.random.Generator, resamples: int):
    n = int(hits.size)
    value = float(hits.mean()) if n else float("nan")
    if n == 0:
        return value, (float("nan"), float("nan"))
    sums = item_bootstrap_sums(hits.astype(float), resamples=resamples, rng=rng)[:, 0]
    return value, percentile_interval(sums / n)


def classifier_vs_people(
    classifier: np.ndarray,
    people: np.ndarray,
    categories: tuple[str, ...],
    *,
    rng_for_row,
    resamples: int = HUMAN_RESAMPLES,
) -> list[ClassifierAgreementRow]:
    """``classifier`` and ``people``: aligned category codes (indices into ``categories``) of
    the replies both labelled. ``rng_for_row(category)``: the seeded generator of a row's
    bootstrap (item resampling). Rows: ALL, then one per category."""
    classifier = np.asarray(classifier, dtype=np.int64)
    people = np.asarray(people, dtype=np.int64)
    k = len(categories)
    confusion = agreement.confusion_matrix(people, classifier, k)  # rows: people
    rng = rng_for_row(ALL)
    accuracy, accuracy_ci = _accuracy(classifier == people, rng, resamples)
    rows = [
        ClassifierAgreementRow(
            category=ALL,
            n=int(people.size),
            counts={c: int(confusion[:, j].sum()) for j, c in enumerate(categories)},
            accuracy=accuracy,
            accuracy_ci=accuracy_ci,
            kappa=agreement.cohen_kappa(people, classifier, k),
            kappa_ci=agreement.cohen_kappa_ci(people, classifier, k, rng=rng, resamples=resamples),
        )
    ]
    for i, category in enumerate(categories):
        rng = rng_for_row(category)
        mine = people == i
        recall, recall_ci = _accuracy(classifier[mine] == i, rng, resamples)
        a, b = mine.astype(np.int64), (classifier == i).astype(np.int64)
        rows.append(
            ClassifierAgreementRow(
                category=category,
                n=int(mine.sum()),
                counts={c: int(confusion[i, j]) for j, c in enumerate(categories)},
                accuracy=recall,
                accuracy_ci=recall_ci,
                kappa=agreement.cohen_kappa(a, b, 2),
                kappa_ci=agreement.cohen_kappa_ci(a, b, 2, rng=rng, resamples=resamples),
            )
        )
    return rows
