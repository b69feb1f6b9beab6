"""The leaderboard against the source's Table 1 (counts reconstructed from its percentages:
each reproduces every printed figure) and hand-computed small cases."""

import numpy as np
import pytest

from stats.compute import FAIL, PARTIAL, PASS
from stats.compute.leaderboard import cell_scores, leaderboard
from stats.compute.resampling import rng_for

# model → trigger type → (n, passes, partials); the source prints pass % overall / E / C / R
# and weighted % overall / R, with bootstrap CIs for the pass rates.
TABLE_1 = {
    "GPT-5.5": {"EMERGENT": (201, 138, 18), "CRITICAL": (232, 175, 36), "RECOVERY": (191, 71, 49)},
    "Claude-Opus-4.7": {
        "EMERGENT": (201, 145, 26),
        "CRITICAL": (232, 136, 55),
        "RECOVERY": (191, 43, 27),
    },
    "Qwen3-1.7B": {"EMERGENT": (201, 41, 46), "CRITICAL": (232, 15, 68), "RECOVERY": (191, 8, 33)},
}
SOURCE = {  # pass %: overall, E, C, R (with CIs); weighted %: overall, R
    "GPT-5.5": {
        "pass": {
            "ALL": (61.5, 57.4, 65.4),
            "EMERGENT": (68.7, 62.7, 75.1),
            "CRITICAL": (75.4, 69.8, 80.6),
            "RECOVERY": (37.2, 30.4, 44.0),
        },
        "weighted": {"ALL": 69.8, "EMERGENT": 73.1, "CRITICAL": 83.2, "RECOVERY": 50.0},
    },
    "Claude-Opus-4.7": {
        "pass": {
            "ALL": (51.9, 48.1, 55.8),
            "EMERGENT": (72.1, 66.2, 78.1),
            "CRITICAL": (58.6, 52.6, 64.7),
            "RECOVERY": (22.5, 16.8, 28.8),
        },
        "weighted": {"ALL": 60.6, "EMERGENT": 78.6, "CRITICAL": 70.5, "RECOVERY": 29.6},
    },
    "Qwen3-1.7B": {
        "pass": {
            "ALL": (10.3, 7.9, 12.7),
            "EMERGENT": (20.4, 14.9, 25.9),
            "CRITICAL": (6.5, 3.4, 9.5),
            "RECOVERY": (4.2, 1.6, 7.3),
        },
        "weighted": {"ALL": 22.0, "EMERGENT": 31.8, "CRITICAL": 21.1, "RECOVERY": 12.8},
    },
}


def _replies(table):
    models, types, clusters, verdicts = [], [], [], []
    trigger = 0
    for model, cells in table.items():
        for trigger_type, (n, passes, partials) in cells.items():
            codes = [PASS] * passes + [PARTIAL] * partials + [FAIL] * (n - passes - partials)
            for code in codes:
                trigger += 1
                models.append(model)
                types.append(trigger_type)
                clusters.append(trigger)
                verdicts.append(code)
    return np.array(models), np.array(types), np.array(clusters), np.array(verdicts)


@pytest.fixture(scope="module")
def table_1_rows():
    models, types, clusters, verdicts = _replies(TABLE_1)
    return {
        (r.model, r.trigger_type): r.scores
        for r in leaderboard(
            models=models, trigger_types=types, clusters=clusters, verdicts=verdicts
        )
    }


@pytest.mark.parametrize("model", list(SOURCE))
def test_table_1_pass_rates_and_weighted_scores_reproduce(table_1_rows, model):
    for trigger_type, (rate, _, _) in SOURCE[model]["pass"].items():
        scores = table_1_rows[(model, trigger_type)]
        assert round(100 * scores.pass_rate, 1) == rate, (model, trigger_type)
    for trigger_type, weighted in SOURCE[model]["weighted"].items():
        scores = table_1_rows[(model, trigger_type)]
        assert round(100 * scores.weighted_score, 1) == weighted, (model, trigger_type)


@pytest.mark.parametrize("model", list(SOURCE))
def test_bootstrap_cis_have_the_source_widths(table_1_rows, model):
    for trigger_type, (_, low, high) in SOURCE[model]["pass"].items():
        ours = table_1_rows[(model, trigger_type)].pass_ci
        # Same data, same method, different random draws: the ends agree to about a point.
        assert abs(100 * ours[0] - low) < 1.3 and abs(100 * ours[1] - high) < 1.3, (
            model,
            trigger_type,
            ours,
        )


