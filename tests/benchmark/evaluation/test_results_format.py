import io
import json

import pytest
from django.core.management import CommandError, call_command

from benchmark.corpus.importer import corpus_import
from benchmark.evaluation.results_format import results_export
from benchmark.models import EvaluationRun, EvaluationUnit, Judgment, UnitState
from tests.factories import jsonl_bytes, records_for, stream
from tests.release import release_file

pytestmark = pytest.mark.django_db


def _result_line(record: dict, *, scores=("PASS", "Partial", "FAIL"), skip_turn=None) -> dict:
    turns = {t["turn"]: t for t in record["turn_records"]}
    points, turn_records = [], []
    for tp, score in zip(record["trigger_points"], scores, strict=False):
        if tp["turn"] == skip_turn:
            result = {"status": "SKIPPED"}
        else:
            reply = f"Model reply at turn {tp['turn']}: bring a spare HDMI cable."
            result = {
                "status": "EVALUATED",
                "score": score,
                "rationale": "Because.",
                "evidence": '"bring a spare HDMI cable"',
            }
            turn_records.append(
                {
                    "turn": tp["turn"],
                    "user_message": turns[tp["turn"]]["user_message"],
                    "assistant_response": reply,
                    "original_assistant_response": turns[tp["turn"]]["assistant_response"],
                }
            )
        points.append(
            {
                "turn": tp["turn"],
                "evaluation_rubric": tp["evaluation_rubric"],
                "evaluation_result": result,
            }
        )
    return {
        "blueprint_id": record["blueprint_id"],
        "scenario_id": record["scenario_id"],
        "unique_id_eval": record["unique_id_eval"],
        "uuid": record["uuid"],
        "category_key": record["category_key"],
        "style_combination_index": record["style_combination_index"],
        "evaluated_model": "acme-1",
        "source_evaluated_model": record["evaluated_model"],
        "num_trigger_points": len(points),
        "trigger_stats": {},  # recomputed on export
        "trigger_points": points,
        "turn_records": turn_records,
        "token_usage": {"assistant": {"prompt_tokens": 10, "completion_tokens": 5, "calls": 3}},
        "source_results_path": "dataset/final_dialogues.jsonl",
    }


def test_import_creates_a_done_run_with_judgments_and_visible_missing_triggers(tmp_path):
    records = records_for(3)
    corpus_import(stream=stream(jsonl_bytes(records)))
    lines = [_result_line(records[0]), _result_line(records[1], skip_turn=4)]  # 3rd dialogue absent
    path = tmp_path / "acme-1_proactivity_bench_results.jsonl"
    path.write_bytes(jsonl_bytes(lines))
    out = io.StringIO()
    call_command("import_results", str(path), stdout=out)
    run = EvaluationRun.objects.get()
    assert run.status == "done" and run.source == "imported"
    assert EvaluationUnit.objects.filter(state=UnitState.DONE).count() == 5
    # one SKIPPED + three triggers of the dialogue with no line: coverage shows 5 of 9 scored
    assert EvaluationUnit.objects.filter(state=UnitState.MISSING).count() == 4
    assert "acme-1: 5 scored trigger(s) of 9 (4 missing)" in out.getvalue()
    verdicts = sorted(Judgment.objects.values_list("verdict", flat=True))
    assert verdicts == ["FAIL", "FAIL", "PARTIAL", "PASS", "PASS"]
    assert set(Judgment.objects.values_list("judge_name", flat=True)) == {"gpt-5-4"}
    assert set(Judgment.objects.values_list("evidence_status", flat=True)) == {"exact"}


def test_unknown_dialogue_and_bad_score_are_rejected_with_nothing_written(tmp_path):
    records = records_for(1)
    corpus_import(stream=stream(jsonl_bytes(records)))
    good = _result_line(records[0])
    bad_score = _result_line(records[0], scores=("PASS", "MAYBE", "FAIL"))
    unknown = {**_result_line(records[0]), "unique_id_eval": "nope"}
    path = tmp_path / "r.jsonl"
    path.write_bytes(jsonl_bytes([good, bad_score, unknown]))
    with pytest.raises(CommandError) as caught:
        call_command("import_results", str(path), stdout=io.StringIO())
    message = str(caught.value)
    assert "line 2, $.trigger_points[1].evaluation_result.score: r.jsonl: expected PASS" in message
    assert "line 3, $.unique_id_eval: r.jsonl: unknown dialogue 'nope'" in message
    assert EvaluationRun.objects.count() == 0 and Judgment.objects.count() == 0


