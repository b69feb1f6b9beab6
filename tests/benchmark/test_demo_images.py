"""The multimodal demo: its images are what make_images.py draws (byte for byte), its
dialogues import with them, and every recording names the images its conversation carries."""

import json

import pytest

from benchmark.corpus.images import FolderSource
from benchmark.corpus.importer import corpus_import
from benchmark.demo_data import make_images
from benchmark.models import TurnImage

pytestmark = pytest.mark.django_db
DEMO = make_images.HERE


def test_the_committed_images_are_what_the_script_draws():
    for name, draw in make_images.IMAGES.items():
        assert (DEMO / "images" / f"{name}.png").read_bytes() == make_images._png(draw()), name


def test_the_demo_image_dialogues_import_and_the_recordings_name_their_images():
    with (DEMO / "image_dialogues.jsonl").open("rb") as stream:
        summary = corpus_import(stream=stream, images=FolderSource(DEMO))
    assert summary.images == 4 and not summary.findings_by_code
    first_turn = {
        (image.turn.dialogue.unique_id_eval, image.turn.index): image.sha256
        for image in TurnImage.objects.select_related("turn__dialogue")
    }
    recordings = [
        json.loads(line) for line in (DEMO / "image_replies.jsonl").read_text().splitlines()
    ]
    assert len(recordings) == 2 * len(make_images.MODELS) * len(make_images.CONDITIONS)
    for recording in recordings:
        key = (recording["unique_id_eval"], recording["turn"])
        assert recording["images"] == [first_turn[key]]
        assert recording["model"] in make_images.MODELS


def test_the_replay_provider_answers_the_demo_conversations_with_their_images(tmp_path):
    """The engine's request (the conversation with its stored images) finds its recording."""
    from benchmark.evaluation.requests import conversation_until, turn_image_parts
    from benchmark.models import Trigger, Turn
    from benchmark.providers.base import ReplayKey
    from benchmark.providers.images import request_images
    from benchmark.providers.replay import ReplayStore

    with (DEMO / "image_dialogues.jsonl").open("rb") as stream:
        corpus_import(stream=stream, images=FolderSource(DEMO))
    empty = tmp_path / "none.jsonl"
    empty.write_text("")
    store = ReplayStore.from_jsonl(DEMO / "image_replies.jsonl", empty)
    for trigger in Trigger.objects.select_related("turn__dialogue"):
        dialogue = trigger.turn.dialogue
        turns = list(Turn.objects.filter(dialogue=dialogue).order_by("index"))
        images = turn_image_parts([dialogue.pk])[dialogue.pk]
        messages = conversation_until(trigger, turns, images)
        digests = tuple(image.sha256 for image in request_images(messages))
        assert len(digests) == 1
        for model in make_images.MODELS:
            key = ReplayKey("reply", dialogue.unique_id_eval, trigger.turn.index, model, "vanilla")
            assert store.lookup(key, digests), (dialogue.unique_id_eval, model)
            assert store.lookup(key, ("0" * 64,)) is None
