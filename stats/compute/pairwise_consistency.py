"""A pairwise judge's consistency under the swap: each comparison judged twice, once with side A
shown first (order "ab") and once with side B shown first ("ba"), both verdicts already mapped
back to sides (``BattleWinner``). After Zheng et al. (2023), "Judging LLM-as-a-Judge with
MT-Bench and Chatbot Arena", §3.3–3.4: a verdict counts only if it survives the swap.

- **Consistent**: the two verdicts name the same outcome (A, B, tie or both bad). The
  consistent share and the **flip rate** (1 − it: the share whose verdict does not survive the
  swap) are over the comparisons with a usable verdict in both orders, with Wilson intervals.
- **Side reversals**: comparisons whose winner swapped sides (A in one order, B in the other):
  the plainest sign of position bias, a subset of the flips.
- **First-position share**: of the verdicts (each order counts) that name a side, the share
  naming the reply shown first; 0.5 without position bias. Wilson interval and a two-sided exact
  binomial p against 0.5 (``preference.binomial_summary``, as the human studies' left share).
- **Tie share**: of all usable verdicts, the share that are ties (tie or both bad).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchmark.vocabulary import BATTLE_TIES, BattleWinner
from stats.compute.failure_modes import wilson_interval
from stats.compute.preference import BinomialSummary, binomial_summary
from stats.interfaces import BATTLE_OUTCOME_CODES

# Winner codes are the battles' outcome codes (``stats.interfaces.BATTLE_OUTCOMES``).
A = BATTLE_OUTCOME_CODES[BattleWinner.MODEL_A]
B = BATTLE_OUTCOME_CODES[BattleWinner.MODEL_B]
TIE_CODES = tuple(BATTLE_OUTCOME_CODES[tie] for tie in BATTLE_TIES)
NOT_ASKED = -1
ERROR = -2
"""Codes of a comparison without a verdict in an order: not (yet) asked, or a judge error."""


@dataclass(frozen=True)
class PairwiseConsistency:
    pairs: int  # comparisons with a usable verdict in both orders
    consistent: int
    flip_rate: float
    flip_ci: tuple[float, float]
    reversals: int  # A in one order, B in the other
    decisive: int  # usable verdicts (either order) naming a side
    first_position: BinomialSummary  # of ``decisive``: naming the reply shown first
    verdicts: int  # usable verdicts, either order
    ties: int  # of ``verdicts``: tie or both bad
    errors: int  # judge_error verdicts, either order
    one_order_only: int  # comparisons with a usable verdict in one order only

    @property
    def consistent_share(self) -> float:
        return self.consistent / self.pairs if self.pairs else float("nan")

    @property
    def tie_share(self) -> float:
        return self.ties / self.verdicts if self.verdicts else float("nan")


def pairwise_consistency(ab: np.ndarray, ba: np.ndarray) -> PairwiseConsistency:
    """``ab[i]`` / ``ba[i]``: comparison i's winner code (``BATTLE_OUTCOME_CODES``) with A / B
    shown first, ``NOT_ASKED`` or ``ERROR`` where there is none."""
    ab, ba = np.asarray(ab, dtype=np.int64), np.asarray(ba, dtype=np.int64)
    if ab.shape != ba.shape:
        raise ValueError(f"ab and ba differ in length ({ab.size} and {ba.size})")
    usable_ab, usable_ba = ab >= 0, ba >= 0
    both = usable_ab & usable_ba
    pairs = int(both.sum())
    consistent = int((both & (ab == ba)).sum())
    flips = pairs - consistent
    reversals = int((both & (((ab == A) & (ba == B)) | ((ab == B) & (ba == A)))).sum())
    # The reply shown first is A in order ab and B in order ba.
    decisive = int(np.isin(ab, (A, B)).sum() + np.isin(ba, (A, B)).sum())
    first = int((ab == A).sum() + (ba == B).sum())
    verdicts = int(usable_ab.sum() + usable_ba.sum())
    ties = int(np.isin(ab, TIE_CODES).sum() + np.isin(ba, TIE_CODES).sum())
    return PairwiseConsistency(
        pairs=pairs,
        consistent=consistent,
        flip_rate=flips / pairs if pairs else float("nan"),
        flip_ci=wilson_interval(flips, pairs),
        reversals=reversals,
        decisive=decisive,
        first_position=binomial_summary(first, decisive),
        verdicts=verdicts,
        ties=ties,
        errors=int((ab == ERROR).sum() + (ba == ERROR).sum()),
        one_order_only=int((usable_ab ^ usable_ba).sum()),
    )
