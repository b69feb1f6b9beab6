import io
import json

import pytest
from django.core.management import call_command

from benchmark.corpus.exporter import corpus_export
from benchmark.corpus.importer import corpus_import
from benchmark.corpus.schema import EXTENSION_KEY
from benchmark.models import Dialogue
from tests.factories import dialogue_record, jsonl_bytes, records_for, stream

pytestmark = pytest.mark.django_db


def _export(**kwargs) -> list[dict]:
    out = io.StringIO()
    corpus_export(out=out, **kwargs)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _official(record: dict) -> dict:
    return {k: v for k, v in record.items() if k != EXTENSION_KEY}


def test_export_of_import_equals_input_on_every_official_key():
    records = records_for(3)
    records[1]["release_note"] = "unmodelled keys survive"
    records[2]["turn_records"][0]["planner"] = None
    records[2].pop("token_usage")
    corpus_import(stream=stream(jsonl_bytes(records)))
    exported = _export()
    assert [_official(r) for r in exported] == records


def test_export_carries_workbench_additions_that_import_reads_back():
    extension = {
        "demo": True,
        "status": "accepted",
        "persona": {"name": "Mara Lind", "summary": "Runs a small design studio."},
        "scenario": {
            "title": "Studio offsite",
            "hidden_goal": "Keep the team together.",
            "surface_request": "Find a venue.",
            "ideal_trajectory": "Spot the risks.",
        },
        "anchors": [
            {"key": "A1", "text": "No projector at the venue.", "turn": 1},
            {"key": "A2", "text": "Budget is fixed.", "turn": 2},
            {"key": "A3", "text": "Last train at 17:10.", "turn": 3},
        ],
        "trigger_anchors": {"1": ["A1"], "4": ["A2", "A3"], "8": ["A3"]},
    }
    record = dialogue_record(extension=extension)
    corpus_import(stream=stream(jsonl_bytes([record])))
    (exported,) = _export()
    ext = exported[EXTENSION_KEY]
    assert ext["status"] == "accepted" and ext["demo"] is True
    assert ext["persona"] == extension["persona"]
    assert ext["anchors"] == extension["anchors"]
    assert ext["trigger_anchors"] == extension["trigger_anchors"]
    assert ext["style"]["code"] == "Q" and ext["style"]["min_words"] == 5
    # Into a fresh database and out again: the same.
    Dialogue.objects.all().delete()
    corpus_import(stream=stream(jsonl_bytes([exported])))
    (again,) = _export()
    assert again == exported


def test_official_only_leaves_out_the_extension():
    corpus_import(stream=stream(jsonl_bytes(records_for(1))))
    (exported,) = _export(official_only=True)
    assert EXTENSION_KEY not in exported


def test_export_command_writes_a_file_atomically(tmp_path):
    corpus_import(stream=stream(jsonl_bytes(records_for(2))))
    out = tmp_path / "dialogues.jsonl"
    call_command("export_corpus", "--out", str(out), stderr=io.StringIO())
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    assert not (tmp_path / "dialogues.jsonl.partial").exists()


def test_export_command_filters_by_status(tmp_path):
    corpus_import(stream=stream(jsonl_bytes(records_for(3))))
    Dialogue.objects.filter(pk=Dialogue.objects.first().pk).update(status="accepted")
    out = tmp_path / "accepted.jsonl"
    call_command("export_corpus", "--out", str(out), "--status", "accepted", stderr=io.StringIO())
    assert len(out.read_text().splitlines()) == 1
