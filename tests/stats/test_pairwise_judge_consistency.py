"""Pairwise judge consistency: hand-checked consistency, flips, side reversals, first-position
share and ties; the table from ``PairwiseJudgment`` rows and on every surface; the consistent
verdicts as battles (``selectors.run_pairwise_battles``) with what was left out; the demo's
planted position bias."""

import csv
import io
import json
import math
from collections import Counter

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse

from benchmark.models import PairwiseComparison
from benchmark.vocabulary import BattleWinner
from stats import selectors, tables
from stats.compute.bradley_terry import bradley_terry
from stats.compute.pairwise_consistency import NOT_ASKED, pairwise_consistency
from stats.interfaces import Battles
from stats.selectors import StatsInputError, TableRequest
from tests.stats.conftest import PAIRWISE_VERDICTS, A, B, judge_verdicts

NAME = "pairwise-judge-consistency"
Z = 1.959963984540054


def wilson(k, n):
    """Wilson (1927), written out: the score interval of k / n at 95 %."""
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return centre - half, centre + half


def test_consistency_by_hand():
    ab, ba = (np.array(column) for column in zip(*PAIRWISE_VERDICTS, strict=True))
    c = pairwise_consistency(ab, ba)
    assert (c.pairs, c.consistent, c.reversals) == (6, 2, 2)
    assert c.flip_rate == pytest.approx(4 / 6) and c.consistent_share == pytest.approx(2 / 6)
    assert c.flip_ci == pytest.approx(wilson(4, 6))
    # Decisive verdicts: A, A, B, A, A with A first; A, B, A, A with B first = 9, of which the
    # first-shown reply: A in the first order 4 times, B in the second once.
    assert (c.decisive, c.first_position.k) == (9, 5)
    assert c.first_position.rate == pytest.approx(5 / 9)
    assert c.first_position.wilson == pytest.approx(wilson(5, 9))
    assert c.first_position.p_value == pytest.approx(1.0)  # 5 of 9: as likely as it gets
    assert (c.verdicts, c.ties, c.errors, c.one_order_only) == (14, 5, 1, 2)
    assert c.tie_share == pytest.approx(5 / 14)


def test_nothing_judged_in_both_orders_is_undefined_not_zero():
    c = pairwise_consistency(np.array([A]), np.array([NOT_ASKED]))
    assert c.pairs == 0 and math.isnan(c.flip_rate) and math.isnan(c.flip_ci[0])
    with pytest.raises(ValueError, match="differ in length"):
        pairwise_consistency(np.array([A]), np.array([A, B]))


def test_the_table_reads_the_verdicts(judged):
    t = tables.build(NAME, TableRequest(run=judged))
    one, two = t.rows
    assert (one["judge"], two["judge"]) == ("pj-one", "pj-two")
    assert (one["n_comparisons"], one["n_consistent"], one["n_side_reversals"]) == (6, 2, 2)
    assert one["flip_rate"] == pytest.approx(4 / 6)
    assert (one["flip_rate_ci_low"], one["flip_rate_ci_high"]) == pytest.approx(wilson(4, 6))
    assert one["first_position_share"] == pytest.approx(5 / 9)
    assert (one["n_judge_errors"], one["n_one_order_only"]) == (1, 2)
    assert one["tie_share"] == pytest.approx(5 / 14)
    assert (two["n_comparisons"], two["flip_rate"], two["first_position_share"]) == (8, 0, 0.5)
    assert two["first_position_p"] == pytest.approx(1.0)


def test_consistent_verdicts_are_battles_and_the_rest_is_counted(judged):
    skipped = Counter()
    battles = list(selectors.run_pairwise_battles(run=judged, judge="pj-one", skipped=skipped))
    assert [b.winner for b in battles] == [BattleWinner.MODEL_A, BattleWinner.TIE]
    assert skipped == {"inconsistent": 4, "judge error": 1, "one order only": 1}
    first = battles[0]
    assert (first.judge, first.source_a, first.source_b) == ("judge:pj-one", *judged.models)
    assert first.item_key == f"{first.question_id}#t{first.turn}" and first.tstamp > 0
    assert len(list(selectors.run_pairwise_battles(run=judged, judge="pj-two"))) == 8


def test_battle_sources_name_the_condition_once_comparisons_span_conditions(judged):
    unit = judged.units.filter(endpoint__name=judged.models[0], condition="vanilla").first()
    twin = judged.units.get(
        trigger=unit.trigger, endpoint=unit.endpoint, condition="rubric_injected"
    )
    across = PairwiseComparison.objects.create(
        run=judged, trigger=unit.trigger, unit_a=unit, unit_b=twin
    )
    judge_verdicts([across], "pj-two", [(B, B)])
    battles = list(selectors.run_pairwise_battles(run=judged, judge="pj-two"))
    assert len(battles) == 9
    assert (battles[-1].source_a, battles[-1].source_b, battles[-1].winner) == (
        f"{judged.models[0]} · vanilla",
        f"{judged.models[0]} · rubric-injected",
        "model_b",
    )
    assert battles[0].source_b == f"{judged.models[1]} · vanilla"


