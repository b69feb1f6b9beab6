"""Bradley–Terry ranking: recovery of known strengths, the scores against references computed
here by other routes (Zermelo's iteration, a per-battle likelihood, closed forms), ties,
connectivity, the bootstrap and the rank rule, and the battles' structure."""

import math
from collections import Counter

import numpy as np
import pytest
from scipy import optimize, special

from benchmark.vocabulary import BattleWinner
from stats.compute import bradley_terry as bt_module
from stats.compute.bradley_terry import (
    RATING_PER_LOG_STRENGTH,
    DisconnectedComparisonsError,
    RankingError,
    bradley_terry,
    pair_counts,
    rank_from_intervals,
)
from stats.interfaces import Battles

A_WINS, B_WINS = BattleWinner.MODEL_A.value, BattleWinner.MODEL_B.value
TIE, BOTHBAD = BattleWinner.TIE.value, BattleWinner.TIE_BOTHBAD.value
# The widest prior allowed: it moves these ratings by less than 0.01 rating points from the plain
# maximum-likelihood estimate (a shift of ~ 1e-4 · β / information, module docstring).
WIDEST_PRIOR = 100.0


def _elo_win_probability(rating_i, rating_j):
    return 1 / (1 + 10 ** ((rating_j - rating_i) / 400))


def _simulate(ratings, n_battles, *, seed, tie_share=0.0):
    """Battles between random pairs of sources whose true Elo-scale ratings are ``ratings``;
    with ``tie_share``, that share of battles is a tie whatever the strengths."""
    rng = np.random.default_rng(seed)
    names = [f"src-{k}" for k in range(len(ratings))]
    ratings = np.asarray(ratings, dtype=float)
    a = rng.integers(0, len(ratings), n_battles)
    b = (a + rng.integers(1, len(ratings), n_battles)) % len(ratings)
    p = _elo_win_probability(ratings[a], ratings[b])
    roll = rng.random(n_battles)
    tie = rng.random(n_battles) < tie_share
    winners = np.where(tie, TIE, np.where(roll < p, A_WINS, B_WINS))
    return [(names[x], names[y], w) for x, y, w in zip(a, b, winners.tolist(), strict=True)]


# A fixed small dataset: four sources, both orders of sides, both kinds of tie; every source
# wins and loses, so the plain maximum-likelihood estimate exists.
PAIR_OUTCOMES = {
    ("alpha", "beta"): (6, 3, 2),  # alpha wins, beta wins, ties
    ("alpha", "gamma"): (5, 2, 1),
    ("beta", "gamma"): (4, 4, 1),
    ("gamma", "delta"): (5, 2, 0),
    ("beta", "delta"): (3, 1, 1),
    ("alpha", "delta"): (4, 1, 0),
}


PAIR_OUTCOMES_N = [sum(outcomes) for outcomes in PAIR_OUTCOMES.values()]


def _fixed_records():
    records = []
    for k, ((first, second), (wins, losses, ties)) in enumerate(PAIR_OUTCOMES.items()):
        # Alternate which source is stored as side A, and which kind of tie.
        for n in range(wins):
            records.append((first, second, A_WINS) if n % 2 else (second, first, B_WINS))
        for n in range(losses):
            records.append((second, first, A_WINS) if n % 2 else (first, second, B_WINS))
        for n in range(ties):
            records.append((first, second, BOTHBAD if (n + k) % 2 else TIE))
    return records


def _zermelo(sources, pair_outcomes, *, ties="half", tolerance=1e-15):
    """Zermelo's iteration (Hunter 2004, the MM algorithm): π_i ← W_i / Σ_j n_ij / (π_i + π_j),
    W_i the wins of i (a tie half to each side, or left out). Returns Elo-scale ratings with
    mean 1000."""
    index = {s: k for k, s in enumerate(sources)}
    size = len(sources)
    wins = np.zeros((size, size))
    for (first, second), (w, losses, t) in pair_outcomes.items():
        half = t / 2 if ties == "half" else 0
        wins[index[first], index[second]] += w + half
        wins[index[second], index[first]] += losses + half
    games = wins + wins.T
    pi = np.ones(size)
    for _ in range(100_000):
        new = wins.sum(axis=1) / (games / (pi[:, None] + pi[None, :])).sum(axis=1)
        new /= np.exp(np.log(new).mean())
        if np.abs(new - pi).max() < tolerance:
            break
        pi = new
    log_pi = np.log(pi)
    return 1000 + 400 * np.log10(np.e) * (log_pi - log_pi.mean())


