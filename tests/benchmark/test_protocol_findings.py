import io

import pytest
from django.core.management import call_command

from benchmark.corpus.importer import CorpusImportError, corpus_import
from benchmark.models import Dialogue
from tests.factories import dialogue_record, jsonl_bytes, stream

pytestmark = pytest.mark.django_db

CLEAN_ANCHORS = {
    "anchors": [
        {"key": "A1", "text": "The venue has no projector.", "turn": 1},
        {"key": "A2", "text": "Two attendees use wheelchairs.", "turn": 2},
        {"key": "A3", "text": "The budget is fixed at 900 euros.", "turn": 3},
        {"key": "A4", "text": "The train back leaves at 17:10.", "turn": 6},
    ],
    "trigger_anchors": {"1": ["A1"], "4": ["A2", "A3"], "8": ["A4"]},
}


def _findings(record, **kwargs) -> list[dict]:
    corpus_import(stream=stream(jsonl_bytes([record])), **kwargs)
    return Dialogue.objects.get(unique_id_eval=record["unique_id_eval"]).findings


def _codes(record) -> list[str]:
    return [f["code"] for f in _findings(record)]


def test_clean_dialogue_with_known_anchors_has_no_findings():
    assert _findings(dialogue_record(extension=CLEAN_ANCHORS)) == []


def test_trigger_outside_its_phase_window_is_a_finding_not_an_error():
    record = dialogue_record(triggers=((1, "EMERGENT"), (3, "CRITICAL"), (8, "RECOVERY")))
    findings = _findings(record)
    assert findings == [
        {
            "code": "trigger_outside_window",
            "turn": 3,
            "path": "$.trigger_points[1].turn",
            "message": "CRITICAL trigger at turn 3, outside its window 4–7",
        }
    ]


def test_recovery_before_turn_8_is_flagged():
    record = dialogue_record(
        n_turns=7, triggers=((2, "EMERGENT"), (5, "CRITICAL"), (7, "RECOVERY"))
    )
    assert _codes(record) == ["trigger_outside_window"]


def test_two_anchors_in_one_turn_breaks_anchor_drip():
    extension = {
        **CLEAN_ANCHORS,
        "anchors": [*CLEAN_ANCHORS["anchors"], {"key": "A5", "text": "Lunch is vegan.", "turn": 2}],
    }
    findings = _findings(dialogue_record(extension=extension))
    assert [(f["code"], f["turn"]) for f in findings] == [("anchor_drip", 2)]
    assert "A2, A5" in findings[0]["message"]


def test_critical_trigger_with_fewer_than_two_earlier_anchors():
    extension = {
        "anchors": [
            {"key": "A1", "text": "The venue has no projector.", "turn": 1},
            {"key": "A2", "text": "The train back leaves at 17:10.", "turn": 5},
        ],
        "trigger_anchors": {"4": ["A1"]},
    }
    findings = _findings(dialogue_record(extension=extension))
    assert [(f["code"], f["turn"]) for f in findings] == [("critical_without_two_anchors", 4)]


def test_anchor_rules_are_not_checked_when_anchors_are_unknown():
    assert _findings(dialogue_record()) == []


def test_planner_disagreeing_with_trigger_points():
    record = dialogue_record()
    record["turn_records"][5]["planner"]["is_trigger_point"] = True
    assert _codes(record) == ["planner_trigger_mismatch"]


def test_num_turns_completed_mismatch():
    record = dialogue_record()
    record["num_turns_completed"] = 10
    assert _codes(record) == ["turn_count_mismatch"]


def test_blueprint_suffix_naming_other_traits_than_the_style():
    record = dialogue_record(blueprint_id="BP_TEST_01_EVA")  # style 4 is Q
    assert _codes(record) == ["style_code_mismatch"]


