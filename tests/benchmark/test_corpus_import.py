import copy
import json

import pytest

from benchmark.corpus.importer import CorpusImportError, corpus_import
from benchmark.models import Anchor, Dialogue, DialogueStatus, Persona, Scenario, Trigger, Turn
from tests.factories import dialogue_record, jsonl_bytes, records_for, stream

pytestmark = pytest.mark.django_db


def _import(data: bytes, **kwargs):
    return corpus_import(stream=stream(data), source="test.jsonl", **kwargs)


def _rejected(data: bytes, **kwargs) -> list[str]:
    with pytest.raises(CorpusImportError) as caught:
        _import(data, **kwargs)
    return [str(e) for e in caught.value.errors]


def _row_counts() -> tuple[int, ...]:
    return tuple(m.objects.count() for m in (Dialogue, Turn, Trigger, Persona, Scenario, Anchor))


def test_valid_file_imports_dialogues_turns_and_triggers():
    summary = _import(jsonl_bytes(records_for(3)))
    assert summary.dialogues == 3 and summary.created == 3
    assert Dialogue.objects.count() == 3
    assert Turn.objects.count() == 27
    assert Trigger.objects.count() == 9
    assert dict(summary.triggers_by_type) == {"EMERGENT": 3, "CRITICAL": 3, "RECOVERY": 3}
    dialogue = Dialogue.objects.get(unique_id_eval__startswith="BP_TEST_01")
    assert dialogue.style.code == "Q" and dialogue.domain.key == "professional_persona"
    assert dialogue.status == DialogueStatus.DRAFT
    trigger = Trigger.objects.get(turn__dialogue=dialogue, type="CRITICAL")
    assert trigger.turn.index == 4
    assert "literal request" in trigger.fail_criteria


# --- Structural errors: each rule with a failing and a passing example -------------------


def _mutate(fn):
    record = dialogue_record()
    fn(record)
    return record


STRUCTURAL_CASES = {
    "missing required field": (
        lambda r: r.pop("category_key"),
        "$.category_key: required field is missing",
    ),
    "mistyped field (string turn number)": (
        lambda r: r["turn_records"][2].__setitem__("turn", "3"),
        "$.turn_records[2].turn: Input should be a valid integer",
    ),
    "mistyped field (style out of range)": (
        lambda r: r.__setitem__("style_combination_index", 25),
        "$.style_combination_index: Input should be less than or equal to 24",
    ),
    "unknown category": (
        lambda r: r.__setitem__("category_key", "gardening_persona"),
        "$.category_key: Input should be",
    ),
    "unknown trigger type": (
        lambda r: r["trigger_points"][0]["evaluation_rubric"].__setitem__("type", "LATE"),
        "$.trigger_points[0].evaluation_rubric.type: Input should be",
    ),
    "turn indices not 1..n": (
        lambda r: r["turn_records"][4].__setitem__("turn", 7),
        "$.turn_records[4].turn: turns must be numbered 1..n in order: expected 5, found 7",
    ),
    "trigger pointing at a missing turn": (
        lambda r: r["trigger_points"][2].__setitem__("turn", 12),
        "$.trigger_points[2].turn: trigger points at turn 12, which does not exist",
    ),
    "rubric missing a criterion": (
        lambda r: r["trigger_points"][1]["evaluation_rubric"].pop("partial_criteria"),
        "$.trigger_points[1].evaluation_rubric.partial_criteria: required field is missing",
    ),
    "rubric with an empty criterion": (
        lambda r: r["trigger_points"][1]["evaluation_rubric"].__setitem__("fail_criteria", "  "),
        "$.trigger_points[1].evaluation_rubric.fail_criteria: Value error, must not be empty",
    ),
    "two triggers on one turn": (
        lambda r: r["trigger_points"].append(copy.deepcopy(r["trigger_points"][0])),
        "$.trigger_points[3].turn: second trigger at turn 1",
    ),
    "no triggers": (
        lambda r: r.__setitem__("trigger_points", []),
        "$.trigger_points: List should have at least 1 item",
    ),
}