def test_simulated_battles_recover_the_true_ratings_within_their_intervals():
    truth = np.array([1250.0, 1130.0, 1080.0, 1000.0, 900.0, 640.0])
    result = bradley_terry(Battles.from_records(_simulate(truth, 30_000, seed=11)))
    centred = truth - truth.mean() + 1000  # the ratings are identified by their mean
    order = np.argsort(result.sources)  # src-0 … src-5
    assert result.sources == tuple(f"src-{k}" for k in range(6))
    assert np.all(result.ci_low <= centred) and np.all(centred <= result.ci_high)
    assert list(np.argsort(-result.rating)) == list(order)
    # spacing: each gap between neighbours within the two intervals' half-widths combined
    gaps, true_gaps = -np.diff(result.rating), -np.diff(centred)
    half_widths = (result.ci_high - result.ci_low) / 2
    assert np.all(np.abs(gaps - true_gaps) < half_widths[:-1] + half_widths[1:])
    assert result.rating.mean() == pytest.approx(1000)
    # the predicted matrix is the Elo formula of the fitted ratings
    i, j = 0, 5
    expected = _elo_win_probability(result.rating[i], result.rating[j])
    assert result.predicted[i, j] == pytest.approx(expected, rel=1e-12)
    off_diagonal = ~np.eye(6, dtype=bool)
    assert np.allclose((result.predicted + result.predicted.T)[off_diagonal], 1)
    assert np.all(np.isnan(np.diag(result.predicted)))


def test_ties_independent_of_strength_left_out_leave_the_true_ratings_recoverable():
    truth = np.array([1150.0, 1000.0, 850.0])
    records = _simulate(truth, 20_000, seed=5, tie_share=0.3)
    excluded = bradley_terry(Battles.from_records(records), ties="exclude", resamples=400)
    centred = truth - truth.mean() + 1000
    assert np.all(excluded.ci_low <= centred) and np.all(centred <= excluded.ci_high)
    # counted as half a win each, ties that say nothing about strength pull ratings together
    half = bradley_terry(Battles.from_records(records), resamples=10)
    assert np.all(np.abs(half.rating - 1000) < np.abs(excluded.rating - 1000))
    assert excluded.n_ties == half.n_ties == sum(w == TIE for _, _, w in records)
    assert half.n_battles == len(records) == excluded.n_battles + excluded.n_ties


@pytest.mark.parametrize("ties", ["half", "exclude"])
def test_fixed_dataset_scores_equal_zermelos_iteration(ties):
    battles = Battles.from_records(_fixed_records())
    result = bradley_terry(battles, ties=ties, prior_sd=WIDEST_PRIOR, resamples=20)
    assert result.sources == ("alpha", "beta", "delta", "gamma")
    reference = _zermelo(result.sources, PAIR_OUTCOMES, ties=ties)
    assert result.rating == pytest.approx(reference, abs=0.01)
    assert result.unbounded_groups == ()


def test_the_default_prior_matches_a_per_battle_penalised_likelihood_maximised_by_bfgs():
    """The same model written battle by battle (no aggregation), with the same N(0, 10²) prior,
    maximised by BFGS on finite-difference gradients."""
    records = _fixed_records()
    battles = Battles.from_records(records)
    result = bradley_terry(battles, resamples=20)
    index = {s: k for k, s in enumerate(result.sources)}
    a = np.array([index[r[0]] for r in records])
    b = np.array([index[r[1]] for r in records])
    score_a = np.array([{A_WINS: 1.0, B_WINS: 0.0}.get(r[2], 0.5) for r in records])

    def negative_log_posterior(beta):
        p = 1 / (1 + np.exp(beta[b] - beta[a]))
        loglik = score_a * np.log(p) + (1 - score_a) * np.log(1 - p)
        return -loglik.sum() + (beta @ beta) / (2 * 10.0**2)

    found = optimize.minimize(negative_log_posterior, np.zeros(4), method="BFGS", tol=1e-12)
    beta = found.x - found.x.mean()
    assert result.log_strength == pytest.approx(beta, abs=1e-5)
    assert result.rating == pytest.approx(1000 + 400 * np.log10(np.e) * beta, abs=1e-3)


