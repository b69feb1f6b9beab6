"""Pairwise preference (Study 2): rubric-injected vs vanilla replies, judged double-blind.

- Injected win rate = injected wins / non-tie judgements; ties are left out of the rate but
  counted and shown.
- Two-sided exact binomial test of the wins against 0.5 (``scipy.stats.binomtest``) and its
  Wilson score interval.
- Item-clustered percentile bootstrap CI: resample *items* with replacement, keeping all their
  judgements (10,000 seeded resamples), rate = resampled wins / resampled non-ties. Two random
  streams give it: the app's (``rng_for`` keyed by rater set and stratum; resampled counts per
  contribution profile, so independent of item order) and the release's
  (``release_stream_interval``: the draws of ``dataset/human_eval/pairwise/analyze_pairwise.py``,
  which reproduce the published interval digit for digit).
- The same per stratum of the vanilla reply's judge verdict (PASS / PARTIAL / FAIL).
- Position bias: the share of non-tie judgements that chose the response shown on the left
  (first), with its own binomial p against 0.5.
- Per annotator: n, ties, injected rate, left share, median seconds per judgement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as scipy_stats

from benchmark.vocabulary import Verdict
from stats.compute.resampling import (
    CONFIDENCE,
    DEFAULT_SEED,
    HUMAN_RESAMPLES,
    item_bootstrap_sums,
    percentile_interval,
    rng_for,
    safe_ratio,
)
from stats.interfaces import INJECTED, TIE, PreferenceJudgements

ALL = "ALL"
STRATA = tuple(Verdict.values)  # best first, as the release reports them


@dataclass(frozen=True)
class BinomialSummary:
    k: int
    n: int
    rate: float
    p_value: float
    wilson: tuple[float, float]


def binomial_summary(k: int, n: int, *, level: float = CONFIDENCE) -> BinomialSummary:
    """k successes of n: rate, two-sided exact binomial p against 0.5, Wilson interval."""
    nan = float("nan")
    if n == 0:
        return BinomialSummary(k, n, nan, nan, (nan, nan))
    test = scipy_stats.binomtest(k, n, p=0.5, alternative="two-sided")
    ci = test.proportion_ci(confidence_level=level, method="wilson")
    return BinomialSummary(k, n, k / n, float(test.pvalue), (float(ci.low), float(ci.high)))


@dataclass(frozen=True)
class PreferenceRow:
    raters: str  # "all" or "without_excluded"
    stratum: str  # ALL or the vanilla reply's judge verdict
    n_items: int
    n_judgements: int
    n_ties: int
    injected: BinomialSummary  # injected wins among non-ties
    bootstrap_ci: tuple[float, float]
    left: BinomialSummary  # chose the left response among non-ties


Stream = Literal["app", "release"]


def release_stream_interval(
    judgements: PreferenceJudgements,
    *,
    seed: int,
    resamples: int = HUMAN_RESAMPLES,
    level: float = CONFIDENCE,
) -> tuple[float, float]:
    """The item-clustered percentile CI drawn as the release draws it (``cluster_bootstrap_ci``
    of ``analyze_pairwise.py``): ties dropped first, the items that keep a non-tie judgement in
    order of their first one (file order), a fresh ``numpy.random.default_rng(seed)`` per figure,
    and per resample one ``rng.integers(0, I, size=I)`` call (calls are not merged: a merged
    call consumes the generator differently). Rate = resampled B wins / resampled non-ties."""
    decided = judgements.choice != TIE
    item_ids = judgements.item_id[decided]
    wins = (judgements.choice[decided] == INJECTED).astype(float)
    order = list(dict.fromkeys(item_ids.tolist()))
    if not order:
        return (float("nan"), float("nan"))
    position = {item: i for i, item in enumerate(order)}
    index = np.fromiter((position[i] for i in item_ids.tolist()), dtype=np.int64)
    per_item_wins = np.bincount(index, weights=wins, minlength=len(order))
    per_item_decided = np.bincount(index, minlength=len(order)).astype(float)
    rng = np.random.default_rng(seed)
    n = len(order)
    draws = np.empty((resamples, n), dtype=np.int64)
    for b in range(resamples):
        draws[b] = rng.integers(0, n, size=n)
    rates = per_item_wins[draws].sum(axis=1) / per_item_decided[draws].sum(axis=1)
    return percentile_interval(rates, level)


def preference_result(
    judgements: PreferenceJudgements,
    *,
    rng: np.random.Generator,
    resamples: int = HUMAN_RESAMPLES,
    level: float = CONFIDENCE,
    raters: str = "all",
    stratum: str = ALL,
    release_seed: int | None = None,
) -> PreferenceRow:
    """One row. ``release_seed`` given: the bootstrap CI comes from ``release_stream_interval``
    with that seed instead of ``rng``."""
    choice = judgements.choice
    decided = choice != TIE
    wins = choice == INJECTED
    chose_left = decided & (wins == judgements.injected_on_left)
    _, item_index = np.unique(judgements.item_id, return_inverse=True)
    n_items = int(item_index.max()) + 1 if item_index.size else 0
    # Per item: injected wins and non-tie judgements; the bootstrap draws items.
    contributions = np.column_stack(
        [
            np.bincount(item_index, weights=wins, minlength=n_items),
            np.bincount(item_index, weights=decided, minlength=n_items),
        ]
    )
    if release_seed is None:
        sums = item_bootstrap_sums(contributions, resamples=resamples, rng=rng)
        interval = percentile_interval(safe_ratio(sums[:, 0], sums[:, 1]), level)
    else:
        interval = release_stream_interval(
            judgements, seed=release_seed, resamples=resamples, level=level
        )
    n_decided = int(decided.sum())
    return PreferenceRow(
        raters=raters,
        stratum=stratum,
        n_items=n_items,
        n_judgements=int(choice.size),
        n_ties=int(choice.size - n_decided),
        injected=binomial_summary(int(wins.sum()), n_decided, level=level),
        bootstrap_ci=interval,
        left=binomial_summary(int(chose_left.sum()), n_decided, level=level),
    )


def preference_table(
    judgements: PreferenceJudgements,
    *,
    excluded_annotators: frozenset[str] = frozenset(),
    seed: int = DEFAULT_SEED,
    resamples: int = HUMAN_RESAMPLES,
    level: float = CONFIDENCE,
    stream: Stream = "app",
) -> list[PreferenceRow]:
    """Overall and per stratum, with every rater and (when some are excluded) without the
    excluded ones. ``stream``: the bootstrap's random stream (module docstring)."""
    if stream not in ("app", "release"):
        raise ValueError(f"unknown stream {stream!r}")
    rater_sets = [("all", judgements)]
    if excluded_annotators:
        keep = ~np.isin(judgements.annotator_id, list(excluded_annotators))
        rater_sets.append(("without_excluded", judgements.subset(keep)))
    rows = []
    for raters, subset in rater_sets:
        for stratum in (ALL, *STRATA):
            part = subset if stratum == ALL else subset.subset(subset.vanilla_verdict == stratum)
            if stratum != ALL and part.choice.size == 0:
                continue
            rows.append(
                preference_result(
                    part,
                    rng=rng_for(seed, "preference", raters, stratum),
                    resamples=resamples,
                    level=level,
                    raters=raters,
                    stratum=stratum,
                    release_seed=seed if stream == "release" else None,
                )
            )
    return rows