def test_export_of_imported_results_round_trips(tmp_path):
    records = records_for(2)
    corpus_import(stream=stream(jsonl_bytes(records)))
    lines = [_result_line(records[0]), _result_line(records[1], skip_turn=8)]
    for line in lines:  # what the export computes
        stats = {
            t: {"PASS": 0, "PARTIAL": 0, "FAIL": 0, "SKIPPED": 0}
            for t in ("EMERGENT", "CRITICAL", "RECOVERY")
        }
        for tp in line["trigger_points"]:
            result = tp["evaluation_result"]
            key = result["score"].upper() if result["status"] == "EVALUATED" else "SKIPPED"
            stats[tp["evaluation_rubric"]["type"]][key] += 1
        line["trigger_stats"] = stats
    path = tmp_path / "acme-1_proactivity_bench_results.jsonl"
    path.write_bytes(jsonl_bytes(lines))
    call_command("import_results", str(path), "--only-listed", stdout=io.StringIO())
    run = EvaluationRun.objects.get()
    out = io.StringIO()
    results_export(run=run, endpoint=run.endpoints.get(), out=out)
    assert [json.loads(line) for line in out.getvalue().splitlines()] == lines


def test_official_results_sample_imports_and_round_trips():
    corpus = release_file("final_dialogues.sample.jsonl")
    results = release_file("gpt-5.5_proactivity_bench_results.sample.jsonl")
    call_command("import_corpus", str(corpus), stdout=io.StringIO())
    out = io.StringIO()
    call_command("import_results", str(results), stdout=out)
    run = EvaluationRun.objects.get()
    original = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    n_scored = sum(len(r["trigger_points"]) for r in original)
    assert Judgment.objects.count() == n_scored
    assert f"gpt-5.5: {n_scored} scored trigger(s) of {n_scored} (0 missing)" in out.getvalue()
    # Evidence in the release is often condensed: graded, not trusted or discarded.
    statuses = set(Judgment.objects.values_list("evidence_status", flat=True))
    assert statuses <= {"exact", "close", "not_found"} and "exact" in statuses
    # Each of the sample's 30 fragments occurs in its reply (read by hand; issue #14, F4).
    assert "evidence fragments: found 18, close 12, not found 0" in out.getvalue()
    exported = io.StringIO()
    results_export(run=run, endpoint=run.endpoints.get(), out=exported)
    assert [json.loads(line) for line in exported.getvalue().splitlines()] == original


# --- Issue #14 (F4, F5, F6)


def test_the_summary_counts_quote_fragments_as_well_as_judgments(tmp_path):
    """A judgment is "close" when any one of its fragments is found: the fragment counts
    show the ones that are not."""
    records = records_for(1)
    corpus_import(stream=stream(jsonl_bytes(records)))
    line = _result_line(records[0])
    result = line["trigger_points"][0]["evaluation_result"]
    result["evidence"] = '"bring a spare HDMI cable" and "rent a projector for the evening"'
    path = tmp_path / "r.jsonl"
    path.write_bytes(jsonl_bytes([line]))
    out = io.StringIO()
    call_command("import_results", str(path), stdout=out)
    assert "evidence quotes: close 1, exact 2" in out.getvalue()
    assert "evidence fragments: found 3, close 0, not found 1" in out.getvalue()


def test_a_dialogue_listed_twice_names_both_lines_and_writes_nothing(tmp_path):
    records = records_for(2)
    corpus_import(stream=stream(jsonl_bytes(records)))
    lines = [_result_line(records[0]), _result_line(records[1]), _result_line(records[0])]
    path = tmp_path / "r.jsonl"
    path.write_bytes(jsonl_bytes(lines))
    with pytest.raises(CommandError) as caught:
        call_command("import_results", str(path), stdout=io.StringIO())
    uid = records[0]["unique_id_eval"]
    assert (
        f"line 3, $.unique_id_eval: r.jsonl: {uid!r} of 'acme-1' is listed twice "
        "(first on r.jsonl line 1)" in str(caught.value)
    )
    assert EvaluationRun.objects.count() == 0 and Judgment.objects.count() == 0


def test_a_record_over_the_cap_is_refused_by_its_line_before_it_is_read(tmp_path, settings):
    settings.PROACTBENCH_MAX_RECORD_BYTES = 50_000
    records = records_for(2)
    corpus_import(stream=stream(jsonl_bytes(records)))
    huge = _result_line(records[1])
    huge["turn_records"][0]["assistant_response"] = "x" * 60_000
    path = tmp_path / "r.jsonl"
    path.write_bytes(jsonl_bytes([_result_line(records[0]), huge]))
    with pytest.raises(CommandError) as caught:
        call_command("import_results", str(path), stdout=io.StringIO())
    assert (
        "line 2, $: r.jsonl: record is longer than 50,000 bytes (PROACTBENCH_MAX_RECORD_BYTES)"
        in str(caught.value)
    )
    assert EvaluationRun.objects.count() == 0 and Judgment.objects.count() == 0