def test_the_prior_moves_well_measured_ratings_far_less_than_their_intervals():
    battles = Battles.from_records(_simulate([1200, 1050, 1000, 800], 2_000, seed=3))
    with_prior = bradley_terry(battles, resamples=200)
    without = bradley_terry(battles, resamples=200, prior_sd=WIDEST_PRIOR)
    widths = with_prior.ci_high - with_prior.ci_low
    assert np.all(np.abs(with_prior.rating - without.rating) < 0.01 * widths)
    assert np.all(np.abs(with_prior.rating - without.rating) > 0)  # it is there


def _two_source_gap(wins, losses, prior_sd):
    """The rating gap of two sources that met ``wins + losses`` times (fractional wins allowed):
    the penalised likelihood's stationary point in d = β_winner − β_loser, found by root
    bracketing (with the prior N(0, sd²) on each β, β = ±d/2 at the optimum)."""

    def slope(d):
        return -wins * special.expit(-d) + losses * special.expit(d) + d / (2 * prior_sd**2)

    return 400 * math.log10(math.e) * optimize.brentq(slope, -50, 50, xtol=1e-14)


def test_ties_count_half_to_each_side_or_are_left_out():
    # beta: 3 wins, alpha: 1 win, 4 ties (two of each kind). Two sources: the plain
    # maximum-likelihood gap is 400·log10(share / (1 − share)) of the observed share.
    records = (
        [("alpha", "beta", B_WINS)] * 2
        + [("beta", "alpha", A_WINS)]
        + [("alpha", "beta", A_WINS)]
        + [("alpha", "beta", TIE), ("beta", "alpha", TIE)]
        + [("alpha", "beta", BOTHBAD), ("beta", "alpha", BOTHBAD)]
    )
    battles = Battles.from_records(records)
    half = bradley_terry(battles, prior_sd=WIDEST_PRIOR, resamples=50)
    assert half.win_rate[1, 0] == pytest.approx((3 + 2) / 8)
    gap = half.rating[1] - half.rating[0]
    assert gap == pytest.approx(_two_source_gap(5, 3, WIDEST_PRIOR), abs=1e-6)
    assert gap == pytest.approx(400 * math.log10(5 / 3), abs=0.05)
    assert half.comparisons[0, 1] == 8 and half.ties[0, 1] == 4 and half.n_ties == 4
    excluded = bradley_terry(battles, ties="exclude", prior_sd=WIDEST_PRIOR, resamples=50)
    assert excluded.win_rate[1, 0] == pytest.approx(3 / 4)
    gap = excluded.rating[1] - excluded.rating[0]
    assert gap == pytest.approx(_two_source_gap(3, 1, WIDEST_PRIOR), abs=1e-6)
    assert gap == pytest.approx(400 * math.log10(3), abs=0.05)
    default = bradley_terry(battles, ties="exclude", resamples=50)
    assert default.rating[1] - default.rating[0] == pytest.approx(
        _two_source_gap(3, 1, 10.0), abs=1e-6
    )
    assert excluded.comparisons[0, 1] == 4 and excluded.ties[0, 1] == 4
    assert excluded.n_battles == 4 and excluded.n_ties == 4
    assert [(r.source, r.battles, r.wins, r.losses, r.ties) for r in excluded.rows()] == [
        ("beta", 4, 3, 1, 4),
        ("alpha", 4, 1, 3, 4),
    ]
    assert [(r.source, r.battles) for r in half.rows()] == [("beta", 8), ("alpha", 8)]


