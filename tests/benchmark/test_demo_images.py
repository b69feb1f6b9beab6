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
        assert recording["image_sha256"] == [first_turn[key]]
        assert recording["model"] in make_images.MODELS
