"""Selectors over the demo run: the numbers are recomputed here straight from the demo's
recorded files, so a selector that picks the wrong judge, condition or unit shows."""

import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from benchmark.corpus.importer import corpus_import
from benchmark.models import Dialogue, JudgeDisagreement, Trigger
from stats import selectors, tables
from stats.compute import agreement
from stats.compute.style import style_sensitivity
from stats.selectors import StatsInputError, TableRequest, VerdictSource
from tests.factories import dialogue_record, jsonl_bytes, stream

DEMO_DIR = settings.BASE_DIR / "benchmark" / "demo_data"
CODES = {"FAIL": 0, "PARTIAL": 1, "PASS": 2}


def _recorded(judge, condition="vanilla"):
    """(model, trigger type) → Counter of verdicts, from the demo's files."""
    dialogues = {}
    with (DEMO_DIR / "dialogues.jsonl").open(encoding="utf-8") as lines:
        for record in map(json.loads, lines):
            dialogues[record["unique_id_eval"]] = {
                tp["turn"]: tp["evaluation_rubric"]["type"] for tp in record["trigger_points"]
            }
    out = defaultdict(Counter)
    with (DEMO_DIR / "judgments.jsonl").open(encoding="utf-8") as lines:
        for j in map(json.loads, lines):
            if j["judge"] == judge and j["condition"] == condition:
                trigger_type = dialogues[j["unique_id_eval"]][j["turn"]]
                out[(j["model"], trigger_type)][j["verdict"]] += 1
                out[(j["model"], "ALL")][j["verdict"]] += 1
    return out


def test_verdict_source_parsing():
    assert VerdictSource.parse("") == VerdictSource("primary")
    assert VerdictSource.parse("adjudicated").label == "adjudicated"
    assert VerdictSource.parse("judge:gpt-5-4") == VerdictSource("judge", "gpt-5-4")
    assert VerdictSource.parse("gpt-5-4").label == "gpt-5-4"


@pytest.mark.parametrize(
    ("source", "judge", "condition"),
    [
        ("primary", "demo-judge-primary", "vanilla"),
        ("demo-judge-crossfamily", "demo-judge-crossfamily", "vanilla"),
        ("primary", "demo-judge-primary", "rubric_injected"),
    ],
)
def test_leaderboard_counts_match_the_recorded_verdicts(demo_run, source, judge, condition):
    request = TableRequest(run=demo_run, verdicts=VerdictSource.parse(source), condition=condition)
    table = tables.build("leaderboard", request)
    recorded = _recorded(judge, condition)
    assert len(table.rows) == 3 * 4
    for row in table.rows:
        counts = recorded[(row["model"], row["trigger_type"])]
        assert (row["n_pass"], row["n_partial"], row["n_fail"]) == (
            counts["PASS"],
            counts["PARTIAL"],
            counts["FAIL"],
        )
        assert row["pass_rate"] == pytest.approx(counts["PASS"] / counts.total())
        assert row["coverage"] == 1.0 and row["condition"] == condition
        assert row["pass_ci_low"] <= row["pass_rate"] <= row["pass_ci_high"]
    assert table.params == {
        "seed": 20260501,
        "run": demo_run.pk,
        "verdicts": source,
        "condition": condition,
    }


def test_run_replies_takes_a_fixed_number_of_queries(demo_run, django_assert_max_num_queries):
    demo_run = type(demo_run).objects.get(pk=demo_run.pk)
    with django_assert_max_num_queries(4):
        replies = selectors.run_replies(
            run=demo_run, verdicts=VerdictSource("adjudicated"), condition="vanilla"
        )
    # The run's triggers: the multimodal demo's dialogues are loaded beside it, not in it.
    triggers = Trigger.objects.filter(turn__dialogue__in=demo_run.dialogues.all())
    assert replies.unit_id.size == 3 * triggers.count()
    assert (replies.verdict >= 0).all()


def test_adjudicated_verdicts_replace_the_primary_judge_where_a_person_decided(demo_run):
    primary = selectors.run_replies(
        run=demo_run, verdicts=VerdictSource("primary"), condition="vanilla"
    )
    disagreement = JudgeDisagreement.objects.filter(
        unit__run=demo_run, unit__condition="vanilla"
    ).first()
    before = primary.verdict[primary.unit_id == disagreement.unit_id][0]
    final = next(v for v in ("PASS", "PARTIAL", "FAIL") if CODES[v] != before)
    disagreement.final_verdict = final
    disagreement.save()
    adjudicated = selectors.run_replies(
        run=demo_run, verdicts=VerdictSource("adjudicated"), condition="vanilla"
    )
    changed = adjudicated.verdict != primary.verdict
    assert adjudicated.unit_id[changed].tolist() == [disagreement.unit_id]
    assert adjudicated.verdict[changed].tolist() == [CODES[final]]


def test_unknown_judge_and_missing_run_are_clear_errors(demo_run):
    with pytest.raises(StatsInputError, match="no judge 'nobody'.*demo-judge-crossfamily"):
        tables.build(
            "leaderboard", TableRequest(run=demo_run, verdicts=VerdictSource.parse("nobody"))
        )
    with pytest.raises(StatsInputError, match="no evaluation run"):
        tables.build("leaderboard", TableRequest(run=None))
    with pytest.raises(StatsInputError, match="unknown table"):
        tables.build("nope", TableRequest(run=demo_run))