def test_a_tie_both_bad_counts_like_a_tie():
    both_good = [("x", "y", A_WINS), ("y", "x", A_WINS), ("x", "y", A_WINS), ("x", "y", TIE)]
    both_bad = [*both_good[:3], ("x", "y", BOTHBAD)]
    one = bradley_terry(Battles.from_records(both_good), resamples=100)
    other = bradley_terry(Battles.from_records(both_bad), resamples=100)
    assert one.rating == pytest.approx(other.rating, abs=1e-9)
    assert one.ci_low == pytest.approx(other.ci_low) and one.ci_high == pytest.approx(other.ci_high)


def test_observed_win_rates_and_comparisons_of_the_fixed_dataset():
    result = bradley_terry(Battles.from_records(_fixed_records()), resamples=20)
    k = {s: n for n, s in enumerate(result.sources)}
    for (first, second), (wins, losses, ties) in PAIR_OUTCOMES.items():
        n = wins + losses + ties
        assert result.comparisons[k[first], k[second]] == n
        assert result.comparisons[k[second], k[first]] == n
        assert result.wins[k[first], k[second]] == wins
        assert result.wins[k[second], k[first]] == losses
        assert result.win_rate[k[first], k[second]] == pytest.approx((wins + ties / 2) / n)
        assert result.win_rate[k[second], k[first]] == pytest.approx((losses + ties / 2) / n)
    assert result.n_battles == len(_fixed_records())
    assert np.all(np.isnan(np.diag(result.win_rate)))


def test_a_comparison_graph_that_is_not_connected_names_its_groups():
    records = [
        ("a", "b", A_WINS),
        ("b", "a", A_WINS),
        ("c", "d", A_WINS),
        ("d", "e", B_WINS),
        ("e", "c", TIE),
    ]
    with pytest.raises(DisconnectedComparisonsError) as raised:
        bradley_terry(Battles.from_records(records))
    assert isinstance(raised.value, ValueError)
    assert raised.value.groups == (("c", "d", "e"), ("a", "b"))
    assert "not connected" in str(raised.value)
    assert "{c, d, e} | {a, b}" in str(raised.value)


def test_a_pair_linked_only_by_ties_is_disconnected_when_ties_are_left_out():
    records = [("a", "b", A_WINS), ("b", "a", A_WINS), ("b", "c", TIE), ("c", "b", BOTHBAD)]
    battles = Battles.from_records(records)
    assert bradley_terry(battles, resamples=10).n_battles == 4
    with pytest.raises(DisconnectedComparisonsError, match=r"\{a, b\} \| \{c\}"):
        bradley_terry(battles, ties="exclude")


def test_one_source_or_no_battle_is_a_clear_error():
    one = Battles(
        sources=("solo",),
        a=np.empty(0, np.int32),
        b=np.empty(0, np.int32),
        outcome=np.empty(0, np.int8),
    )
    with pytest.raises(RankingError, match=r"only one source \(solo\)"):
        bradley_terry(one)
    with pytest.raises(RankingError, match="no battles to rank"):
        bradley_terry(Battles.from_records([]))
    only_ties = Battles.from_records([("a", "b", TIE), ("b", "a", BOTHBAD)])
    with pytest.raises(RankingError, match=r"no battles to rank \(2 ties left out"):
        bradley_terry(only_ties, ties="exclude")


def test_the_bootstrap_is_reproducible_with_a_seed_and_changes_with_another():
    records = _simulate([1100, 1000, 950, 900], 600, seed=2)
    battles = Battles.from_records(records)
    first = bradley_terry(battles, seed=7, resamples=300)
    again = bradley_terry(battles, seed=7, resamples=300)
    other = bradley_terry(battles, seed=8, resamples=300)
    assert np.array_equal(first.ci_low, again.ci_low)
    assert np.array_equal(first.ci_high, again.ci_high)
    assert not np.array_equal(first.ci_low, other.ci_low)
    assert np.array_equal(first.rating, other.rating)  # the point estimate draws nothing
    # the battles' order changes nothing: sources are sorted, the bootstrap draws cell counts
    shuffled = [records[k] for k in np.random.default_rng(0).permutation(len(records))]
    reordered = bradley_terry(Battles.from_records(shuffled), seed=7, resamples=300)
    assert np.array_equal(first.ci_low, reordered.ci_low)
    assert np.array_equal(first.rating, reordered.rating)


