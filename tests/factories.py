"""Builders for test data in the release format (written for the tests, not copied)."""

import copy
import io
import json
from pathlib import Path

DEFAULT_TRIGGERS = ((1, "EMERGENT"), (4, "CRITICAL"), (8, "RECOVERY"))


def rubric(kind: str, subject: str = "the team offsite") -> dict:
    return {
        "type": kind,
        "pass_criteria": f"Connects the facts about {subject} into a concrete, unasked-for step.",
        "partial_criteria": f"Notices the implication for {subject} but stays vague.",
        "fail_criteria": "Answers only the literal request, or closes with boilerplate.",
    }


def dialogue_record(
    uid: str = "BP_TEST_01_Q__style4__0123456789abcdef0123456789abcdef",
    *,
    n_turns: int = 9,
    triggers=DEFAULT_TRIGGERS,
    style: int = 4,
    category: str = "professional_persona",
    persona_uuid: str = "0123456789abcdef0123456789abcdef",
    blueprint_id: str = "BP_TEST_01_Q",
    scenario_id: str = "TEST_01",
    extension: dict | None = None,
) -> dict:
    trigger_by_turn = dict(triggers)
    turn_records = []
    previous = 0
    for turn in range(1, n_turns + 1):
        kind = trigger_by_turn.get(turn)
        turn_records.append(
            {
                "turn": turn,
                "planner": {
                    "state_audit": {
                        "current_turn": turn,
                        "previous_trigger_count": previous,
                        "is_max_reached": False,
                    },
                    "is_trigger_point": kind is not None,
                    "stop_conversation": turn == n_turns,
                    "evaluation_rubric": rubric(kind) if kind else None,
                    "tactical_order": {
                        "intent": f"Move the planning forward (turn {turn}).",
                        "content_payload": [f"Fact number {turn} about the offsite."],
                        "behavioral_directive": "Stay casual; one new fact at most.",
                    },
                },
                "user_message": f'Turn {turn} ({scenario_id}): offsite for 12, café "Zoë" ☕',
                "assistant_response": f"Reply {turn}: here is a plan.\n\n- step one\n- step two",
            }
        )
        previous += kind is not None
    record = {
        "blueprint_id": blueprint_id,
        "scenario_id": scenario_id,
        "unique_id_eval": uid,
        "uuid": persona_uuid,
        "category_key": category,
        "style_combination_index": style,
        "evaluated_model": "test-curator",
        "num_turns_completed": n_turns,
        "trigger_points": [
            {"turn": turn, "evaluation_rubric": rubric(kind)} for turn, kind in triggers
        ],
        "turn_records": turn_records,
        "token_usage": {
            "planner": {"prompt_tokens": 100, "completion_tokens": 10, "calls": n_turns},
            "user_agent": {"prompt_tokens": 50, "completion_tokens": 5, "calls": n_turns},
            "assistant": {"prompt_tokens": 0, "completion_tokens": 0, "calls": 0},
        },
    }
    if extension is not None:
        record["x_workbench"] = copy.deepcopy(extension)
    return record


def records_for(count: int) -> list[dict]:
    return [
        dialogue_record(
            f"BP_TEST_{i:02d}_Q__style4__{i:032x}",
            persona_uuid=f"{i:032x}",
            blueprint_id=f"BP_TEST_{i:02d}_Q",
            scenario_id=f"TEST_{i:02d}",
        )
        for i in range(1, count + 1)
    ]


def jsonl_bytes(records, *, lines: list[str] | None = None) -> bytes:
    text = "".join(json.dumps(r) + "\n" for r in records)
    if lines:
        text += "".join(line + "\n" for line in lines)
    return text.encode("utf-8")


def stream(data: bytes) -> io.BytesIO:
    return io.BytesIO(data)


def write_jsonl(path: Path, records) -> Path:
    path.write_bytes(jsonl_bytes(records))
    return path
