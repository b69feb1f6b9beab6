"""The multimodal demo: its images are what make_images.py draws (byte for byte), its
dialogues import with them, and every recording names the images its conversation carries."""

import json

import pytest

from benchmark.corpus.images import FolderSource
from benchmark.corpus.importer import corpus_import
from benchmark.demo_data import make_images
from benchmark.models import TurnImage
from tests.benchmark.curation.test_offline_curation import eager_celery  # noqa: F401

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


@pytest.mark.usefixtures("eager_celery")
def test_a_run_on_the_demo_image_dialogues_replays_and_is_judged_offline(monkeypatch):
    """What an admin gets after `make run` launching a run on the multimodal demo: every reply
    and both demo judges' verdicts come from the demo's recordings, the evidence found
    verbatim, and the verdicts follow the rubric (atlas names the fix, cedar asks vaguely,
    birch answers from what it cannot see)."""
    from benchmark.evaluation import engine, runs
    from benchmark.models import Dialogue, EvaluationUnit, Judgment, ModelEndpoint, TriggerType

    monkeypatch.setattr(engine, "_providers", {})  # no provider cached under a reused id
    with (DEMO / "image_dialogues.jsonl").open("rb") as stream:
        corpus_import(stream=stream, images=FolderSource(DEMO))

    def endpoint(name):
        return ModelEndpoint.objects.create(
            name=name, display_name=name, provider="replay", model_name=name
        )

    run = runs.run_create(
        name="multimodal demo",
        endpoints=[endpoint(name) for name in make_images.MODELS],
        judges=[endpoint(name) for name in make_images.JUDGES],
        dialogues=Dialogue.objects.all(),
    )
    runs.run_launch(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "done"
    units = EvaluationUnit.objects.filter(run=run)
    assert units.count() == 2 * len(make_images.MODELS) * len(run.conditions)
    assert set(units.values_list("state", flat=True)) == {"done"}
    assert set(units.values_list("trigger__type", flat=True)) == {TriggerType.INTERVENTION}
    judgments = Judgment.objects.filter(unit__run=run)
    assert judgments.count() == units.count() * len(make_images.JUDGES)
    assert set(judgments.values_list("evidence_status", flat=True)) == {"exact"}
    verdicts = set(judgments.values_list("unit__endpoint__name", "verdict"))
    assert verdicts == {
        ("demo-atlas-large", "PASS"),
        ("demo-cedar-small", "PARTIAL"),
        ("demo-birch-medium", "FAIL"),
    }


def test_the_committed_recordings_are_what_the_script_writes(tmp_path, monkeypatch):
    monkeypatch.setattr(make_images, "HERE", tmp_path)
    make_images.main()
    for name in ("image_dialogues.jsonl", "image_replies.jsonl", "image_judgments.jsonl"):
        assert (tmp_path / name).read_bytes() == (DEMO / name).read_bytes(), name