def test_the_cell_count_bootstrap_matches_resampling_battles_one_by_one():
    """The textbook bootstrap: draw battle indices with replacement and refit (here with
    Zermelo's iteration). Its intervals agree with the multinomial draw of the cell counts
    within Monte Carlo error."""
    records = _simulate([1080, 1000, 920], 400, seed=9)
    result = bradley_terry(Battles.from_records(records), resamples=2_000, prior_sd=WIDEST_PRIOR)
    sources = result.sources
    # each battle as (pair, i won?), pairs named in sorted order
    keyed = []
    for first, second, winner in records:
        pair, flip = ((first, second), False) if first < second else ((second, first), True)
        keyed.append((pair, (winner == A_WINS) != flip))
    rng = np.random.default_rng(1)
    resampled = []
    for _ in range(2_000):
        outcomes: dict[tuple[str, str], list[int]] = {}
        for k in rng.integers(0, len(records), len(records)):
            pair, won = keyed[k]
            outcomes.setdefault(pair, [0, 0, 0])[0 if won else 1] += 1
        table = {pair: tuple(counts) for pair, counts in outcomes.items()}
        resampled.append(_zermelo(sources, table, tolerance=1e-10))
    low, high = np.percentile(resampled, [2.5, 97.5], axis=0)
    widths = result.ci_high - result.ci_low
    assert np.all(np.abs(result.ci_low - low) < 0.1 * widths)
    assert np.all(np.abs(result.ci_high - high) < 0.1 * widths)


def test_ranks_are_shared_where_intervals_overlap():
    low = np.array([10.0, 15.0, 0.0, 30.0])
    high = np.array([20.0, 25.0, 5.0, 40.0])
    # D is above everyone; A and B overlap, both below D; C is below all three.
    assert rank_from_intervals(low, high).tolist() == [2, 2, 4, 1]


def test_close_sources_share_a_rank_in_a_fit():
    battles = Battles.from_records(_simulate([1300, 1005, 995, 700], 4_000, seed=4))
    result = bradley_terry(battles, resamples=300)
    assert [(row.source, row.rank) for row in result.rows()] == [
        ("src-0", 1),
        ("src-1", 2),
        ("src-2", 2),
        ("src-3", 4),
    ]


def test_an_anchor_source_is_placed_at_the_base_rating():
    battles = Battles.from_records(_fixed_records())
    by_mean = bradley_terry(battles, resamples=100)
    anchored = bradley_terry(battles, resamples=100, anchor="gamma", base=1114)
    gamma = by_mean.sources.index("gamma")
    assert anchored.rating[gamma] == pytest.approx(1114)
    assert anchored.ci_low[gamma] == pytest.approx(1114) == anchored.ci_high[gamma]
    shift = 1114 - by_mean.rating[gamma]
    assert anchored.rating == pytest.approx(by_mean.rating + shift)
    assert anchored.log_strength == pytest.approx(
        (anchored.rating - 1114) / RATING_PER_LOG_STRENGTH
    )
    with pytest.raises(ValueError, match="anchor 'omega' is not one of the sources"):
        bradley_terry(battles, anchor="omega")


