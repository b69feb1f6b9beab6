import numpy as np
import pytest

from stats.compute import agreement
from stats.compute.human import human_agreement_table
from stats.interfaces import LabelMatrix, RatedItem, Rating


def _matrix():
    items = [
        RatedItem("e1", "EMERGENT", "PASS", "PASS"),
        RatedItem("e2", "EMERGENT", "FAIL"),
        RatedItem("e3", "EMERGENT", "PARTIAL"),
        RatedItem("r1", "RECOVERY", "PARTIAL"),
        RatedItem("r2", "RECOVERY", "FAIL", "FAIL"),
        RatedItem("r3", "RECOVERY", "PASS"),
    ]
    ratings = [
        Rating("e1", "A1", "Pass"),
        Rating("e1", "A2", "PASS"),
        Rating("e1", "A3", "Partial"),
        Rating("e2", "A1", "Fail"),
        Rating("e2", "A2", "Fail"),
        Rating("e3", "A2", "Partial"),
        Rating("e3", "A3", "Pass"),  # a tie
        Rating("r1", "A1", "Partial"),
        Rating("r1", "A3", "Partial"),
        Rating("r2", "A2", "Fail"),
        Rating("r2", "A3", "Partial"),
        Rating("r2", "A1", "Fail"),
        Rating("r3", "A1", "Pass"),
        Rating("r3", "A2", "Pass"),
    ]
    return LabelMatrix.from_records(ratings, items)


def test_label_matrix_layout():
    matrix = _matrix()
    assert matrix.rater_ids.tolist() == ["A1", "A2", "A3"]
    assert matrix.labels[0].tolist() == [2, 2, 1]
    assert matrix.judge.tolist() == [2, 0, 1, 1, 0, 2]
    assert matrix.gold.tolist() == [2, -1, -1, -1, 0, -1]
    with pytest.raises(ValueError, match="unknown item"):
        LabelMatrix.from_records([Rating("zz", "A1", "Pass")], [RatedItem("e1")])


def test_human_agreement_rows_overall_and_per_type():
    matrix = _matrix()
    rows = human_agreement_table(matrix, resamples=500)
    assert [r.group for r in rows] == ["ALL", "EMERGENT", "RECOVERY"]
    overall = rows[0]
    counts = agreement.label_counts(matrix.labels, 3)
    assert overall.n_items == 6 and overall.n_ratings == 14 and overall.n_raters == 3
    assert overall.alpha_ordinal.value == pytest.approx(
        agreement.krippendorff_alpha(counts, "ordinal")
    )
    assert overall.alpha_nominal.value == pytest.approx(
        agreement.krippendorff_alpha(counts, "nominal")
    )
    assert overall.fleiss_kappa.value == pytest.approx(agreement.fleiss_kappa(counts))
    # majority labels: e1 PASS, e2 FAIL, e3 tie (excluded), r1 PARTIAL, r2 FAIL, r3 PASS;
    # judge: PASS, FAIL, -, PARTIAL, FAIL, PASS -> perfect agreement on the five
    assert overall.n_majority == 5 and overall.n_majority_ties == 1
    assert overall.majority_kappa.value == pytest.approx(1.0)
    assert overall.confusion.tolist() == [[2, 0, 0], [0, 1, 0], [0, 0, 2]]
    # gold: e1 PASS (2 of 3 labels), r2 FAIL (2 of 3)
    assert overall.gold_accuracy == pytest.approx(4 / 6) and overall.n_gold_compared == 6
    emergent = rows[1]
    assert emergent.n_items == 3 and emergent.n_majority_ties == 1


def test_unordered_categories_get_no_ordinal_alpha():
    matrix = LabelMatrix.from_records(
        [
            Rating("a", "x", "red"),
            Rating("a", "y", "red"),
            Rating("b", "x", "blue"),
            Rating("b", "y", "green"),
        ],
        [RatedItem("a"), RatedItem("b")],
        categories=("red", "green", "blue"),
        ordered=False,
    )
    (row,) = human_agreement_table(matrix, resamples=200)
    assert row.alpha_ordinal is None and row.group == "ALL"
    assert row.alpha_nominal.value == pytest.approx(
        agreement.krippendorff_alpha(np.array([[2, 0, 0], [0, 1, 1]]), "nominal")
    )
