"""Bradley–Terry ranking of reply sources from pairwise battles, as Chatbot Arena ranks models.

- **Model** (Bradley & Terry 1952): source i beats source j with probability
  σ(β_i − β_j) = 1 / (1 + exp(β_j − β_i)), β_i the source's natural log-strength. Fitted by
  maximum likelihood on the battles aggregated per pair of sources: the weighted logistic
  log-likelihood Σ_pairs w_ij·log σ(β_i − β_j) + w_ji·log σ(β_j − β_i), maximised by
  ``scipy.optimize.minimize`` (``trust-exact``: Newton steps in a trust region, with the exact
  gradient and Hessian), the way Chatbot Arena's notebook fits it with a logistic regression.
- **Ties** (``ties="half"``, the default): a tie — ``tie`` or ``tie (bothbad)`` alike — is half a
  win to each side, as in Chatbot Arena's ``compute_mle_elo``; ``ties="exclude"`` leaves every
  tie out (of the fit, the win rates, the comparisons and the bootstrap).
- **Prior**: a normal prior N(0, ``prior_sd``²) on every β, ``prior_sd`` = 10 by default
  (≈ 1,737 rating points; at most 100). It keeps every fit finite — the plain
  maximum-likelihood estimate does not exist when some group of sources never lost (a tie
  counts as half a loss) to the rest (Ford 1957), e.g. a source that won every battle, in the
  data or in one bootstrap resample — and it pulls a rating towards the mean by about
  prior_sd⁻² / (n·p(1−p)) of its distance, n the source's battles and p its typical chance of
  winning (at the default, 0.4 % for ten even battles): far inside its interval. Where the
  data leave a gap unbounded, the result names the groups (``unbounded_groups``, ``notes()``).
- **Scale and anchor**: rating = base + 400·log10(e)·β (``RATING_PER_LOG_STRENGTH`` ≈ 173.72
  points per unit of β), so that P(i beats j) = 1 / (1 + 10^((R_j − R_i) / 400)): Chatbot
  Arena's SCALE 400, BASE 10, INIT_RATING 1000. β is identified by its mean: the mean rating is
  ``base`` (1000); with ``anchor=source`` that source's rating is ``base`` instead (Chatbot Arena
  anchors one model at a fixed rating), and its interval is a point.
- **Bootstrap**: 1,000 seeded resamples of the battles with replacement; 95 % percentile
  intervals of each rating (``resampling.percentile_interval``), each resample's ratings
  identified as above.
- **Rank** = 1 + the number of sources whose lower bound lies above this source's upper bound
  (Chatbot Arena's convention): sources whose intervals overlap share a rank.
- **Connectivity**: ratings compare only sources linked by a chain of battles; a comparison
  graph that is not connected (``scipy.sparse.csgraph.connected_components``) raises
  ``DisconnectedComparisonsError`` naming the separate groups.

docs/statistics.md, "Bradley–Terry ranking", states the same with its sources.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import optimize, sparse, special
from scipy.sparse import csgraph

from benchmark.vocabulary import BATTLE_TIES, BattleWinner
from stats.compute.resampling import (
    BATTLE_RESAMPLES,
    CONFIDENCE,
    DEFAULT_SEED,
    percentile_interval,
    rng_for,
    safe_ratio,
)
from stats.interfaces import BATTLE_OUTCOME_CODES, Battles

TieRule = Literal["half", "exclude"]
TIE_RULES: tuple[TieRule, ...] = ("half", "exclude")

SCALE = 400.0  # rating points per factor of ODDS_BASE in the odds of winning
ODDS_BASE = 10.0
BASE_RATING = 1000.0  # the mean rating (or the anchor's)
RATING_PER_LOG_STRENGTH = SCALE / math.log(ODDS_BASE)  # = 400·log10(e) ≈ 173.72
PRIOR_SD = 10.0  # the normal prior's sd on β (≈ 1,737 rating points)

# A fit has converged when the Newton step still to take is below this, in β (≈ 0.0002 rating
# points).
CONVERGED_STEP = 1e-6
# The Hessian is at least the prior's precision, 1 / prior_sd², in every direction, so a
# gradient below _GRADIENT_TOLERANCE leaves a Newton step below _GRADIENT_TOLERANCE · prior_sd²:
# within CONVERGED_STEP up to MAX_PRIOR_SD. A wider prior would let a resample in which one
# source won every battle it drew stall on a nearly flat slope far out.
_GRADIENT_TOLERANCE = 1e-10
MAX_PRIOR_SD = 100.0

# Battles are counted this many at a time: the counting's temporaries stay ~10 MB whatever
# the battle count.
_COUNT_CHUNK = 1 << 17

_A_WINS = BATTLE_OUTCOME_CODES[BattleWinner.MODEL_A]
_TIE_CODES = np.array([BATTLE_OUTCOME_CODES[tie] for tie in BATTLE_TIES])
# A battle's kind within its pair (i < j): i won, j won, or a tie.
_I_WINS, _J_WINS, _TIE = 0, 1, 2


class RankingError(ValueError):
    """The battles cannot be ranked; the message says why."""


class DisconnectedComparisonsError(RankingError):
    """No chain of battles links some sources to the others: their ratings are not comparable.
    ``groups``: the separate groups of sources (each sorted by name, largest group first)."""

    def __init__(self, groups: tuple[tuple[str, ...], ...]) -> None:
        self.groups = groups
        listed = " | ".join("{" + ", ".join(group) + "}" for group in groups)
        super().__init__(
            f"the comparison graph is not connected: no battle links these {len(groups)} groups "
            f"of sources, so their ratings cannot be compared: {listed}. Add battles between "
            "the groups, or rank each group on its own."
        )


@dataclass(frozen=True)
class PairCounts:
    """Battles per unordered pair of sources that met at least once: ``i[p] < j[p]`` index
    ``sources``; ``wins_i`` / ``wins_j`` count the decisive battles each side won and ``ties``
    the ties of either kind (int64 arrays, one entry per pair)."""

    sources: tuple[str, ...]
    i: np.ndarray
    j: np.ndarray
    wins_i: np.ndarray
    wins_j: np.ndarray
    ties: np.ndarray

    def square(self, upper: np.ndarray, lower: np.ndarray | None = None) -> np.ndarray:
        """An S × S matrix with ``upper[p]`` at [i, j] and ``lower[p]`` (default ``upper``) at
        [j, i]; zero elsewhere."""
        size = len(self.sources)
        out = np.zeros((size, size), dtype=np.result_type(upper, np.int64))
        out[self.i, self.j] = upper
        out[self.j, self.i] = upper if lower is None else lower
        return out


def pair_counts(battles: Battles) -> PairCounts:
    """Count the battles per pair of sources and kind (i won, j won, tie). Resampling battles
    with replacement only ever needs these counts: the bootstrap below works on them."""
    size = len(battles.sources)
    # The distinct cells seen so far and their counts, merged chunk by chunk: at most
    # S(S−1)/2 × 3 entries, whatever the battle count.
    cells, counts = np.empty(0, np.int64), np.empty(0, np.int64)
    for start in range(0, len(battles), _COUNT_CHUNK):
        part = slice(start, start + _COUNT_CHUNK)
        a = battles.a[part].astype(np.int64)
        b = battles.b[part].astype(np.int64)
        outcome = battles.outcome[part]
        # Side A is the lower-numbered source of its pair exactly when a < b.
        kind = np.where((outcome == _A_WINS) == (a < b), _I_WINS, _J_WINS)
        kind[np.isin(outcome, _TIE_CODES)] = _TIE
        found, found_counts = np.unique(
            (np.minimum(a, b) * size + np.maximum(a, b)) * 3 + kind, return_counts=True
        )
        merged, where = np.unique(np.concatenate([cells, found]), return_inverse=True)
        weights = np.concatenate([counts, found_counts])
        cells, counts = merged, np.bincount(where, weights=weights).astype(np.int64)
    pairs, pair_of_cell = np.unique(cells // 3, return_inverse=True)
    per_kind = np.zeros((pairs.size, 3), dtype=np.int64)
    per_kind[pair_of_cell, cells % 3] = counts
    return PairCounts(
        sources=battles.sources,
        i=pairs // size,
        j=pairs % size,
        wins_i=per_kind[:, _I_WINS],
        wins_j=per_kind[:, _J_WINS],
        ties=per_kind[:, _TIE],
    )


@dataclass(frozen=True)
class SourceRating:
    """One source's line of the ranking. ``battles`` counts the battles in the fit (ties
    included under ``ties="half"``); ``ties`` every tie it had, counted in the fit or not."""

    source: str
    rating: float
    ci_low: float
    ci_high: float
    rank: int
    battles: int
    wins: int
    losses: int
    ties: int


@dataclass(frozen=True)
class BradleyTerryResult:
    """The ranking. Every array is in ``sources`` order (sorted by name); S × S matrices are
    [row source, column source]: ``wins[i, j]`` counts the decisive battles i won against j,
    ``ties[i, j]`` every tie between them (counted in the fit or not), ``comparisons[i, j]`` the
    battles between them in the fit, ``win_rate[i, j]`` i's observed share of them (a tie half,
    under ``ties="half"``) and ``predicted[i, j]`` the fitted σ(β_i − β_j). ``win_rate`` and
    ``predicted`` are NaN where undefined (the diagonal; pairs that never met, for
    ``win_rate``)."""

    sources: tuple[str, ...]
    rating: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    rank: np.ndarray
    log_strength: np.ndarray  # β, identified like the ratings (mean 0, or the anchor's 0)
    wins: np.ndarray
    ties: np.ndarray
    comparisons: np.ndarray
    win_rate: np.ndarray
    predicted: np.ndarray
    n_battles: int  # battles in the fit
    n_ties: int  # ties among all the battles, counted in the fit or not
    tie_rule: TieRule
    resamples: int
    level: float
    base: float
    anchor: str | None
    prior_sd: float
    # Groups of sources the data alone cannot keep apart (some group never lost to another):
    # best first; () when every gap is bounded by the data.
    unbounded_groups: tuple[tuple[str, ...], ...]

    def rows(self) -> list[SourceRating]:
        """One line per source, best first (by rating; equal ratings by name)."""
        order = sorted(range(len(self.sources)), key=lambda s: (-self.rating[s], self.sources[s]))
        return [
            SourceRating(
                source=self.sources[s],
                rating=float(self.rating[s]),
                ci_low=float(self.ci_low[s]),
                ci_high=float(self.ci_high[s]),
                rank=int(self.rank[s]),
                battles=int(self.comparisons[s].sum()),
                wins=int(self.wins[s].sum()),
                losses=int(self.wins[:, s].sum()),
                ties=int(self.ties[s].sum()),
            )
            for s in order
        ]

    def notes(self) -> list[str]:
        """What a reader of the ratings must know that the numbers do not say."""
        if not self.unbounded_groups:
            return []
        listed = " | ".join("{" + ", ".join(group) + "}" for group in self.unbounded_groups)
        tie_rule = "a tie counts as half a loss" if self.tie_rule == "half" else "ties left out"
        return [
            "The battles do not bound every gap: of these groups of sources, best first, some "
            f"never lost a battle to another ({tie_rule}): {listed}. Their maximum-likelihood "
            f"gap is infinite; the prior (sd {self.prior_sd:g} in log-strength) keeps it finite, "
            "so read the ratings' gaps between these groups as lower bounds."
        ]


def rank_from_intervals(ci_low: np.ndarray, ci_high: np.ndarray) -> np.ndarray:
    """Rank = 1 + the number of sources whose lower bound lies above this source's upper bound
    (Chatbot Arena's convention): overlapping intervals share a rank."""
    ci_low, ci_high = np.asarray(ci_low, dtype=float), np.asarray(ci_high, dtype=float)
    return 1 + (ci_low[None, :] > ci_high[:, None]).sum(axis=1)


def bradley_terry(
    battles: Battles,
    *,
    ties: TieRule = "half",
    resamples: int = BATTLE_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = CONFIDENCE,
    base: float = BASE_RATING,
    anchor: str | None = None,
    prior_sd: float = PRIOR_SD,
) -> BradleyTerryResult:
    """Fit the sources' ratings with bootstrap intervals and ranks (module docstring). The
    bootstrap draws from ``rng_for(seed, "bradley-terry")``.

    Raises ``RankingError`` (a ValueError) when there is nothing to rank — no battle in the
    fit, or a single source — and ``DisconnectedComparisonsError`` when some sources are not
    linked to the others by battles."""
    if ties not in TIE_RULES:
        raise ValueError(f"ties must be one of {', '.join(TIE_RULES)}, not {ties!r}")
    if not (isinstance(resamples, int) and resamples >= 1):
        raise ValueError(f"resamples must be a positive integer, not {resamples!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie between 0 and 1, not {level!r}")
    if not 0 < prior_sd <= MAX_PRIOR_SD:
        raise ValueError(f"prior_sd must lie in (0, {MAX_PRIOR_SD:g}], not {prior_sd!r}")
    if anchor is not None and anchor not in battles.sources:
        raise ValueError(f"anchor {anchor!r} is not one of the sources")

    counts = pair_counts(battles)
    n_ties = int(counts.ties.sum())
    # Each pair's outcomes as columns: i won, j won and, under "half", ties.
    cells = np.column_stack(
        [counts.wins_i, counts.wins_j] + ([counts.ties] if ties == "half" else [])
    )
    n_battles = int(cells.sum())
    if len(battles.sources) == 1:
        raise RankingError(
            f"only one source ({battles.sources[0]}): a ranking needs battles between at least "
            "two sources"
        )
    if n_battles == 0:
        left_out = f" ({n_ties} ties left out by ties='exclude')" if n_ties else ""
        raise RankingError(f"there are no battles to rank{left_out}")
    met = cells.sum(axis=1) > 0
    i, j = counts.i[met], counts.j[met]
    cells = cells[met]
    _check_connected(battles.sources, i, j)

    fit = _Fit(i=i, j=j, n_sources=len(battles.sources), precision=prior_sd**-2)
    beta = fit.log_strengths(*_scores(cells), start=np.zeros(len(battles.sources)))

    rng = rng_for(seed, "bradley-terry")
    # Resampling the n battles with replacement draws how many copies of each battle enter the
    # resample: Multinomial(n; 1/n, …). Battles of one pair and outcome are interchangeable, so
    # this is exactly a Multinomial(n; count_c / n) draw of the cell counts (pair × outcome), and
    # each resample costs one fit on at most S(S−1)/2 × 3 cells, whatever the battle count.
    probabilities = (cells / n_battles).ravel()
    draws = np.empty((resamples, len(battles.sources)))
    for r in range(resamples):
        drawn = rng.multinomial(n_battles, probabilities).reshape(cells.shape)
        # The point estimate is a close start: a resample's fit takes a few Newton steps.
        draws[r] = fit.log_strengths(*_scores(drawn), start=beta)

    anchor_index = None if anchor is None else battles.sources.index(anchor)
    beta = _identified(beta, anchor_index)
    rating = base + RATING_PER_LOG_STRENGTH * beta
    resampled = base + RATING_PER_LOG_STRENGTH * _identified(draws, anchor_index)
    bounds = np.array([percentile_interval(column, level) for column in resampled.T])

    score_i, score_j = _scores(cells)
    scores = np.zeros((len(battles.sources),) * 2)
    scores[i, j], scores[j, i] = score_i, score_j
    comparisons = np.zeros((len(battles.sources),) * 2, dtype=np.int64)
    comparisons[i, j] = comparisons[j, i] = cells.sum(axis=1)
    predicted = special.expit(beta[:, None] - beta[None, :])
    np.fill_diagonal(predicted, np.nan)
    return BradleyTerryResult(
        sources=battles.sources,
        rating=rating,
        ci_low=bounds[:, 0],
        ci_high=bounds[:, 1],
        rank=rank_from_intervals(bounds[:, 0], bounds[:, 1]),
        log_strength=beta,
        wins=counts.square(counts.wins_i, counts.wins_j),
        ties=counts.square(counts.ties),
        comparisons=comparisons,
        win_rate=safe_ratio(scores, comparisons),
        predicted=predicted,
        n_battles=n_battles,
        n_ties=n_ties,
        tie_rule=ties,
        resamples=resamples,
        level=level,
        base=base,
        anchor=anchor,
        prior_sd=prior_sd,
        unbounded_groups=_unbounded_groups(battles.sources, i, j, cells, rating),
    )


def _scores(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's wins for i and for j, a tie (third column, if any) half to each."""
    half_ties = cells[:, 2] / 2 if cells.shape[1] == 3 else 0.0
    return cells[:, 0] + half_ties, cells[:, 1] + half_ties


def _identified(beta: np.ndarray, anchor: int | None) -> np.ndarray:
    """β (one fit per row) shifted so that its mean, or the anchor's β, is 0."""
    shift = beta.mean(axis=-1) if anchor is None else beta[..., anchor]
    return beta - np.expand_dims(shift, -1)


def _check_connected(sources: tuple[str, ...], i: np.ndarray, j: np.ndarray) -> None:
    n_groups, group = csgraph.connected_components(_graph(len(sources), i, j), directed=False)
    if n_groups > 1:
        groups = [
            tuple(s for s, g in zip(sources, group, strict=True) if g == k) for k in range(n_groups)
        ]
        groups.sort(key=lambda members: (-len(members), members))
        raise DisconnectedComparisonsError(tuple(groups))


def _unbounded_groups(
    sources: tuple[str, ...], i: np.ndarray, j: np.ndarray, cells: np.ndarray, rating: np.ndarray
) -> tuple[tuple[str, ...], ...]:
    """The maximum-likelihood estimate is finite exactly when the graph with an edge from i to j
    wherever i scored against j (won, or tied under "half") is strongly connected (Ford 1957).
    Otherwise: its strongly connected components, best first."""
    score_i, score_j = _scores(cells)
    edges_from = np.concatenate([i[score_i > 0], j[score_j > 0]])
    edges_to = np.concatenate([j[score_i > 0], i[score_j > 0]])
    graph = _graph(len(sources), edges_from, edges_to)
    n_groups, group = csgraph.connected_components(graph, directed=True, connection="strong")
    if n_groups == 1:
        return ()
    groups = [np.flatnonzero(group == k) for k in range(n_groups)]
    groups.sort(key=lambda members: -rating[members].mean())
    return tuple(tuple(sources[s] for s in members) for members in groups)


def _graph(size: int, rows: np.ndarray, columns: np.ndarray) -> sparse.csr_array:
    ones = np.ones(rows.size)
    return sparse.csr_array((ones, (rows, columns)), shape=(size, size))


@dataclass(frozen=True)
class _Fit:
    """The penalised negative log-likelihood of β given each pair's (fractional) wins, with its
    gradient and Hessian. The Hessian is the pairs' Laplacian weighted by n·p(1−p), plus the
    prior's precision on the diagonal: positive definite, so the optimum is unique."""

    i: np.ndarray
    j: np.ndarray
    n_sources: int
    precision: float  # 1 / prior_sd²

    def log_strengths(
        self, wins_i: np.ndarray, wins_j: np.ndarray, *, start: np.ndarray
    ) -> np.ndarray:
        result = optimize.minimize(
            self._loss,
            start,
            args=(wins_i, wins_j),
            jac=True,
            hess=self._hessian,
            method="trust-exact",
            options={"gtol": _GRADIENT_TOLERANCE},
        )
        beta = result.x
        # trust-exact gives up ("a bad approximation caused failure to predict improvement")
        # once the loss no longer changes within floating-point precision, which with a
        # million battles comes before its gradient tolerance. Convergence is therefore judged
        # here, by the Newton step still to take. Only its centred part counts: the loss is
        # the prior's alone along the all-ones direction (every β shifted alike), which the
        # identification removes, and with a wide prior that direction is nearly flat.
        _, gradient = self._loss(beta, wins_i, wins_j)
        step = np.linalg.solve(self._hessian(beta, wins_i, wins_j), gradient)
        step -= step.mean()
        if not (np.all(np.isfinite(beta)) and np.abs(step).max() <= CONVERGED_STEP):
            raise RuntimeError(f"the Bradley–Terry fit did not converge: {result.message}")
        return beta

    def _loss(
        self, beta: np.ndarray, wins_i: np.ndarray, wins_j: np.ndarray
    ) -> tuple[float, np.ndarray]:
        margin = beta[self.i] - beta[self.j]
        loss = (
            wins_i @ np.logaddexp(0.0, -margin)
            + wins_j @ np.logaddexp(0.0, margin)
            + self.precision * (beta @ beta) / 2
        )
        # d loss / d margin = n·σ(margin) − wins_i, + to i and − to j.
        slope = (wins_i + wins_j) * special.expit(margin) - wins_i
        gradient = (
            np.bincount(self.i, slope, self.n_sources)
            - np.bincount(self.j, slope, self.n_sources)
            + self.precision * beta
        )
        return float(loss), gradient

    def _hessian(self, beta: np.ndarray, wins_i: np.ndarray, wins_j: np.ndarray) -> np.ndarray:
        p = special.expit(beta[self.i] - beta[self.j])
        weight = (wins_i + wins_j) * p * (1 - p)
        hessian = np.zeros((self.n_sources, self.n_sources))
        hessian[self.i, self.j] = hessian[self.j, self.i] = -weight
        diagonal = np.bincount(self.i, weight, self.n_sources) + np.bincount(
            self.j, weight, self.n_sources
        )
        hessian[np.diag_indices(self.n_sources)] = diagonal + self.precision
        return hessian