def test_a_source_that_never_loses_stays_finite_and_is_named():
    records = [("top", "mid", A_WINS)] * 5 + [("mid", "low", A_WINS), ("low", "mid", A_WINS)]
    result = bradley_terry(Battles.from_records(records), resamples=200)
    assert np.all(np.isfinite(result.rating)) and np.all(np.isfinite(result.ci_high))
    assert result.rows()[0].source == "top"
    assert result.unbounded_groups == (("top",), ("low", "mid"))
    assert "{top} | {low, mid}" in result.notes()[0]
    # one tie with the others bounds it (half a loss) — unless ties are left out
    tied = [*records, ("mid", "top", TIE)]
    assert bradley_terry(Battles.from_records(tied), resamples=10).unbounded_groups == ()
    assert bradley_terry(Battles.from_records(tied), resamples=10).notes() == []
    assert bradley_terry(
        Battles.from_records(tied), resamples=10, ties="exclude"
    ).unbounded_groups == (("top",), ("low", "mid"))


def test_a_source_that_never_wins_is_named_last():
    records = [("top", "mid", A_WINS), ("mid", "top", A_WINS)] + [("mid", "low", A_WINS)] * 3
    result = bradley_terry(Battles.from_records(records), resamples=50)
    assert result.unbounded_groups == (("mid", "top"), ("low",))
    assert result.rows()[-1].source == "low"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (("a", "b", "model_c"), "row 2: winner 'model_c' is not one of model_a, model_b, tie"),
        (("a", "b", "Tie"), "row 2: winner 'Tie' is not one of"),
        (("a", "b", None), "row 2: winner None is not one of"),
        (("a", "", TIE), "row 2: source_b '' is not a source name"),
        ((3, "b", TIE), "row 2: source_a 3 is not a source name"),
        (("a", "a", TIE), "row 2: 'a' against itself"),
        (("a", "b"), r"row 2: expected \(source_a, source_b, winner\)"),
    ],
)
def test_a_bad_row_is_named(record, message):
    with pytest.raises(ValueError, match=message):
        Battles.from_records([("a", "b", TIE), record, ("a", "b", TIE)])


def test_battles_are_nine_bytes_each_and_read_lazily():
    def rows():
        yield ("b", "a", A_WINS)
        yield ("c", "a", BattleWinner.TIE_BOTHBAD)  # a vocabulary member is its string
        raise AssertionError("from_records read past the rows it was given")

    with pytest.raises(AssertionError):
        Battles.from_records(rows())
    battles = Battles.from_records([("b", "a", A_WINS), ("c", "a", BattleWinner.TIE_BOTHBAD)])
    assert battles.sources == ("a", "b", "c")
    assert battles.a.tolist() == [1, 2] and battles.b.tolist() == [0, 0]
    assert battles.outcome.tolist() == [0, 3]
    assert battles.a.nbytes + battles.b.nbytes + battles.outcome.nbytes == 9 * len(battles)


def test_battles_from_counts_are_each_row_repeated_count_times():
    """A database's GROUP BY of the fixed dataset gives the same battles, hence the same fit."""
    records = _fixed_records()
    counted = [(*record, n) for record, n in sorted(Counter(records).items())]
    assert len(counted) < len(records)
    got, expected = Battles.from_counts(counted), Battles.from_records(records)
    assert got.sources == expected.sources and len(got) == len(expected) == sum(PAIR_OUTCOMES_N)
    assert (got.a.dtype, got.b.dtype, got.outcome.dtype) == (
        expected.a.dtype,
        expected.b.dtype,
        expected.outcome.dtype,
    )
    as_rows = sorted(zip(got.a.tolist(), got.b.tolist(), got.outcome.tolist(), strict=True))
    assert as_rows == sorted(
        zip(expected.a.tolist(), expected.b.tolist(), expected.outcome.tolist(), strict=True)
    )
    fit, reference = bradley_terry(got, resamples=50), bradley_terry(expected, resamples=50)
    np.testing.assert_array_equal(fit.rating, reference.rating)
    np.testing.assert_array_equal(fit.ci_low, reference.ci_low)
    assert len(Battles.from_counts([])) == 0


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (("a", "b", TIE, 0), "row 2: count 0 is not a positive integer"),
        (("a", "b", TIE, -2), "row 2: count -2 is not a positive integer"),
        (("a", "b", TIE, 1.5), "row 2: count 1.5 is not a positive integer"),
        (("a", "b", TIE, True), "row 2: count True is not a positive integer"),
        (("a", "b", TIE), r"row 2: expected \(source_a, source_b, winner, count\)"),
        (("a", "a", TIE, 3), "row 2: 'a' against itself"),
        (("a", "b", "Tie", 3), "row 2: winner 'Tie' is not one of"),
        (None, r"row 2: expected \(source_a, source_b, winner, count\)"),
    ],
)
def test_a_bad_counted_row_is_named(record, message):
    with pytest.raises(ValueError, match=message):
        Battles.from_counts([("a", "b", TIE, 2), record, ("a", "b", TIE, 1)])


