"""bench/oversized_input.py's generated files: the oversized line really is that long, at the
line number the benchmark checks the refusals against, and every other line is a normal record
(distinct ids, so an import of the normal lines alone succeeds)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from oversized_input import (  # noqa: E402
    _demo_records,
    refused_at,
    result_records,
    write_corpus,
    write_results,
)


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def test_the_corpus_has_one_line_of_the_given_size_at_the_number_it_reports(tmp_path):
    path = tmp_path / "corpus.jsonl"
    big_at = write_corpus(path, total=3_000_000, line=1_500_000, records=_demo_records())
    lines = _lines(path)
    assert len(lines[big_at - 1]) > 1_500_000
    assert all(len(line) < 200_000 for n, line in enumerate(lines, 1) if n != big_at)
    records = [json.loads(line) for line in lines]
    assert records[big_at - 1]["turn_records"][0]["user_message"].startswith("The reply goes on")
    ids = [r["unique_id_eval"] for r in records]
    assert len(set(ids)) == len(ids)
    assert all(r["unique_id_eval"].endswith(r["uuid"]) for r in records)


def test_a_corpus_without_a_big_line_is_the_demo_dialogues(tmp_path):
    path = tmp_path / "normal.jsonl"
    assert write_corpus(path, total=0, line=0, records=_demo_records()) == 0
    assert [json.loads(line) for line in _lines(path)] == _demo_records()


def test_the_results_file_has_one_huge_reply_at_the_number_it_reports(tmp_path):
    records = _demo_records()
    path = tmp_path / "results.jsonl"
    big_at = write_results(path, line=1_000_000, records=records)
    rows = [json.loads(line) for line in _lines(path)]
    assert len(rows) == len(records)
    big = rows[big_at - 1]
    turn = big["trigger_points"][0]["turn"]
    assert len(big["turn_records"][turn - 1]["assistant_response"]) == 1_000_000
    assert rows[0] == result_records(records)[0]


def test_refusals_are_read_by_their_line_numbers():
    assert refused_at("line 31, $: record is longer than 8,388,608 bytes") == "31"
    assert refused_at("x.jsonl: line 6, $: …\nline 2, $.uuid: …") == "2, 6"
    assert refused_at("Imported: 10 dialogue(s)") == "—"
