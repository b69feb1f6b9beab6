import math

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from stats.compute.correlation import benchmark_correlations, holm, pearson_with_fisher_ci


def test_pearson_and_fisher_ci_by_hand():
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    y = np.array([2.0, 1.0, 4.0, 3.0, 7.0, 5.0, 8.0, 6.0])
    result = pearson_with_fisher_ci(x, y)
    r = np.corrcoef(x, y)[0, 1]
    half = 1.959963984540054 / math.sqrt(len(x) - 3)
    assert result.r == pytest.approx(r)
    assert result.ci == pytest.approx(
        (math.tanh(math.atanh(r) - half), math.tanh(math.atanh(r) + half))
    )
    assert result.n == 8 and 0 < result.p_value < 0.05


def test_too_few_models_or_no_spread_is_nan():
    assert math.isnan(pearson_with_fisher_ci(np.array([1.0, 2.0]), np.array([1.0, 3.0])).r)
    assert math.isnan(pearson_with_fisher_ci(np.ones(5), np.arange(5.0)).r)


def _holm(pvalues):
    order = np.argsort(pvalues)
    m = len(pvalues)
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def test_holm_within_each_trigger_type_and_mean_r():
    rng = np.random.default_rng(0)
    n_models = 16
    ability = rng.normal(size=n_models)
    benchmarks = ability[:, None] + rng.normal(scale=0.5, size=(n_models, 6))
    benchmarks[3, 2] = np.nan  # a model without one benchmark's score
    types = np.column_stack(
        [ability + rng.normal(scale=0.3, size=n_models), rng.normal(size=n_models)]
    )
    rows, means = benchmark_correlations(
        type_scores=types,
        type_names=["CRITICAL", "RECOVERY"],
        benchmark_scores=benchmarks,
        benchmark_names=[f"B{i}" for i in range(6)],
    )
    assert len(rows) == 12
    for type_name in ("CRITICAL", "RECOVERY"):
        family = [r for r in rows if r.trigger_type == type_name]
        raw = np.array([r.correlation.p_value for r in family])
        assert [r.p_holm for r in family] == pytest.approx(list(_holm(raw)))
    assert [r.correlation.n for r in rows[:6]] == [16, 16, 15, 16, 16, 16]
    by_type = {m.trigger_type: m for m in means}
    critical = [r.correlation.r for r in rows if r.trigger_type == "CRITICAL"]
    assert by_type["CRITICAL"].mean_r == pytest.approx(np.mean(critical))
    assert by_type["CRITICAL"].ci[0] < by_type["CRITICAL"].mean_r < by_type["CRITICAL"].ci[1]
    assert by_type["CRITICAL"].mean_r > 0.6 > abs(by_type["RECOVERY"].mean_r)


def test_holm_matches_statsmodels():
    p = np.array([0.01, 0.04, 0.03, 0.2, 0.001, 0.04])
    assert holm(p) == pytest.approx(multipletests(p, method="holm")[1])
    assert holm(p).tolist() == pytest.approx(list(_holm(p)))
