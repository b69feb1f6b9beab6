import io

import pytest
from django.core.management import CommandError, call_command

from benchmark.models import Dialogue, Scenario
from tests.factories import dialogue_record, jsonl_bytes, records_for, write_jsonl

pytestmark = pytest.mark.django_db


def test_command_prints_a_summary(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", records_for(2))
    out = io.StringIO()
    call_command("import_corpus", str(path), stdout=out)
    assert "Imported: 2 dialogue(s)" in out.getvalue()
    assert "triggers: 6 (CRITICAL 2, EMERGENT 2, RECOVERY 2)" in out.getvalue()


def test_command_reports_every_error_and_fails(tmp_path):
    bad = dialogue_record()
    bad.pop("uuid")
    path = tmp_path / "d.jsonl"
    path.write_bytes(jsonl_bytes([bad], lines=["{oops"]))
    with pytest.raises(CommandError) as caught:
        call_command("import_corpus", str(path), stdout=io.StringIO())
    message = str(caught.value)
    assert "rejected with 2 error(s)" in message
    assert "line 1, $.uuid: required field is missing" in message
    assert "line 2, $: invalid JSON" in message
    assert Dialogue.objects.count() == 0


def test_command_dry_run(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", records_for(2))
    out = io.StringIO()
    call_command("import_corpus", str(path), "--dry-run", stdout=out)
    assert out.getvalue().startswith("Dry run (nothing written): 2 dialogue(s)")
    assert Dialogue.objects.count() == 0


def test_command_dry_run_counts_new_updated_and_unchanged(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", records_for(2))
    out = io.StringIO()
    call_command("import_corpus", str(path), "--dry-run", stdout=out)
    assert "(2 new, 0 updated, 0 unchanged)" in out.getvalue()
    assert "triggers: 6" in out.getvalue()
    call_command("import_corpus", str(path), stdout=io.StringIO())
    out = io.StringIO()
    call_command("import_corpus", str(path), "--dry-run", stdout=out)
    assert "(0 new, 0 updated, 2 unchanged)" in out.getvalue()
    assert Dialogue.objects.count() == 2


def test_command_strict_rejects_findings(tmp_path):
    record = dialogue_record(triggers=((1, "EMERGENT"), (2, "CRITICAL"), (8, "RECOVERY")))
    path = write_jsonl(tmp_path / "d.jsonl", [record])
    with pytest.raises(CommandError, match="trigger_outside_window"):
        call_command("import_corpus", str(path), "--strict", stdout=io.StringIO())


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="No such file"):
        call_command("import_corpus", str(tmp_path / "nope.jsonl"))


def test_tasks_and_blueprints_enrich_scenarios_and_anchors(tmp_path):
    uuid = "0123456789abcdef0123456789abcdef"
    task = {
        "uuid": uuid,
        "scenarios": [
            {
                "scenario_id": "TEST_01",
                "hidden_goal": "Keep the offsite on budget.",
                "explicit_trigger": "Find a venue.",
                "implicit_anchors": ["no projector", "fixed budget"],
                "ideal_trajectory": "Flag the AV gap early.",
            }
        ],
    }
    blueprint = {
        "blueprint_id": "BP_TEST_01_Q",
        "uuid": uuid,
        "strategic_overview": "Drip facts.",
        "interaction_roadmap": [
            {"turn": 1, "phase": "EMERGENT", "anchors_to_reveal": ["no projector"]},
            {"turn": 2, "anchors_to_reveal": ["fixed budget", "vegan lunch"]},
            {"turn": 3, "anchors_to_reveal": ["late train"]},
        ],
    }
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [task])
    blueprints = write_jsonl(tmp_path / "blueprints.jsonl", [blueprint])
    dialogues = write_jsonl(tmp_path / "d.jsonl", [dialogue_record()])
    out = io.StringIO()
    call_command(
        "import_corpus",
        str(dialogues),
        "--tasks",
        str(tasks),
        "--blueprints",
        str(blueprints),
        stdout=out,
    )
    scenario = Scenario.objects.get(key="TEST_01")
    assert scenario.hidden_goal == "Keep the offsite on budget."
    assert scenario.surface_request == "Find a venue."
    assert scenario.anchors == ["no projector", "fixed budget"]
    dialogue = Dialogue.objects.get()
    assert dialogue.anchors.count() == 4
    assert dialogue.blueprint.strategic_overview == "Drip facts."
    # The roadmap discloses two anchors at turn 2: an anchor-drip finding.
    assert [(f["code"], f["turn"]) for f in dialogue.findings] == [("anchor_drip", 2)]


def test_malformed_side_file_is_rejected_before_anything_is_written(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"scenario_title": "no id"}\n')
    dialogues = write_jsonl(tmp_path / "d.jsonl", [dialogue_record()])
    with pytest.raises(CommandError, match=r"line 1, \$.scenario_id: required field is missing"):
        call_command("import_corpus", str(dialogues), "--tasks", str(tasks))
    assert Dialogue.objects.count() == 0