def test_battles_built_from_arrays_are_checked():
    def build(a, b, outcome, sources=("x", "y")):
        return Battles(
            sources=sources,
            a=np.array(a, np.int32),
            b=np.array(b, np.int32),
            outcome=np.array(outcome, np.int8),
        )

    assert len(build([0, 1], [1, 0], [0, 2])) == 2
    with pytest.raises(ValueError, match="battle 2: b = 2 is outside 0..1"):
        build([0, 1], [1, 2], [0, 0])
    with pytest.raises(ValueError, match="battle 1: outcome = 4 is outside 0..3"):
        build([0], [1], [4])
    with pytest.raises(ValueError, match="battle 2: 'y' against itself"):
        build([0, 1], [1, 1], [0, 0])
    with pytest.raises(ValueError, match="one length"):
        build([0, 1], [1], [0, 0])
    with pytest.raises(ValueError, match="Battles.outcome must hold integers, not float64"):
        Battles(
            sources=("x", "y"), a=np.zeros(1, np.int32), b=np.ones(1, np.int32), outcome=np.zeros(1)
        )
    with pytest.raises(ValueError, match="names a source twice"):
        build([0], [1], [0], sources=("x", "x"))


def test_pair_counts_are_the_same_whatever_the_chunk_size(monkeypatch):
    records = _fixed_records() * 3
    battles = Battles.from_records(records)
    whole = pair_counts(battles)
    monkeypatch.setattr(bt_module, "_COUNT_CHUNK", 7)
    chunked = pair_counts(battles)
    for name in ("i", "j", "wins_i", "wins_j", "ties"):
        assert np.array_equal(getattr(whole, name), getattr(chunked, name)), name
    # alpha (0) against beta (1): alpha won 6 × 3, beta 3 × 3, 2 × 3 ties
    first = (whole.i == 0) & (whole.j == 1)
    assert (whole.wins_i[first], whole.wins_j[first], whole.ties[first]) == (18, 9, 6)


def test_from_records_renumbers_and_checks_in_chunks(monkeypatch):
    import stats.interfaces as interfaces

    records = _fixed_records()
    whole = Battles.from_records(records)
    monkeypatch.setattr(interfaces, "_CHUNK", 5)
    chunked = Battles.from_records(records)
    assert chunked.sources == whole.sources
    assert np.array_equal(chunked.a, whole.a) and np.array_equal(chunked.b, whole.b)
    # the bad entry is found, and named, in a later chunk
    b = whole.b.copy()
    b[12] = whole.a[12]
    with pytest.raises(ValueError, match="battle 13: .* against itself"):
        Battles(sources=whole.sources, a=whole.a, b=b, outcome=whole.outcome)
    outcome = whole.outcome.copy()
    outcome[17] = 9
    with pytest.raises(ValueError, match="battle 18: outcome = 9 is outside 0..3"):
        Battles(sources=whole.sources, a=whole.a, b=whole.b, outcome=outcome)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ties": "drop"}, "ties must be one of half, exclude"),
        ({"resamples": 0}, "resamples must be a positive integer"),
        ({"level": 1.0}, "level must lie between 0 and 1"),
        ({"prior_sd": 0.0}, r"prior_sd must lie in \(0, 100\]"),
        ({"prior_sd": 101.0}, r"prior_sd must lie in \(0, 100\]"),
        ({"prior_sd": math.nan}, r"prior_sd must lie in \(0, 100\]"),
    ],
)
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        bradley_terry(Battles.from_records(_fixed_records()), **options)
