"""The paper's numbers from the release's raw files: import the dialogue and GPT-5.5 results
samples as the pipeline does, then the leaderboard must give what the file's own trigger_stats
say (micro-averaged, SKIPPED excluded, coverage shown)."""

import csv
import io
import json
from collections import Counter

import pytest
from django.core.management import call_command

from benchmark.models import EvaluationRun
from tests.release import release_file

pytestmark = pytest.mark.django_db


def _file_counts(path):
    """(trigger type | ALL) → Counter of PASS/PARTIAL/FAIL/SKIPPED from trigger_stats."""
    counts = {"ALL": Counter()}
    for line in path.read_text(encoding="utf-8").splitlines():
        for trigger_type, stats in json.loads(line)["trigger_stats"].items():
            counts.setdefault(trigger_type, Counter()).update(stats)
            counts["ALL"].update(stats)
    return counts


def test_gpt55_sample_leaderboard_matches_its_trigger_stats():
    call_command(
        "import_corpus", str(release_file("final_dialogues.sample.jsonl")), stdout=io.StringIO()
    )
    results = release_file("gpt-5.5_proactivity_bench_results.sample.jsonl")
    call_command("import_results", str(results), stdout=io.StringIO())
    run = EvaluationRun.objects.get()
    out = io.StringIO()
    call_command("export_stats", "leaderboard", "--run", str(run.pk), stdout=out)
    rows = {r["trigger_type"]: r for r in csv.DictReader(io.StringIO(out.getvalue(), newline=""))}
    expected = _file_counts(results)
    assert set(rows) == set(expected)
    for trigger_type, counts in expected.items():
        row = rows[trigger_type]
        scored = counts["PASS"] + counts["PARTIAL"] + counts["FAIL"]
        assert row["model_display"] == "gpt-5.5" and row["verdicts"] == "primary"
        assert int(row["n"]) == scored and int(row["n_expected"]) == scored + counts["SKIPPED"]
        assert float(row["pass_rate"]) == pytest.approx(counts["PASS"] / scored)
        assert float(row["weighted_score"]) == pytest.approx(
            (counts["PASS"] + 0.5 * counts["PARTIAL"]) / scored
        )
    # 11 triggers in the sample: overall 6 of 11 pass, weighted (6 + 0.5 * 4) / 11
    assert rows["ALL"]["n"] == "11" and float(rows["ALL"]["pass_rate"]) == pytest.approx(6 / 11)
    assert float(rows["ALL"]["coverage"]) == 1.0


def test_a_model_with_missing_rows_shows_its_coverage(tmp_path):
    call_command(
        "import_corpus", str(release_file("final_dialogues.sample.jsonl")), stdout=io.StringIO()
    )
    lines = (
        release_file("gpt-5.5_proactivity_bench_results.sample.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
    )
    partial = tmp_path / "gpt-5.5_partial.jsonl"
    partial.write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")
    call_command("import_results", str(partial), stdout=io.StringIO())
    out = io.StringIO()
    call_command("export_stats", "leaderboard", "--format", "json", stdout=out)
    overall = next(r for r in json.loads(out.getvalue())["rows"] if r["trigger_type"] == "ALL")
    missing = len(json.loads(lines[2])["trigger_points"])
    assert overall["n_expected"] == 11 and overall["n"] == 11 - missing
    assert overall["coverage"] == pytest.approx((11 - missing) / 11)
