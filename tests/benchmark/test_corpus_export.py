import io
import json

import pytest
from django.core.management import CommandError, call_command

from benchmark.corpus.exporter import corpus_export
from benchmark.corpus.importer import corpus_import
from benchmark.corpus.parsing import official_format_errors
from benchmark.corpus.schema import EXTENSION_KEY
from benchmark.models import Dialogue, Trigger, TurnImage
from benchmark.vocabulary import RELEASE_TRIGGER_TYPES, TriggerType
from tests.factories import dialogue_record, jsonl_bytes, records_for, stream
from tests.images import embedded, image_bytes, with_images

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


# --- Official-only: a file the official tools accept ------------------------------------------


def _official_only_file(tmp_path, *extra: str) -> tuple[list[str], str]:
    out = tmp_path / "official.jsonl"
    err = io.StringIO()
    call_command("export_corpus", "--out", str(out), "--official-only", *extra, stderr=err)
    return out.read_text(encoding="utf-8").splitlines(), err.getvalue()


def test_official_only_export_of_the_demo_corpus_is_an_official_file(tmp_path):
    """The demo (text dialogues, and the multimodal ones whose only trigger is INTERVENTION):
    every line passes the official checks, none names INTERVENTION, and stderr counts what
    was left out."""
    call_command("load_demo", "--no-users", stdout=io.StringIO())
    interventions = Trigger.objects.filter(type=TriggerType.INTERVENTION)
    images = TurnImage.objects.count()
    assert interventions.exists() and images
    only_intervention = (
        Dialogue.objects.exclude(turns__trigger__type__in=RELEASE_TRIGGER_TYPES).distinct().count()
    )
    lines, err = _official_only_file(tmp_path)

    assert len(lines) == Dialogue.objects.count() - only_intervention
    for number, line in enumerate(lines, start=1):
        assert official_format_errors(number, json.loads(line)) == [], number
    assert "INTERVENTION" not in "\n".join(lines)
    assert "x_workbench" not in "\n".join(lines)
    assert (
        f"left out {interventions.count()} INTERVENTION triggers and {images} turn images, "
        "which the official format cannot express; "
        f"{only_intervention} dialogue(s) had no other trigger and were left out whole"
    ) in err
    assert f"Wrote {len(lines)} dialogue(s)" in err
    # The import's own checks take it too (a dry run writes nothing).
    summary = corpus_import(stream=stream("\n".join(lines).encode()), dry_run=True)
    assert summary.dialogues == len(lines)


def test_official_only_keeps_a_dialogues_other_triggers_and_its_text_turns(tmp_path):
    """An INTERVENTION beside the release's three triggers: the three stay, INTERVENTION goes,
    and the Planner's record of that turn reads as a turn that is no trigger."""
    record = dialogue_record(
        triggers=((2, "INTERVENTION"), (3, "EMERGENT"), (5, "CRITICAL"), (8, "RECOVERY"))
    )
    with_images(record, {"2": [embedded(image_bytes(), alt="a hand over the label")]})
    corpus_import(stream=stream(jsonl_bytes([record])))
    lines, err = _official_only_file(tmp_path)

    (exported,) = (json.loads(line) for line in lines)
    assert [p["turn"] for p in exported["trigger_points"]] == [3, 5, 8]
    assert exported["trigger_points"] == record["trigger_points"][1:]
    assert [t["user_message"] for t in exported["turn_records"]] == [
        t["user_message"] for t in record["turn_records"]
    ]
    planner = exported["turn_records"][1]["planner"]
    assert planner["is_trigger_point"] is False and planner["evaluation_rubric"] is None
    assert planner["tactical_order"] == record["turn_records"][1]["planner"]["tactical_order"]
    assert exported["turn_records"][2] == record["turn_records"][2]
    assert official_format_errors(1, exported) == []
    assert "left out 1 INTERVENTION trigger and 1 turn image, which" in err
    assert "left out whole" not in err
    # The full export still carries both.
    (full,) = _export()
    assert [p["evaluation_rubric"]["type"] for p in full["trigger_points"]][0] == "INTERVENTION"
    assert full[EXTENSION_KEY]["turn_images"]["2"][0]["alt"] == "a hand over the label"


def test_an_official_only_export_of_release_dialogues_says_nothing_was_left_out(tmp_path):
    corpus_import(stream=stream(jsonl_bytes(records_for(2))))
    lines, err = _official_only_file(tmp_path)
    assert len(lines) == 2 and "left out" not in err


def test_the_official_check_refuses_what_the_official_tools_do_not_know():
    record = dialogue_record(triggers=((2, "INTERVENTION"), (3, "EMERGENT")), extension={})
    errors = [str(error) for error in official_format_errors(4, record)]
    assert errors == [
        "line 4, $.x_workbench: a Workbench key, not official",
        "line 4, $.trigger_points[0].evaluation_rubric.type: 'INTERVENTION' is not an "
        "official trigger type",
        "line 4, $.turn_records[1].planner.evaluation_rubric.type: 'INTERVENTION' is not an "
        "official trigger type",
    ]
    del record["turn_records"]
    assert [str(e) for e in official_format_errors(4, record)] == [
        "line 4, $.turn_records: required field is missing"
    ]


def test_an_official_only_export_that_would_not_be_official_writes_nothing(tmp_path):
    """A stored dialogue the official format refuses even without the Workbench's additions
    (an empty criterion, as no import would store): the command names it and leaves no file."""
    corpus_import(stream=stream(jsonl_bytes(records_for(2))))
    Trigger.objects.filter(pk=Trigger.objects.order_by("pk").last().pk).update(fail_criteria=" ")
    out = tmp_path / "official.jsonl"
    with pytest.raises(CommandError, match=r"Nothing written: dialogue '.*': line 2, "):
        call_command("export_corpus", "--out", str(out), "--official-only", stderr=io.StringIO())
    assert list(tmp_path.iterdir()) == []


def test_official_only_with_an_images_folder_or_zip_is_refused(tmp_path):
    corpus_import(stream=stream(jsonl_bytes(records_for(1))))
    out = tmp_path / "official.jsonl"
    for images in ("folder", "zip"):
        with pytest.raises(CommandError, match=f"leave out --images {images}"):
            call_command("export_corpus", "--out", str(out), "--official-only", "--images", images)
    assert list(tmp_path.iterdir()) == []
