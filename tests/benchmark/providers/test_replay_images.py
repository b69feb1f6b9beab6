"""The replay provider keys recordings by the request's images: the same text with another image
is another recording, and a text-only recording is what it always was."""

import hashlib
import json

import pytest

from benchmark.providers.base import ChatMessage, ChatRequest, ProviderError, ReplayKey
from benchmark.providers.replay import ReplayProvider, ReplayStore
from tests.benchmark.providers.images import image_part

OCCLUDED = image_part(color="navy")
CLEAR = image_part(color="orange")
QUESTION = "What is in the picture?"


def _store(tmp_path, replies: list[dict], judgments: list[dict] = ()) -> ReplayStore:
    (tmp_path / "replies.jsonl").write_text("".join(json.dumps(r) + "\n" for r in replies))
    (tmp_path / "judgments.jsonl").write_text("".join(json.dumps(j) + "\n" for j in judgments))
    return ReplayStore.from_jsonl(tmp_path / "replies.jsonl", tmp_path / "judgments.jsonl")


def _reply(text: str, *images) -> dict:
    row = {"unique_id_eval": "D1", "turn": 2, "model": "m", "condition": "vanilla", "reply": text}
    if images:
        row["images"] = [image.sha256 for image in images]
    return row


def _request(*images, key: ReplayKey | None = None) -> ChatRequest:
    messages = (
        ChatMessage("user", "Hello"),
        ChatMessage("assistant", "Hi."),
        ChatMessage("user", QUESTION, images=tuple(images)),
    )
    return ChatRequest(
        model="m", messages=messages, replay_key=key or ReplayKey("reply", "D1", 2, "m", "vanilla")
    )


@pytest.fixture
def provider(tmp_path) -> ReplayProvider:
    return ReplayProvider(
        _store(
            tmp_path,
            [
                _reply("Could you move your hand out of the way?", OCCLUDED),
                _reply("It is an orange box.", CLEAR),
                _reply("Please send me the picture."),
                _reply("Two images, in this order.", OCCLUDED, CLEAR),
            ],
        )
    )


def test_the_same_text_with_a_different_image_replays_a_different_recording(provider):
    assert provider.complete(_request(OCCLUDED)).text == "Could you move your hand out of the way?"
    assert provider.complete(_request(CLEAR)).text == "It is an orange box."


def test_a_text_only_request_replays_the_recording_without_images(provider):
    assert provider.complete(_request()).text == "Please send me the picture."


def test_the_images_order_is_part_of_the_key(provider):
    assert provider.complete(_request(OCCLUDED, CLEAR)).text == "Two images, in this order."
    with pytest.raises(ProviderError, match="recorded only for other images"):
        provider.complete(_request(CLEAR, OCCLUDED))


def test_an_unrecorded_image_is_a_clear_non_retryable_error(provider):
    other = image_part(color="green")

    with pytest.raises(ProviderError) as raised:
        provider.complete(_request(other))

    message = str(raised.value)
    assert not raised.value.retryable
    assert "nothing recorded for reply unique_id_eval=D1 turn=2" in message
    assert f"with images {other.sha256[:12]}" in message
    assert "(recorded only for other images)" in message


def test_a_key_with_no_recording_at_all_does_not_blame_the_images(provider):
    with pytest.raises(ProviderError) as raised:
        provider.complete(_request(OCCLUDED, key=ReplayKey("reply", "D9", 1, "m", "vanilla")))

    assert "recorded only for other images" not in str(raised.value)


def test_judgments_are_keyed_by_images_too(tmp_path):
    judgment = {
        "unique_id_eval": "D1",
        "turn": 2,
        "model": "m",
        "condition": "vanilla",
        "judge": "j",
        "verdict": "PASS",
        "rationale": "Asks to remove the occluder.",
        "evidence": "move your hand",
        "images": [OCCLUDED.sha256],
    }
    provider = ReplayProvider(_store(tmp_path, [], [judgment]))
    key = ReplayKey("judgment", "D1", 2, "m", "vanilla", judge="j")

    assert json.loads(provider.complete(_request(OCCLUDED, key=key)).text)["verdict"] == "PASS"
    with pytest.raises(ProviderError):
        provider.complete(_request(key=key))


def test_the_same_key_with_other_images_is_not_recorded_twice(tmp_path):
    _store(tmp_path, [_reply("a", OCCLUDED), _reply("b", CLEAR), _reply("c")])
    with pytest.raises(ValueError, match="recorded twice"):
        _store(tmp_path, [_reply("a", OCCLUDED), _reply("b", OCCLUDED)])


@pytest.mark.parametrize("images", ["abc", ["ABC"], [OCCLUDED.sha256.upper()], [1]])
def test_a_recording_whose_images_are_not_sha256_digests_is_refused(tmp_path, images):
    row = {**_reply("a"), "images": images}

    with pytest.raises(ValueError, match="images must be a list of lower-case hex sha256"):
        _store(tmp_path, [row])


def test_replayed_request_ids_differ_by_image_and_stay_as_they_were_without(provider):
    with_occluded = provider.complete(_request(OCCLUDED)).request_id
    with_clear = provider.complete(_request(CLEAR)).request_id
    text_only = provider.complete(_request()).request_id

    assert len({with_occluded, with_clear, text_only}) == 3
    key = ReplayKey("reply", "D1", 2, "m", "vanilla")
    assert text_only == "replay-" + hashlib.sha256(repr(key).encode()).hexdigest()[:16]
