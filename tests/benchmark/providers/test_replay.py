"""The replay provider over the demo recordings."""

import json

import pytest
from django.conf import settings

from benchmark.providers.base import ChatMessage, ChatRequest, ProviderError, ReplayKey
from benchmark.providers.replay import ReplayProvider, ReplayStore, estimate_tokens

DEMO_DIR = settings.BASE_DIR / "benchmark" / "demo_data"


def _first_row(name: str, **match) -> dict:
    with (DEMO_DIR / name).open(encoding="utf-8") as stream:
        for line in stream:
            row = json.loads(line)
            if all(row[key] == value for key, value in match.items()):
                return row
    raise LookupError(match)


def _request(key: ReplayKey | None, text: str = "What should the agenda look like?") -> ChatRequest:
    return ChatRequest(model="ignored", messages=(ChatMessage("user", text),), replay_key=key)


@pytest.fixture
def provider() -> ReplayProvider:
    return ReplayProvider(ReplayStore.from_demo_data())


def test_a_reply_is_replayed_verbatim(provider):
    row = _first_row("replies.jsonl")
    key = ReplayKey("reply", row["unique_id_eval"], row["turn"], row["model"], row["condition"])

    result = provider.complete(
        _request(key, text="one two three four five six seven eight nine ten")
    )

    assert result.text == row["reply"]
    assert result.output_tokens == round(len(row["reply"].split()) * 1.3)
    assert result.input_tokens == 13  # ten words × 1.3
    assert result.attempts == 1 and result.request_id.startswith("replay-")


def test_a_judgment_is_replayed_as_the_json_a_judge_would_send(provider):
    row = _first_row("judgments.jsonl", judge="demo-judge-crossfamily")
    key = ReplayKey(
        "judgment",
        row["unique_id_eval"],
        row["turn"],
        row["model"],
        row["condition"],
        judge="demo-judge-crossfamily",
    )

    result = provider.complete(_request(key))

    assert json.loads(result.text) == {
        "verdict": row["verdict"],
        "rationale": row["rationale"],
        "evidence": row["evidence"],
    }


def test_each_judge_has_its_own_recording(provider):
    row = _first_row("judgments.jsonl")
    base = (row["unique_id_eval"], row["turn"], row["model"], row["condition"])
    texts = {
        judge: provider.complete(_request(ReplayKey("judgment", *base, judge=judge))).text
        for judge in ("demo-judge-primary", "demo-judge-crossfamily")
    }

    assert texts["demo-judge-primary"] != texts["demo-judge-crossfamily"]


def test_nothing_recorded_is_a_non_retryable_error_naming_the_key(provider):
    key = ReplayKey("reply", "NO_SUCH_DIALOGUE", 3, "demo-atlas-large", "vanilla")

    with pytest.raises(ProviderError) as caught:
        provider.complete(_request(key))

    assert not caught.value.retryable
    message = str(caught.value)
    assert "NO_SUCH_DIALOGUE" in message and "turn=3" in message and "demo-atlas-large" in message


def test_an_unknown_judge_is_named_in_the_error(provider):
    row = _first_row("judgments.jsonl")
    key = ReplayKey(
        "judgment", row["unique_id_eval"], row["turn"], row["model"], row["condition"], "nobody"
    )

    with pytest.raises(ProviderError, match="judge=nobody"):
        provider.complete(_request(key))


def test_a_request_without_a_replay_key_is_refused(provider):
    with pytest.raises(ProviderError, match="replay_key") as caught:
        provider.complete(_request(None))

    assert not caught.value.retryable


def test_demo_recordings_are_loaded_once_per_process():
    assert ReplayStore.from_demo_data() is ReplayStore.from_demo_data()


def test_a_key_recorded_twice_is_refused(tmp_path):
    reply = {"unique_id_eval": "D1", "turn": 1, "model": "m", "condition": "vanilla", "reply": "a"}
    (tmp_path / "replies.jsonl").write_text(json.dumps(reply) + "\n" + json.dumps(reply) + "\n")
    (tmp_path / "judgments.jsonl").write_text("")

    with pytest.raises(ValueError, match="recorded twice"):
        ReplayStore.from_jsonl(tmp_path / "replies.jsonl", tmp_path / "judgments.jsonl")


def test_token_estimate_is_words_times_one_point_three():
    assert estimate_tokens("") == 0
    assert estimate_tokens("one two three") == 4  # 3.9 rounds to 4
    assert estimate_tokens("a  b\nc\td e f g h i j") == 13