@dataclass(frozen=True)
class AnnotatorRow:
    annotator_id: str
    n_judgements: int
    n_ties: int
    injected_rate: float
    left_share: float
    median_seconds: float
    excluded: bool


def preference_by_annotator(
    judgements: PreferenceJudgements, *, excluded_annotators: frozenset[str] = frozenset()
) -> list[AnnotatorRow]:
    """One row per annotator (a quality report: a fast rater who always picks one side shows)."""
    rows = []
    for annotator in np.unique(judgements.annotator_id).tolist():
        mine = judgements.subset(judgements.annotator_id == annotator)
        decided = mine.choice != TIE
        wins = mine.choice == INJECTED
        left = decided & (wins == mine.injected_on_left)
        seconds = mine.seconds[~np.isnan(mine.seconds)]
        n_decided = int(decided.sum())
        rows.append(
            AnnotatorRow(
                annotator_id=str(annotator),
                n_judgements=int(mine.choice.size),
                n_ties=int(mine.choice.size - n_decided),
                injected_rate=float(wins.sum() / n_decided) if n_decided else float("nan"),
                left_share=float(left.sum() / n_decided) if n_decided else float("nan"),
                median_seconds=float(np.median(seconds)) if seconds.size else float("nan"),
                excluded=annotator in excluded_annotators,
            )
        )
    return rows