@pytest.mark.parametrize("case", STRUCTURAL_CASES)
def test_structural_error_rejects_file_and_names_line_and_path(case):
    mutate, expected = STRUCTURAL_CASES[case]
    good = records_for(2)
    data = jsonl_bytes([*good, _mutate(mutate)])
    before = _row_counts()
    errors = _rejected(data)
    assert any(e.startswith(f"line 3, {expected}") for e in errors), errors
    assert _row_counts() == before  # nothing written


def test_the_unmutated_record_of_every_structural_case_imports():
    # The passing example shared by every case above: the same record, unmutated.
    assert _import(jsonl_bytes([dialogue_record()])).dialogues == 1


def test_bad_json_is_reported_with_line_number():
    data = jsonl_bytes(records_for(1), lines=['{"unique_id_eval": "x",'])
    errors = _rejected(data)
    assert errors[0].startswith("line 2, $: invalid JSON:")


def test_non_object_line_is_rejected():
    assert _rejected(jsonl_bytes(records_for(1), lines=["[1, 2]"])) == [
        "line 2, $: expected a JSON object, got list"
    ]


def test_duplicate_unique_id_is_rejected_naming_the_first_line():
    record = dialogue_record()
    errors = _rejected(jsonl_bytes([record, records_for(1)[0], record]))
    assert errors == [
        f"line 3, $.unique_id_eval: duplicate unique_id_eval {record['unique_id_eval']!r} "
        "(first on line 1)"
    ]


def test_wrong_encoding_latin1_is_rejected():
    data = jsonl_bytes(records_for(1)) + '{"note": "café"}\n'.encode("latin-1")
    errors = _rejected(data)
    assert errors == ["line 2, $: not valid UTF-8 (byte 0xe9 at column 14)"]


def test_utf16_file_is_rejected_with_advice():
    data = "\n".join(json.dumps(r) for r in records_for(1)).encode("utf-16")
    assert _rejected(data) == [
        "line 1, $: file is UTF-16; save it as UTF-8 (JSON Lines must be UTF-8)"
    ]


def test_bom_and_blank_lines_are_fine():
    body = jsonl_bytes(records_for(2)).replace(b"}\n", b"}\n\n   \n", 1)
    summary = _import(b"\xef\xbb\xbf" + body)
    assert summary.dialogues == 2


def test_every_error_of_the_file_is_reported_at_once():
    bad_turn = _mutate(lambda r: r["turn_records"][0].__setitem__("turn", 2))
    missing = _mutate(lambda r: r.pop("uuid"))
    data = jsonl_bytes([records_for(1)[0], bad_turn, missing], lines=["not json"])
    errors = _rejected(data)
    assert [e.split(",")[0] for e in errors] == ["line 2", "line 3", "line 4"]


def test_error_late_in_file_rolls_back_earlier_batches():
    # More than one write batch of good lines before the bad one: all must be rolled back.
    good = records_for(230)
    data = jsonl_bytes([*good, _mutate(lambda r: r.pop("turn_records"))])
    with pytest.raises(CorpusImportError):
        _import(data)
    assert _row_counts() == (0, 0, 0, 0, 0, 0)


def test_empty_file_is_an_error():
    assert _rejected(b"\n\n") == ["line 1, $: the file has no dialogues"]


# --- Idempotency and preserving what users did ------------------------------------------


def test_reimport_is_idempotent_and_keeps_ids():
    data = jsonl_bytes(records_for(3))
    _import(data)
    ids = sorted(Trigger.objects.values_list("id", flat=True))
    counts = _row_counts()
    summary = _import(data)
    assert (summary.created, summary.updated, summary.unchanged) == (0, 0, 3)
    assert _row_counts() == counts
    assert sorted(Trigger.objects.values_list("id", flat=True)) == ids