def test_judge_agreement_matches_kappa_on_the_recorded_pairs(demo_run):
    table = tables.build("judge-agreement", TableRequest(run=demo_run))
    overall = next(r for r in table.rows if r["trigger_type"] == "ALL")
    pairs = defaultdict(dict)
    with (DEMO_DIR / "judgments.jsonl").open(encoding="utf-8") as lines:
        for j in map(json.loads, lines):
            if j["condition"] == "vanilla":
                key = (j["unique_id_eval"], j["turn"], j["model"])
                pairs[key][j["judge"]] = CODES[j["verdict"]]
    a = np.array([p["demo-judge-crossfamily"] for p in pairs.values()])
    b = np.array([p["demo-judge-primary"] for p in pairs.values()])
    assert (overall["judge_a"], overall["judge_b"]) == (
        "demo-judge-crossfamily",
        "demo-judge-primary",
    )
    assert overall["n_units"] == len(pairs)
    assert overall["agreement"] == pytest.approx(np.mean(a == b))
    assert overall["cohen_kappa"] == pytest.approx(agreement.cohen_kappa(a, b, 3))
    assert overall["linear_kappa"] == pytest.approx(agreement.cohen_kappa(a, b, 3, "linear"))
    assert overall["n_models"] == 3 and -1 <= overall["kendall_tau"] <= 1
    assert {r["trigger_type"] for r in table.rows} == {"ALL", "EMERGENT", "CRITICAL", "RECOVERY"}


def test_style_tables_over_the_demo_styles(demo_run):
    request = TableRequest(run=demo_run)
    sensitivity = tables.build("style-sensitivity", request)
    logits = tables.build("style-logits", request)
    styles = Dialogue.objects.values("style").distinct().count()
    assert len(sensitivity.rows) == 3
    assert all(row["n_configurations"] == styles for row in sensitivity.rows)
    assert len(logits.rows) == 3 * styles
    row = logits.rows[0]
    assert row["logit"] == pytest.approx(np.log((row["k"] + 0.5) / (row["n"] - row["k"] + 0.5)))


def test_style_sensitivity_by_phase_fits_the_trigger_types(demo_run):
    request = TableRequest(run=demo_run)
    by_phase = tables.build("style-sensitivity-by-phase", request)
    phases = {"EMERGENT", "CRITICAL", "RECOVERY"}
    assert len(by_phase.rows) == 3
    assert all(row["configuration"] == "phase" for row in by_phase.rows)
    assert all(row["n_configurations"] == len(phases) for row in by_phase.rows)
    # The same fit as the pure function over the trigger types, checked independently here.
    replies = selectors.replies_for(request)
    scored = replies.verdict >= 0
    result = style_sensitivity(
        models=replies.model[scored],
        configurations=replies.trigger_type[scored].astype(str),
        passed=replies.verdict[scored] == 2,
    )
    assert set(result.configurations) == phases
    slopes = {m: fit.slope for m, fit in zip(result.models, result.fits, strict=True)}
    assert {r["model"]: r["slope"] for r in by_phase.rows} == pytest.approx(slopes, nan_ok=True)
    by_style = tables.build("style-sensitivity", request)
    assert [r["slope"] for r in by_style.rows] != [r["slope"] for r in by_phase.rows]


def _anchored_dialogue():
    record = dialogue_record(
        "BP_ANCHOR_01_Q__style4__" + "a" * 32,
        n_turns=10,
        triggers=((1, "EMERGENT"), (4, "CRITICAL"), (8, "RECOVERY"), (10, "RECOVERY")),
        blueprint_id="BP_ANCHOR_01_Q",
        scenario_id="ANCHOR_01",
        persona_uuid="a" * 32,
        extension={
            "anchors": [
                {"key": "A1", "text": "the boot is small", "turn": 2},
                {"key": "A2", "text": "install order is fixed", "turn": 5},
            ],
            "trigger_anchors": {"8": ["A2"]},
        },
    )
    corpus_import(stream=stream(jsonl_bytes([record])))
    return Dialogue.objects.get(unique_id_eval=record["unique_id_eval"])


@pytest.mark.django_db
def test_disclosure_distance_uses_linked_anchors_else_the_first_earlier_disclosure():
    dialogue = _anchored_dialogue()
    triggers = list(Trigger.objects.filter(turn__dialogue=dialogue).order_by("turn__index"))
    distances = selectors.disclosure_distances(
        np.array([t.pk for t in triggers]),
        np.array([dialogue.pk] * 4),
        np.array([t.turn.index for t in triggers]),
    )
    # turn 1: nothing disclosed before; turn 4: A1 (turn 2); turn 8: linked A2 (turn 5);
    # turn 10: unlinked, first disclosure turn 2
    assert np.isnan(distances[0])
    assert distances[1:].tolist() == [2.0, 3.0, 8.0]


def test_disclosure_distance_table_on_the_demo(demo_run):
    table = tables.build("disclosure-distance", TableRequest(run=demo_run))
    assert len(table.rows) == 3
    recovery = Trigger.objects.filter(type="RECOVERY").count()
    for row in table.rows:
        assert row["n"] + row["n_without_distance"] == recovery
        assert row["mean_distance"] > 0


def test_study_tables_without_a_study_say_how_to_choose_one(demo_run):
    for name in ("human-agreement", "preference", "preference-raters", "failure-modes"):
        assert tables.get(name).needs == tables.STUDY
        with pytest.raises(StatsInputError, match=f"the {name} table reads a human study"):
            tables.build(name, TableRequest(run=demo_run))
    with pytest.raises(StatsInputError, match="no per-reply failure-mode labels"):
        tables.build("failure-modes", TableRequest(release_dir=Path("release")))
