import csv
import io
import json
import re

import pytest
from django.core.management import CommandError, call_command

from stats import tables
from tests.release import release_file


def _run(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("export_stats", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.parametrize("table", [s.name for s in tables.all_specs() if s.needs == tables.RUN])
def test_every_run_table_as_csv_and_json_with_the_same_values(
    demo_run, client_for, researcher, table
):
    text, _ = _run(table, "--run", str(demo_run.pk))
    as_json, _ = _run(table, "--run", str(demo_run.pk), "--format", "json")
    body = json.loads(as_json)
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows[0] == [c.name for c in tables.get(table).columns] == body["columns"]
    assert len(rows) - 1 == len(body["rows"])
    # and the API serves the very same numbers
    api = client_for(researcher).get(f"/api/v1/tables/{table}/?run={demo_run.pk}").json()
    assert api["rows"] == body["rows"]


def test_verdict_source_condition_and_out_file(demo_run, tmp_path):
    out = tmp_path / "lb.json"
    _, err = _run(
        "leaderboard",
        "--verdicts",
        "adjudicated",
        "--condition",
        "rubric_injected",
        "--format",
        "json",
        "--out",
        str(out),
    )
    body = json.loads(out.read_text(encoding="utf-8"))
    assert body["params"]["verdicts"] == "adjudicated"
    assert {r["condition"] for r in body["rows"]} == {"rubric_injected"}
    assert "12 row(s) of leaderboard written" in err


def test_errors_are_command_errors(demo_run):
    with pytest.raises(CommandError, match="no run 999"):
        _run("leaderboard", "--run", "999")
    with pytest.raises(CommandError, match="no judge 'x'"):
        _run("leaderboard", "--verdicts", "x")
    with pytest.raises(CommandError, match="no study 1"):
        _run("preference", "--study", "1")
    with pytest.raises(CommandError, match="the failure-modes table reads a human study"):
        _run("failure-modes")


def test_study_tables_from_the_release_human_eval_files(tmp_path, db):
    folder = tmp_path / "human_eval"
    (folder / "results").mkdir(parents=True)
    (folder / "pairwise" / "results").mkdir(parents=True)
    (folder / "sample_items.json").symlink_to(release_file("study1_sample_items.sample.json"))
    (folder / "results" / "A01.jsonl").symlink_to(release_file("study1_ratings.sample.jsonl"))
    (folder / "pairwise" / "sample_items.json").symlink_to(
        release_file("pairwise_sample_items.sample.json")
    )
    (folder / "pairwise" / "results" / "P01.jsonl").symlink_to(
        release_file("pairwise_ratings.sample.jsonl")
    )
    text, _ = _run("preference", "--release-dir", str(tmp_path), "--format", "json")
    overall = json.loads(text)["rows"][0]
    assert (overall["n_injected"], overall["n_decided"], overall["n_ties"]) == (2, 2, 0)
    text, _ = _run("human-agreement", "--release-dir", str(tmp_path))
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert [r["group"] for r in rows] == ["ALL", "RECOVERY", "EMERGENT"]
    assert rows[0]["n_ratings"] == "8" and rows[0]["majority_PASS_judge_PARTIAL"] == "2"
    text, _ = _run("preference-raters", "--release-dir", str(tmp_path))
    raters = list(csv.DictReader(io.StringIO(text, newline="")))
    assert [
        (r["annotator"], float(r["injected_rate"]), float(r["median_seconds"])) for r in raters
    ] == [
        ("P03", 1.0, 235.0),
        ("P08", 1.0, 125.0),
    ]
    with pytest.raises(CommandError, match="no human_eval folder"):
        _run("preference", "--release-dir", str(tmp_path / "nowhere"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["leaderboard", "--seed", "-1"], "--seed must be a non-negative integer, not -1"),
        (["preference", "--study", "1", "--seed", "-5"], "--seed must be a non-negative integer"),
        (["leaderboard", "--seed", "x"], "argument --seed: invalid int value: 'x'"),
        (["leaderboard", "--run", "²"], "argument --run: invalid int value"),
        (["leaderboard", "--condition", "other"], "argument --condition: invalid choice"),
        (["no-such-table"], "argument table: invalid choice"),
    ],
)
def test_bad_option_values_are_command_errors_naming_the_option(demo_run, args, message):
    # A negative seed reached NumPy's SeedSequence: a ValueError traceback.
    with pytest.raises(CommandError, match=re.escape(message)):
        _run(*args)


def test_an_out_path_that_cannot_be_written_is_a_command_error(demo_run, tmp_path):
    # Was an IsADirectoryError / FileNotFoundError traceback.
    with pytest.raises(CommandError, match="cannot write .*: Is a directory"):
        _run("leaderboard", "--out", str(tmp_path))
    with pytest.raises(CommandError, match="cannot write .*: No such file or directory"):
        _run("leaderboard", "--out", str(tmp_path / "missing" / "lb.csv"))
