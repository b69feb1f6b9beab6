"""Agreement statistics against published worked examples, an independent implementation (the
``krippendorff`` package, statsmodels) and hand computation."""

import math

import krippendorff
import numpy as np
import pytest
from statsmodels.stats.inter_rater import cohens_kappa as sm_cohens_kappa
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from stats.compute import agreement
from stats.compute.resampling import rng_for

nan = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers,
# 12 units, values 1-5, missing values. Published: nominal .743, ordinal .815, interval .849.
KRIPPENDORFF_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
)

# Fleiss' kappa worked example (10 subjects, 14 raters, 5 categories): kappa = 0.210.
FLEISS_EXAMPLE = np.array(
    [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
)


def _codes(reliability_data):
    """observers × units with NaN → units × raters codes 0..4 with -1."""
    return np.where(np.isnan(reliability_data), -1, reliability_data - 1).astype(int).T


@pytest.mark.parametrize(
    ("level", "published"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)]
)
def test_krippendorff_alpha_reproduces_the_published_example(level, published):
    counts = agreement.label_counts(_codes(KRIPPENDORFF_2011), 5)
    assert round(agreement.krippendorff_alpha(counts, level), 3) == published


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_krippendorff_alpha_matches_the_krippendorff_package_on_random_data(level):
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 3, 40)
    data = np.clip(
        truth[None, :] + rng.integers(-1, 2, (6, 40)) * (rng.random((6, 40)) < 0.4), 0, 2
    )
    data = data.astype(float)
    data[rng.random((6, 40)) < 0.3] = nan
    ours = agreement.krippendorff_alpha(
        agreement.label_counts(np.where(np.isnan(data), -1, data).astype(int).T, 3), level
    )
    theirs = krippendorff.alpha(
        reliability_data=data, level_of_measurement=level, value_domain=[0, 1, 2]
    )
    assert ours == pytest.approx(theirs, abs=1e-12)


def test_krippendorff_alpha_is_one_for_perfect_agreement_and_ignores_single_labels():
    ratings = np.array([[0, 0, -1], [2, 2, 2], [1, 1, -1], [0, -1, -1]])
    counts = agreement.label_counts(ratings, 3)
    assert agreement.krippendorff_alpha(counts, "nominal") == 1.0
    assert agreement.krippendorff_alpha(counts, "ordinal") == 1.0


def test_krippendorff_alpha_ci_brackets_the_estimate_and_is_seeded():
    counts = agreement.label_counts(_codes(KRIPPENDORFF_2011), 5)
    ci = agreement.krippendorff_alpha_ci(counts, "ordinal", rng=rng_for(1, "a"), resamples=2000)
    again = agreement.krippendorff_alpha_ci(counts, "ordinal", rng=rng_for(1, "a"), resamples=2000)
    assert ci == again
    assert ci[0] < 0.815 < ci[1] <= 1.0


def test_fleiss_kappa_reproduces_the_worked_example_and_statsmodels():
    assert round(agreement.fleiss_kappa(FLEISS_EXAMPLE), 3) == 0.210
    rng = np.random.default_rng(4)
    table = rng.multinomial(6, [0.2, 0.5, 0.3], size=30)
    assert agreement.fleiss_kappa(table) == pytest.approx(sm_fleiss_kappa(table), abs=1e-12)


def test_fleiss_kappa_with_unequal_raters_by_hand():
    counts = np.array([[2, 0, 0], [1, 1, 1], [0, 3, 1], [0, 0, 1]])  # last item: one label
    # P_i: 1, 0, (9+1-4)/(4*3) = 0.5 ; P-bar = 0.5
    # p_j over the 3 pairable items' 9 labels: 3/9, 4/9, 2/9 ; P_e = (9+16+4)/81
    p_e = 29 / 81
    expected = (0.5 - p_e) / (1 - p_e)
    assert agreement.fleiss_kappa(counts) == pytest.approx(expected)