@pytest.mark.parametrize(
    ("blueprint_id", "style"),
    # The first five dialogues of the release's final_dialogues.jsonl: its own labels fit.
    [
        ("BP_P_01_EVA", 21),
        ("BP_P_01_Q", 4),
        ("BP_P_01_NONE", 1),
        ("BP_P_01_VQ", 9),
        ("BP_P_01_VAE", 8),
    ],
)
def test_the_releases_own_labels_are_no_finding(blueprint_id, style):
    uid = f"{blueprint_id}__style{style}__" + "0" * 32
    record = dialogue_record(uid, style=style, blueprint_id=blueprint_id, persona_uuid="0" * 32)
    assert "style_code_mismatch" not in _codes(record)


def test_findings_are_counted_in_the_summary():
    records = [
        dialogue_record(triggers=((1, "EMERGENT"), (3, "CRITICAL"), (8, "RECOVERY"))),
        dialogue_record("BP_TEST_01_Q__style4__" + "f" * 32, persona_uuid="f" * 32),
    ]
    summary = corpus_import(stream=stream(jsonl_bytes(records)))
    assert summary.findings_by_code == {"trigger_outside_window": 1}
    assert summary.dialogues_with_findings == 1


def test_strict_turns_findings_into_errors_and_writes_nothing():
    record = dialogue_record(triggers=((1, "EMERGENT"), (3, "CRITICAL"), (8, "RECOVERY")))
    with pytest.raises(CorpusImportError) as caught:
        corpus_import(stream=stream(jsonl_bytes([record])), strict=True)
    assert [str(e) for e in caught.value.errors] == [
        "line 1, $.trigger_points[1].turn: trigger_outside_window: "
        "CRITICAL trigger at turn 3, outside its window 4–7"
    ]
    assert Dialogue.objects.count() == 0


def _with_user_message(words: int, *, turn: int = 3, style: int = 4) -> dict:
    record = dialogue_record(style=style)
    record["turn_records"][turn - 1]["user_message"] = " ".join(["word"] * words)
    return record


@pytest.mark.parametrize(("words", "flagged"), [(4, True), (5, False), (25, False), (26, True)])
def test_user_message_length_against_a_terse_styles_bounds(words, flagged):
    # Style 4 (Q) is terse: 5–25 words per user message, both bounds inside.
    findings = _findings(_with_user_message(words))
    assert bool(findings) == flagged
    if flagged:
        assert findings == [
            {
                "code": "user_turn_length_outside_style",
                "turn": 3,
                "path": "$.turn_records[2].user_message",
                "message": f"turn 3: the user message has {words} words; style 4 (Q) allows 5–25",
            }
        ]


def test_an_expressive_style_has_its_own_bounds():
    # Style 21 (the release's "EVA") is expressive, so chatty: 40–100 words; 30 would do for a
    # terse style, not for it.
    uid = "BP_TEST_01_EVA__style21__" + "0" * 32
    record = dialogue_record(uid, style=21, blueprint_id="BP_TEST_01_EVA")
    for turn_record in record["turn_records"]:
        turn_record["user_message"] = " ".join(["word"] * 60)
    record["turn_records"][0]["user_message"] = " ".join(["word"] * 30)
    assert [(f["code"], f["turn"]) for f in _findings(record)] == [
        ("user_turn_length_outside_style", 1)
    ]


def test_a_length_finding_is_reported_by_a_dry_run_and_fails_a_strict_import(tmp_path):
    record = _with_user_message(40)
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(jsonl_bytes([record]))
    out = io.StringIO()
    call_command("import_corpus", str(path), "--dry-run", stdout=out)
    assert "user_turn_length_outside_style" in out.getvalue()
    assert not Dialogue.objects.exists()
    with pytest.raises(CorpusImportError) as caught:
        corpus_import(stream=stream(jsonl_bytes([record])), strict=True)
    assert [str(e) for e in caught.value.errors] == [
        "line 1, $.turn_records[2].user_message: user_turn_length_outside_style: "
        "turn 3: the user message has 40 words; style 4 (Q) allows 5–25"
    ]
    assert not Dialogue.objects.exists()
