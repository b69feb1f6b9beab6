"""Quick study figures, checked against small cases worked by hand."""

import pytest

from annotation.metrics import Vote, gold_accuracy, percent_agreement, rater_figures


def votes(rows):
    return [Vote(item=i, rater=r, label=label, seconds=s, position=p) for i, r, label, s, p in rows]


ROWS = votes(
    [
        # item, rater, label, seconds, position
        (1, 10, "A", 30, "1"),
        (1, 11, "A", 40, "2"),
        (1, 12, "B", 10, "1"),
        (2, 10, "B", 50, "2"),
        (2, 11, "B", 60, "1"),
        (3, 10, "tie", 20, "tie"),
    ]
)


def test_percent_agreement_averages_pairwise_agreement_over_items():
    # Item 1: pairs (A,A) (A,B) (A,B) → 1/3; item 2: 1/1; item 3 has one answer: left out.
    value, items = percent_agreement(ROWS)
    assert items == 2 and value == pytest.approx((1 / 3 + 1) / 2)


def test_rater_figures_speed_sides_gold_and_majority():
    figures = rater_figures(ROWS, expected={2: "B", 3: "A"})
    ten = figures[10]
    assert ten.answers == 3 and ten.median_seconds == 30
    assert ten.first_position_share == pytest.approx(1 / 2)  # "1" once among 2 non-ties
    assert ten.gold_answers == 2 and ten.gold_accuracy == pytest.approx(1 / 2)
    # Item 1: others say A, B — no majority; item 2: other says B → agrees; item 3: nobody else.
    assert ten.majority_items == 1 and ten.majority_agreement == 1.0
    twelve = figures[12]
    assert twelve.majority_items == 1 and twelve.majority_agreement == 0.0  # others: A, A
    assert twelve.top_label == "B" and twelve.top_label_share == 1.0


def test_gold_accuracy_over_everyone():
    assert gold_accuracy(ROWS, {2: "B"}) == (1.0, 2)
    assert gold_accuracy(ROWS, {}) == (None, 0)
    assert percent_agreement([]) == (None, 0)