def test_reimport_with_changes_updates_in_place_and_drops_removed_rows():
    record = dialogue_record()
    _import(jsonl_bytes([record]))
    recovery_id = Trigger.objects.get(type="RECOVERY").id
    changed = copy.deepcopy(record)
    changed["turn_records"] = changed["turn_records"][:8]
    changed["num_turns_completed"] = 8
    changed["trigger_points"] = changed["trigger_points"][::2]  # drop the CRITICAL trigger
    changed["turn_records"][3]["planner"]["is_trigger_point"] = False
    changed["turn_records"][3]["planner"]["evaluation_rubric"] = None
    summary = _import(jsonl_bytes([changed]))
    assert summary.updated == 1
    assert Turn.objects.count() == 8
    assert set(Trigger.objects.values_list("type", flat=True)) == {"EMERGENT", "RECOVERY"}
    assert Trigger.objects.get(type="RECOVERY").id == recovery_id


def test_reimport_keeps_an_audit_status_set_in_the_workbench():
    data = jsonl_bytes([dialogue_record()])
    _import(data)
    Dialogue.objects.update(status=DialogueStatus.ACCEPTED)
    _import(data)
    assert Dialogue.objects.get().status == DialogueStatus.ACCEPTED


def test_dry_run_checks_but_writes_nothing():
    summary = _import(jsonl_bytes(records_for(2)), dry_run=True)
    assert summary.dialogues == 2 and summary.triggers == 6
    assert _row_counts() == (0, 0, 0, 0, 0, 0)


def test_dry_run_still_reports_errors():
    data = jsonl_bytes([_mutate(lambda r: r.pop("uuid"))])
    assert _rejected(data, dry_run=True)[0].startswith("line 1, $.uuid")


def test_unknown_keys_are_kept_for_export():
    record = dialogue_record()
    record["release_note"] = {"batch": 7}
    record["turn_records"][0]["speaker_meta"] = "kept"
    record["trigger_points"][0]["weight"] = 2
    record["trigger_points"][0]["evaluation_rubric"]["principle"] = "Infer the unstated need."
    _import(jsonl_bytes([record]))
    dialogue = Dialogue.objects.get()
    assert dialogue.extra == {"release_note": {"batch": 7}}
    assert Turn.objects.get(index=1).extra == {"speaker_meta": "kept"}
    trigger = Trigger.objects.get(turn__index=1)
    assert trigger.extra == {"weight": 2}
    assert trigger.rubric_extra == {"principle": "Infer the unstated need."}


def test_release_scenario_ids_shared_by_two_personas_stay_apart():
    first = dialogue_record("BP_A_01_Q__style4__" + "a" * 32, persona_uuid="a" * 32)
    second = dialogue_record("BP_A_01_Q__style4__" + "b" * 32, persona_uuid="b" * 32)
    _import(jsonl_bytes([first, second]))
    assert Scenario.objects.filter(key="TEST_01").count() == 2
    assert Persona.objects.count() == 2


def test_reimport_drops_anchors_no_longer_in_the_file():
    anchors = [{"key": f"A{i}", "text": f"Fact {i}.", "turn": i} for i in (1, 2, 3)]
    record = dialogue_record(extension={"anchors": anchors, "trigger_anchors": {"4": ["A2", "A3"]}})
    _import(jsonl_bytes([record]))
    record["x_workbench"] = {"anchors": anchors[:2], "trigger_anchors": {"4": ["A1", "A2"]}}
    _import(jsonl_bytes([record]))
    assert list(Anchor.objects.values_list("key", flat=True)) == ["A1", "A2"]
    trigger = Trigger.objects.get(type="CRITICAL")
    assert sorted(trigger.anchors.values_list("key", flat=True)) == ["A1", "A2"]


@pytest.mark.parametrize("turn_text", ["²", "٤", "x"])
def test_a_trigger_anchor_turn_that_is_not_an_ascii_number_is_an_error_naming_it(turn_text):
    # str.isdigit() accepts '²' and int() then raised ValueError: a traceback, not an error.
    anchors = [{"key": "A1", "text": "Fact 1.", "turn": 1}]
    record = dialogue_record(extension={"anchors": anchors, "trigger_anchors": {turn_text: ["A1"]}})
    message = _rejected(jsonl_bytes([record]))[0]
    assert f"trigger_anchors.{turn_text}" in message and "no trigger at turn" in message