def test_an_unknown_pairwise_judge_is_refused_before_any_row_is_read(judged):
    with pytest.raises(StatsInputError, match="no pairwise judge 'nobody'.*pj-one, pj-two"):
        selectors.run_pairwise_battles(run=judged, judge="nobody")


def test_surfaces(judged, client_for, researcher):
    client = client_for(researcher)
    url = reverse("stats_api:table", args=[NAME])
    body = client.get(url, {"run": judged.pk}).json()
    assert [r["judge"] for r in body["rows"]] == ["pj-one", "pj-two"]
    assert body["rows"][0]["flip_rate"] == pytest.approx(4 / 6)
    response = client.get(url, {"run": judged.pk, "format": "csv"})
    header, *rows = csv.reader(io.StringIO(response.content.decode(), newline=""))
    assert header == body["columns"] and len(rows) == 2
    out = io.StringIO()
    call_command("export_stats", NAME, "--run", str(judged.pk), "--format", "json", stdout=out)
    assert json.loads(out.getvalue())["rows"] == body["rows"]
    html = client.get(reverse("stats:dashboard"), {"run": judged.pk}).content.decode()
    assert f'id="{NAME}"' in html and "Pairwise judge consistency" in html
    assert "66.7" in html  # pj-one's flip rate, as a percentage


def test_a_run_without_pairwise_verdicts_says_how_to_get_them(study_run):
    t = tables.build(NAME, TableRequest(run=study_run))
    assert t.rows == [] and t.notes[0].startswith("no pairwise verdicts: judge pairs with")


def test_the_demo_judges_flip_where_position_bias_was_planted(demo_run):
    """Worked out from the recordings alone: a pair flips when the judge's two answers, mapped
    back to sides, differ (side A: the model sorting first, or a model's vanilla reply)."""
    from benchmark.evaluation.demo_run import PAIRWISE_FILE

    rank = {"vanilla": 0, "rubric_injected": 1}
    answers = {}
    for line in PAIRWISE_FILE.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        first = (r["first_model"], rank[r["first_condition"]])
        second = (r["second_model"], rank[r["second_condition"]])
        side = {"1": "first", "2": "second"}.get(r["choice"], r["choice"])
        if side in ("first", "second"):
            side = "A" if (side == "first") == (first < second) else "B"
        pair = (r["judge"], r["unique_id_eval"], r["turn"], frozenset((first, second)))
        answers.setdefault(pair, []).append(side)
    flips = Counter(judge for (judge, *_), sides in answers.items() if len(set(sides)) > 1)
    rows = {r["judge"]: r for r in tables.build(NAME, TableRequest(run=demo_run)).rows}
    assert set(rows) == {"demo-judge-primary", "demo-judge-crossfamily"}
    for judge, row in rows.items():
        assert row["n_comparisons"] == 297 and row["n_judge_errors"] == 0
        assert row["n_comparisons"] - row["n_consistent"] == flips[judge]
    assert rows["demo-judge-crossfamily"]["flip_rate"] > 2 * rows["demo-judge-primary"]["flip_rate"]
    assert rows["demo-judge-crossfamily"]["first_position_share"] > 0.55


def test_the_demo_judges_battles_rank_the_six_sources(demo_run):
    """The consistent verdicts feed the Bradley–Terry fit as they come: the models pairs and
    the conditions pairs link all six sources (model · condition), so the graph is connected."""
    skipped = Counter()
    battles = selectors.run_pairwise_battles(
        run=demo_run, judge="demo-judge-primary", skipped=skipped
    )
    data = Battles.from_records((b.source_a, b.source_b, b.winner) for b in battles)
    row = tables.build(NAME, TableRequest(run=demo_run)).rows
    primary = next(r for r in row if r["judge"] == "demo-judge-primary")
    assert len(data) == primary["n_consistent"]
    assert skipped == {"inconsistent": primary["n_comparisons"] - primary["n_consistent"]}
    assert data.sources == tuple(
        sorted(
            f"{model} · {condition}"
            for model in ("demo-atlas-large", "demo-birch-medium", "demo-cedar-small")
            for condition in ("vanilla", "rubric-injected")
        )
    )
    result = bradley_terry(data, resamples=20)
    assert result.sources == data.sources and result.rating.shape == (6,)