def _kappa_by_hand(a, b, k, weight):
    n = len(a)
    observed = [[0.0] * k for _ in range(k)]
    for x, y in zip(a, b, strict=True):
        observed[x][y] += 1 / n
    rows = [sum(observed[i]) for i in range(k)]
    cols = [sum(observed[i][j] for i in range(k)) for j in range(k)]
    num = sum(weight(i, j) * observed[i][j] for i in range(k) for j in range(k))
    den = sum(weight(i, j) * rows[i] * cols[j] for i in range(k) for j in range(k))
    return 1 - num / den


A = [0, 0, 1, 1, 2, 2, 2, 0, 1, 2, 2, 0]
B = [0, 1, 1, 1, 2, 1, 2, 0, 0, 2, 2, 2]


@pytest.mark.parametrize(
    ("weights", "weight", "sm_wt"),
    [
        ("none", lambda i, j: float(i != j), None),
        ("linear", lambda i, j: abs(i - j) / 2, "linear"),
        ("quadratic", lambda i, j: ((i - j) / 2) ** 2, "quadratic"),
    ],
)
def test_cohen_kappa_by_hand_and_against_statsmodels(weights, weight, sm_wt):
    ours = agreement.cohen_kappa(np.array(A), np.array(B), 3, weights)
    assert ours == pytest.approx(_kappa_by_hand(A, B, 3, weight))
    table = agreement.confusion_matrix(np.array(A), np.array(B), 3)
    assert ours == pytest.approx(sm_cohens_kappa(table, wt=sm_wt, return_results=False))


def test_cohen_kappa_small_case_exact_value():
    # 2x2: agree on 3 of 4; margins a: (2, 2), b: (1, 3) -> p_o = .75, p_e = (2*1 + 2*3)/16 = .5
    kappa = agreement.cohen_kappa(np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1]), 2)
    assert kappa == pytest.approx(0.5)


def test_cohen_kappa_skips_missing_and_ci_is_seeded():
    a = np.array(A + [-1, 1])
    b = np.array(B + [2, -1])
    assert agreement.cohen_kappa(a, b, 3) == pytest.approx(
        agreement.cohen_kappa(np.array(A), np.array(B), 3)
    )
    ci = agreement.cohen_kappa_ci(a, b, 3, rng=rng_for(2, "k"), resamples=2000)
    assert ci == agreement.cohen_kappa_ci(a, b, 3, rng=rng_for(2, "k"), resamples=2000)
    assert ci[0] < agreement.cohen_kappa(a, b, 3) < ci[1]


def test_confusion_matrix_rows_are_the_first_rater():
    confusion = agreement.confusion_matrix(np.array([2, 2, 0, -1]), np.array([2, 1, 0, 0]), 3)
    assert confusion.tolist() == [[1, 0, 0], [0, 0, 0], [0, 1, 1]]


def test_majority_label_tie_rules():
    counts = np.array([[0, 1, 2], [1, 1, 0], [0, 0, 0], [2, 0, 2], [0, 3, 0]])
    assert agreement.majority_labels(counts).tolist() == [2, -1, -1, -1, 1]
    assert agreement.majority_labels(counts, "lowest").tolist() == [2, 0, -1, 0, 1]


def test_accuracy_against_gold_counts_only_labelled_items_with_gold():
    ratings = np.array([[2, 2, -1], [0, 1, 1], [1, 1, 1]])
    gold = np.array([2, 1, -1])
    # item 0: 2 of 2 right; item 1: 2 of 3; item 2 has no gold
    assert agreement.accuracy_against_gold(ratings, gold) == (0.8, 5)


def test_kendall_tau_by_hand():
    # one discordant pair of six: tau = (5 - 1) / 6
    tau = agreement.kendall_tau(np.array([1, 2, 3, 4.0]), np.array([1, 3, 2, 4.0]))
    assert tau.tau == pytest.approx(4 / 6) and tau.n == 4
    assert math.isnan(agreement.kendall_tau(np.array([1.0]), np.array([2.0])).tau)
