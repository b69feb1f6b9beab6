"""Preference statistics: the source's headline (115 of 144, p ≈ 2.6e-13), exact binomial and
Wilson computed here by hand, and the item-clustered bootstrap against a naive loop."""

import math

import numpy as np
import pytest

from stats.compute.preference import (
    binomial_summary,
    preference_by_annotator,
    preference_result,
    preference_table,
)
from stats.compute.resampling import rng_for
from stats.interfaces import INJECTED, TIE, VANILLA, PreferenceJudgements, PreferenceRecord


def _binomial_two_sided_p(k, n):
    """Exact two-sided p against 0.5: the symmetric null makes it 2 × the smaller tail."""
    tail = sum(math.comb(n, i) for i in range(min(k, n - k) + 1)) / 2**n
    return min(1.0, 2 * tail)


def _wilson(k, n, z=1.959963984540054):
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_source_headline_115_of_144():
    summary = binomial_summary(115, 144)
    assert round(100 * summary.rate, 1) == 79.9
    assert summary.p_value == pytest.approx(_binomial_two_sided_p(115, 144), rel=1e-9)
    assert summary.p_value == pytest.approx(2.6e-13, rel=0.05)
    assert summary.wilson == pytest.approx(_wilson(115, 144), abs=1e-12)


def _study(seed=0, n_items=80, rate=0.8):
    """A study like the source's: 80 items, 1-3 judgements each, ties now and then."""
    rng = np.random.default_rng(seed)
    records = []
    for item in range(n_items):
        stratum = rng.choice(["PASS", "PARTIAL", "FAIL"], p=[0.3, 0.3, 0.4])
        for judge in range(int(rng.integers(1, 3))):
            left = bool(rng.random() < 0.5)
            roll = rng.random()
            choice = TIE if roll < 0.02 else INJECTED if roll < 0.02 + rate else VANILLA
            records.append(
                PreferenceRecord(
                    item_id=f"i{item}",
                    annotator_id=f"P0{(item + judge) % 8 + 1}",
                    choice=choice,
                    injected_on_left=left,
                    seconds=float(rng.integers(20, 400)),
                    vanilla_verdict=str(stratum),
                )
            )
    return PreferenceJudgements.from_records(records)


def test_overall_row_counts_ties_apart_and_tests_the_rest():
    study = _study()
    (overall, *strata) = preference_table(study, resamples=2000)
    decided = study.choice != TIE
    wins = int((study.choice == INJECTED).sum())
    assert overall.n_judgements == study.choice.size
    assert overall.n_ties == int((~decided).sum())
    assert overall.injected.n == int(decided.sum()) and overall.injected.k == wins
    assert overall.injected.p_value == pytest.approx(
        _binomial_two_sided_p(wins, int(decided.sum()))
    )
    assert overall.n_items == len(set(study.item_id))
    assert [s.stratum for s in strata] == ["PASS", "PARTIAL", "FAIL"]
    assert sum(s.n_judgements for s in strata) == overall.n_judgements


def test_item_clustered_bootstrap_matches_a_naive_item_loop():
    study = _study(seed=1)
    (overall, *_) = preference_table(study)
    items = sorted(set(study.item_id))
    per_item = {
        i: (
            int(np.sum((study.item_id == i) & (study.choice == INJECTED))),
            int(np.sum((study.item_id == i) & (study.choice != TIE))),
        )
        for i in items
    }
    rng = np.random.default_rng(9)
    rates = []
    for _ in range(10_000):
        pick = rng.integers(0, len(items), len(items))
        wins = sum(per_item[items[j]][0] for j in pick)
        decided = sum(per_item[items[j]][1] for j in pick)
        rates.append(wins / decided)
    naive = np.percentile(rates, [2.5, 97.5])
    assert overall.bootstrap_ci == pytest.approx(tuple(naive), abs=0.01)
    # and it has the source's width (79.9 [74.1, 85.5] from 144 pairs on 80 items)
    assert 0.07 < overall.bootstrap_ci[1] - overall.bootstrap_ci[0] < 0.16


def test_position_bias_and_per_annotator_rows_by_hand():
    records = [
        # P1 always clicks left: injected on the left twice (wins), on the right once (loses)
        PreferenceRecord("a", "P1", INJECTED, True, 10.0, "PASS"),
        PreferenceRecord("b", "P1", INJECTED, True, 20.0, "FAIL"),
        PreferenceRecord("c", "P1", VANILLA, False, 30.0, "FAIL"),
        PreferenceRecord("a", "P2", INJECTED, False, 100.0, "PASS"),
        PreferenceRecord("b", "P2", TIE, True, None, "FAIL"),
    ]
    study = PreferenceJudgements.from_records(records)
    rows = {
        r.annotator_id: r
        for r in preference_by_annotator(study, excluded_annotators=frozenset({"P1"}))
    }
    assert rows["P1"].left_share == 1.0 and rows["P1"].injected_rate == pytest.approx(2 / 3)
    assert rows["P1"].median_seconds == 20.0 and rows["P1"].excluded
    assert rows["P2"].n_ties == 1 and rows["P2"].left_share == 0.0
    assert rows["P2"].median_seconds == 100.0 and not rows["P2"].excluded
    table = preference_table(study, excluded_annotators=frozenset({"P1"}), resamples=500)
    overall = table[0]
    assert overall.left.k == 3 and overall.left.n == 4
    without = [r for r in table if r.raters == "without_excluded"]
    assert without[0].n_judgements == 2 and without[0].injected.k == 1


def test_unknown_choice_is_rejected():
    with pytest.raises(ValueError, match="choice"):
        PreferenceJudgements.from_records([PreferenceRecord("a", "P1", "left", True, 1.0, "")])


def test_strata_rows_are_seeded_by_name():
    study = _study(seed=2)
    a = preference_table(study, resamples=1000)
    b = preference_table(study, resamples=1000)
    assert [r.bootstrap_ci for r in a] == [r.bootstrap_ci for r in b]
    assert len({r.bootstrap_ci for r in a}) == len(a)


def test_a_stratum_s_interval_does_not_depend_on_the_other_strata():
    # the PASS stratum's interval is the same whether computed alone or with the others
    study = _study(seed=3)
    full = {r.stratum: r for r in preference_table(study, resamples=1000)}
    part = study.subset(study.vanilla_verdict == "PASS")
    alone = preference_result(
        part, rng=rng_for(20260501, "preference", "all", "PASS"), resamples=1000
    )
    assert alone.bootstrap_ci == full["PASS"].bootstrap_ci
