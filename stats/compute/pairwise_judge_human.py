"""People and an LLM pairwise judge on the same pairs of replies: how often the judge's verdict
is the people's (docs/statistics.md, "Pairwise judge vs people").

- **Categories**: side A better, side B better, tie — *both bad is folded into tie* (people
  and judges alike: what a ranking counts as half a win to each side, and a distinction the
  two orders of one judge do not keep apart reliably either).
- **People's label per pair**: the majority of its raters' labels over the three categories
  (``agreement.majority_labels``); when the top labels tie — with an even k, e.g. one rater
  for A and one for B, or one for a side and one for a tie — the pair has none (tie rule
  ``exclude``) and is left out, counted by the caller.
- **The judge's verdict**, three ways (``ORDERS``): ``both`` — the verdict it gives in both
  orders, where it survives the swap (as ``pairwise_consistency`` counts it: tie and both bad
  are different verdicts there, so a flip between them is inconsistent); the *inconsistent*
  pairs are left out of this row and counted (``n_inconsistent``), never dropped silently;
  ``ab`` / ``ba`` — its verdict with side A / side B shown first, flips included, so a judge
  that favours the first reply shows it against people.
- **Agreement**: accuracy and Cohen's κ (unweighted) from the 3 × 3 confusion matrix (rows
  people, columns the judge), with percentile CIs from one seeded bootstrap over pairs per row
  (``alignment.alignment_row``, the judge–human alignment table's computation), seeded by the
  judge and the order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchmark.vocabulary import BattleWinner
from stats.compute import agreement
from stats.compute.alignment import AlignmentRow, alignment_row
from stats.compute.resampling import DEFAULT_SEED, HUMAN_RESAMPLES, rng_for
from stats.interfaces import BATTLE_OUTCOMES

CATEGORIES = ("A", "B", "tie")
"""Side A better, side B better, tie (tie or both bad)."""

CATEGORY_OF = {
    BattleWinner.MODEL_A.value: "A",
    BattleWinner.MODEL_B.value: "B",
    BattleWinner.TIE.value: "tie",
    BattleWinner.TIE_BOTHBAD.value: "tie",  # both bad is folded into tie
}
FOLD = np.array([CATEGORIES.index(CATEGORY_OF[outcome]) for outcome in BATTLE_OUTCOMES])
"""``BATTLE_OUTCOMES`` code → ``CATEGORIES`` code."""

ORDERS = ("both", "ab", "ba")
"""The judge's verdict: the same in both orders, with side A shown first, with side B first."""


@dataclass(frozen=True)
class JudgeHumanRow:
    judge: str
    order: str  # one of ORDERS
    n_inconsistent: int  # pairs with a people's label whose verdict flips with the order
    n_no_verdict: int  # pairs with a people's label and no verdict of this row's kind
    agreement: AlignmentRow  # n, accuracy, κ, their CIs, the confusion matrix


def people_labels(human: np.ndarray, tie_rule: agreement.TieRule = "exclude") -> np.ndarray:
    """Each pair's majority category (``CATEGORIES`` code), both bad counted as a tie; -1 where
    the top labels tie or nobody answered."""
    folded = np.asarray(human, dtype=np.int64) @ np.eye(len(CATEGORIES), dtype=np.int64)[FOLD]
    return agreement.majority_labels(folded, tie_rule)


def _folded(codes: np.ndarray) -> np.ndarray:
    return np.where(codes >= 0, FOLD[np.clip(codes, 0, None)], -1)


def judge_vs_people(
    people: np.ndarray,
    ab: np.ndarray,
    ba: np.ndarray,
    *,
    judge: str,
    seed: int = DEFAULT_SEED,
    resamples: int = HUMAN_RESAMPLES,
) -> list[JudgeHumanRow]:
    """One row per ``ORDERS``: ``people`` from ``people_labels``; ``ab`` / ``ba`` the judge's
    outcome codes (``BATTLE_OUTCOMES``; negative: none) with side A / side B shown first.

    Every pair with a people's label is in exactly one of a row's ``n``, ``n_inconsistent``
    (the ``both`` row only) and ``n_no_verdict``."""
    people, ab, ba = (np.asarray(x, dtype=np.int64) for x in (people, ab, ba))
    labelled = people >= 0
    in_both = (ab >= 0) & (ba >= 0)
    inconsistent = in_both & (ab != ba)
    n_inconsistent = int((labelled & inconsistent).sum())
    verdicts = {
        "both": np.where(in_both & ~inconsistent, _folded(ab), -1),
        "ab": _folded(ab),
        "ba": _folded(ba),
    }
    rows = []
    for order in ORDERS:
        verdict = verdicts[order]
        no_verdict = labelled & (verdict < 0)
        if order == "both":
            no_verdict &= ~inconsistent
        rows.append(
            JudgeHumanRow(
                judge=judge,
                order=order,
                n_inconsistent=n_inconsistent,
                n_no_verdict=int(no_verdict.sum()),
                agreement=alignment_row(
                    people,
                    verdict,
                    len(CATEGORIES),
                    rng=rng_for(seed, "pairwise-judge-human", judge, order),
                    resamples=resamples,
                    judge_name=judge,
                    group=order,
                ),
            )
        )
    return rows