def test_models_are_ranked_by_overall_pass_rate_and_overall_comes_first(table_1_rows):
    models, types, clusters, verdicts = _replies(TABLE_1)
    rows = leaderboard(models=models, trigger_types=types, clusters=clusters, verdicts=verdicts)
    assert [r.model for r in rows if r.trigger_type == "ALL"] == [
        "GPT-5.5",
        "Claude-Opus-4.7",
        "Qwen3-1.7B",
    ]
    assert [r.trigger_type for r in rows[:4]] == ["ALL", "EMERGENT", "CRITICAL", "RECOVERY"]


def test_small_cell_by_hand_and_unscored_replies_count_only_in_coverage():
    scores = cell_scores(
        clusters=np.arange(6),
        verdicts=np.array([PASS, PASS, PARTIAL, FAIL, -1, -1]),
        rng=rng_for(1, "t"),
    )
    assert (scores.n_expected, scores.n, scores.n_pass, scores.n_partial, scores.n_fail) == (
        6,
        4,
        2,
        1,
        1,
    )
    assert scores.pass_rate == 0.5 and scores.partial_rate == 0.25
    assert scores.weighted_score == pytest.approx(2.5 / 4)
    assert scores.coverage == pytest.approx(4 / 6)
    assert 0 <= scores.pass_ci[0] <= 0.5 <= scores.pass_ci[1] <= 1


def test_a_trigger_s_samples_are_resampled_together():
    rng = np.random.default_rng(5)
    verdicts = rng.choice([FAIL, PARTIAL, PASS], size=150)
    once = cell_scores(clusters=np.arange(150), verdicts=verdicts, rng=rng_for(1, "c"))
    # every trigger answered twice, identically: no new information, so the same CI
    twice = cell_scores(
        clusters=np.repeat(np.arange(150), 2), verdicts=np.repeat(verdicts, 2), rng=rng_for(1, "c")
    )
    assert twice.n == 300
    assert twice.pass_ci == once.pass_ci and twice.weighted_ci == once.weighted_ci
    # treating the 300 replies as independent would have made it narrower
    naive = cell_scores(
        clusters=np.arange(300), verdicts=np.repeat(verdicts, 2), rng=rng_for(1, "c")
    )
    assert naive.pass_ci[1] - naive.pass_ci[0] < once.pass_ci[1] - once.pass_ci[0]


def test_a_model_s_cis_do_not_change_when_another_model_joins():
    models, types, clusters, verdicts = _replies({"GPT-5.5": TABLE_1["GPT-5.5"]})
    alone = leaderboard(models=models, trigger_types=types, clusters=clusters, verdicts=verdicts)
    models, types, clusters, verdicts = _replies(TABLE_1)
    together = leaderboard(models=models, trigger_types=types, clusters=clusters, verdicts=verdicts)
    mine = [r for r in together if r.model == "GPT-5.5"]
    assert [r.scores for r in alone] == [r.scores for r in mine]


def test_seed_changes_the_draws_but_not_the_estimates():
    models, types, clusters, verdicts = _replies({"GPT-5.5": TABLE_1["GPT-5.5"]})
    a = leaderboard(models=models, trigger_types=types, clusters=clusters, verdicts=verdicts)
    b = leaderboard(
        models=models, trigger_types=types, clusters=clusters, verdicts=verdicts, seed=99
    )
    assert a[0].scores.pass_rate == b[0].scores.pass_rate
    assert a[0].scores.pass_ci != b[0].scores.pass_ci


def test_score_matrix_agrees_with_the_leaderboard(table_1_rows):
    from stats.compute.leaderboard import score_matrix

    models, types, _, verdicts = _replies(TABLE_1)
    names, columns, weighted = score_matrix(models=models, trigger_types=types, verdicts=verdicts)
    _, _, passed = score_matrix(
        models=models, trigger_types=types, verdicts=verdicts, metric="pass"
    )
    assert columns == ["ALL", "EMERGENT", "CRITICAL", "RECOVERY"]
    for i, model in enumerate(names):
        for j, trigger_type in enumerate(columns):
            scores = table_1_rows[(model, trigger_type)]
            assert weighted[i, j] == pytest.approx(scores.weighted_score)
            assert passed[i, j] == pytest.approx(scores.pass_rate)
