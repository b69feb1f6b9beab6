import numpy as np

from stats.compute.resampling import (
    item_bootstrap_sums,
    percentile_interval,
    rng_for,
    safe_ratio,
)


def _naive_ratio_ci(contributions, resamples, seed):
    """The textbook item bootstrap: draw item indices with replacement, sum, take the ratio."""
    rng = np.random.default_rng(seed)
    n = contributions.shape[0]
    ratios = []
    for _ in range(resamples):
        pick = contributions[rng.integers(0, n, n)]
        ratios.append(pick[:, 0].sum() / pick[:, 1].sum())
    return np.percentile(ratios, [2.5, 97.5])


def test_profile_bootstrap_matches_the_textbook_index_bootstrap():
    rng = np.random.default_rng(7)
    # 80 items with 1-3 judgements each and varied win counts: a clustered ratio.
    sizes = rng.integers(1, 4, 80)
    wins = rng.binomial(sizes, 0.8)
    contributions = np.column_stack([wins, sizes]).astype(float)
    sums = item_bootstrap_sums(contributions, resamples=20_000, rng=rng_for(1, "t"))
    ours = percentile_interval(sums[:, 0] / sums[:, 1])
    naive = _naive_ratio_ci(contributions, 20_000, 2)
    assert abs(ours[0] - naive[0]) < 0.012 and abs(ours[1] - naive[1]) < 0.012
    # the bootstrap mean of the resampled totals is the observed total
    assert np.allclose(sums.mean(axis=0), contributions.sum(axis=0), rtol=0.01)


def test_each_resample_draws_exactly_as_many_items_as_there_are():
    contributions = np.array([[1.0, 1.0], [0.0, 1.0], [1.0, 2.0]])
    # a column of ones counts the items drawn
    with_count = np.column_stack([contributions, np.ones(3)])
    sums = item_bootstrap_sums(with_count, resamples=500, rng=rng_for(3, "x"))
    assert np.all(sums[:, 2] == 3)


def test_seeding_is_by_name_not_by_order():
    a = rng_for(11, "leaderboard", "model-a", "ALL").integers(0, 1000, 5)
    b = rng_for(11, "leaderboard", "model-a", "ALL").integers(0, 1000, 5)
    c = rng_for(11, "leaderboard", "model-b", "ALL").integers(0, 1000, 5)
    d = rng_for(12, "leaderboard", "model-a", "ALL").integers(0, 1000, 5)
    assert a.tolist() == b.tolist()
    assert a.tolist() != c.tolist() and a.tolist() != d.tolist()


def test_percentile_interval_leaves_out_undefined_resamples():
    values = np.array([np.nan, 0.0, 1.0, 2.0, 3.0, 4.0, np.nan])
    assert percentile_interval(values, 0.5) == (1.0, 3.0)
    assert all(np.isnan(percentile_interval(np.array([np.nan]))))


def test_safe_ratio_is_nan_on_zero_denominators():
    out = safe_ratio(np.array([1.0, 2.0]), np.array([2.0, 0.0]))
    assert out[0] == 0.5 and np.isnan(out[1])
