import math

import numpy as np
import pytest

from stats.compute.disclosure import disclosure_distance_table
from stats.compute.style import laplace_logit, ols_fit, style_sensitivity


def test_laplace_logit_by_hand():
    assert laplace_logit(3, 10) == pytest.approx(math.log(3.5 / 7.5))
    assert laplace_logit(0, 4) == pytest.approx(math.log(0.5 / 4.5))  # finite at 0 %
    assert laplace_logit(4, 4) == pytest.approx(math.log(4.5 / 0.5))  # and at 100 %


def test_ols_fit_against_the_closed_form():
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    y = np.array([1.0, 2.9, 5.2, 6.8, 9.1])
    fit = ols_fit(x, y)
    slope, intercept = np.polyfit(x, y, 1)
    residuals = y - (intercept + slope * x)
    se = math.sqrt(residuals @ residuals / (len(x) - 2) / ((x - x.mean()) @ (x - x.mean())))
    assert fit.slope == pytest.approx(slope) and fit.intercept == pytest.approx(intercept)
    assert fit.slope_se == pytest.approx(se)
    t = 3.182446305284263  # t(0.975, df=3)
    assert fit.slope_ci == pytest.approx((slope - t * se, slope + t * se))
    r2 = 1 - residuals @ residuals / ((y - y.mean()) @ (y - y.mean()))
    assert fit.r_squared == pytest.approx(r2)


def test_ols_fit_degenerate_inputs_are_nan_not_errors():
    assert math.isnan(ols_fit(np.array([1.0]), np.array([2.0])).slope)
    assert math.isnan(ols_fit(np.array([1.0, 1.0, 1.0]), np.array([1.0, 2.0, 3.0])).slope)
    two = ols_fit(np.array([0.0, 1.0]), np.array([1.0, 3.0]))
    assert two.slope == pytest.approx(2.0) and math.isnan(two.slope_se)


def _replies(pass_counts, n=20):
    """model → pass count per style (n triggers each) → aligned arrays."""
    models, styles, passed = [], [], []
    for model, counts in pass_counts.items():
        for style, k in enumerate(counts, start=1):
            models += [model] * n
            styles += [style] * n
            passed += [True] * k + [False] * (n - k)
    return np.array(models), np.array(styles), np.array(passed)


def test_style_sensitivity_slopes():
    # "tracker" moves with the styles, "uniform" passes the same everywhere
    models, styles, passed = _replies(
        {
            "tracker": [2, 6, 10, 14, 18],
            "uniform": [10, 10, 10, 10, 10],
            "other": [4, 7, 10, 13, 16],
        }
    )
    result = style_sensitivity(models=models, configurations=styles, passed=passed)
    assert result.models == ["other", "tracker", "uniform"]
    fits = dict(zip(result.models, result.fits, strict=True))
    logits = laplace_logit(np.array([[4, 7, 10, 13, 16], [2, 6, 10, 14, 18], [10] * 5]), 20)
    assert result.logits == pytest.approx(logits)
    assert result.difficulty == pytest.approx(logits.mean(axis=0))
    slopes = [fits[m].slope for m in result.models]
    assert sum(slopes) == pytest.approx(3.0)  # the slopes on the mean average to 1
    assert fits["uniform"].slope == pytest.approx(0.0, abs=1e-12)
    assert fits["tracker"].slope > fits["other"].slope > 1  # the field's mean includes "uniform"
    assert np.isnan(fits["uniform"].r_squared)  # nothing to explain
    expected = np.polyfit(result.difficulty, logits[1], 1)
    assert fits["tracker"].slope == pytest.approx(expected[0])
    assert fits["tracker"].intercept == pytest.approx(expected[1])


def test_style_sensitivity_leaves_out_configurations_a_model_lacks():
    models, styles, passed = _replies({"a": [2, 6, 10], "b": [4, 8, 12]})
    keep = ~((models == "b") & (styles == 3))
    result = style_sensitivity(
        models=models[keep], configurations=styles[keep], passed=passed[keep]
    )
    assert math.isnan(result.logits[1, 2])
    assert result.difficulty[2] == pytest.approx(laplace_logit(10, 20))  # a's alone
    assert result.fits[1].n == 2


def test_disclosure_distance_regression_per_model():
    models = np.array(["m"] * 6 + ["n"] * 3)
    distances = np.array([1, 2, 3, 4, 5, np.nan, 2, 4, 6])
    outcomes = np.array([1, 1, 0.5, 0.5, 0, 1, 0, 0.5, 1])
    rows = {
        r.model: r
        for r in disclosure_distance_table(models=models, distances=distances, outcomes=outcomes)
    }
    assert rows["m"].n_without_distance == 1 and rows["m"].fit.n == 5
    assert rows["m"].fit.slope == pytest.approx(
        np.polyfit([1, 2, 3, 4, 5], [1, 1, 0.5, 0.5, 0], 1)[0]
    )
    assert rows["m"].fit.slope < 0 and rows["n"].fit.slope == pytest.approx(0.25)
    assert rows["m"].mean_distance == 3.0 and rows["m"].mean_outcome == pytest.approx(0.6)
