"""Judges see the turn images (multimodal turns, issue #18): an INTERVENTION verdict rests on
what the photo shows, so a judge's, a pairwise judge's and the failure-mode classifier's
request carry the conversation's images as the reply request does (attached to the prompt, and
numbered in its transcript), over the real OpenAI-compatible wire format against the fake vendor
server; a text-only request is byte for byte what it was before, so recorded replays and the
response cache still find it."""

import base64
import hashlib
import json

import pytest

from benchmark.corpus.images import FolderSource
from benchmark.corpus.importer import corpus_import
from benchmark.demo_data import make_images
from benchmark.evaluation import runs
from benchmark.evaluation.requests import (
    OtherReply,
    classify_request,
    judge_request,
    pairwise_request,
    turn_image_parts,
)
from benchmark.models import Dialogue, ModelEndpoint, RunStatus, Turn, TurnImage
from proactweb.celery import app as celery_app
from tests.annotation.conftest import build_run
from tests.factories import dialogue_record, jsonl_bytes, stream
from tests.fakes.vendor_server import FakeVendorServer
from tests.images import image_bytes, stored_turn_image

pytestmark = pytest.mark.django_db

REPLY = "I can't see the label: could you move the box and send the photo again?"
MARK = "[image 1, attached]"


@pytest.fixture(autouse=True)
def eager_celery():
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


def _digest(request) -> str:
    blob = json.dumps(request.payload(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def test_text_only_judge_requests_are_what_they_were_before_judges_saw_images():
    """The digests of the payloads (what the response cache keys on) were computed with the
    requests module of 37b5a09, the last commit before judges saw images, on this data."""
    run = build_run(dialogues=1)
    units = run.units.select_related("trigger__turn__dialogue", "endpoint").order_by("pk")
    unit, other = units.filter(trigger__turn__index=4)[:2]
    turns = list(Turn.objects.filter(dialogue=unit.trigger.turn.dialogue).order_by("index"))
    judge = run.judges.order_by("name").first()
    side_b = OtherReply(other.reply, other.endpoint.model_name, other.condition)
    for images in (None, {}):  # {}: what the engine passes for a dialogue without images
        requests = {
            "judge": judge_request(unit, turns, judge, images=images),
            "judge_again": judge_request(
                unit, turns, judge, images=images, rejected=(("x", "not JSON"),)
            ),
            "classify": classify_request(unit, turns, judge, images=images),
            "pairwise": pairwise_request(
                unit, turns, judge, other=side_b, a_shown_first=False, images=images
            ),
        }
        assert {name: _digest(request) for name, request in requests.items()} == {
            "judge": "229736894bad92322beff7f0e38cd008f513ce115c40f9223829ebcc89de7c63",
            "judge_again": "460eb9658f60392f419f8f8950de811d192039ee2eccb4918221e3042853c78a",
            "classify": "39ca6f2eb9543e0b4845145b0085b8e138fab6f5598100b7079fbd8e83fbbe34",
            "pairwise": "6f024484247d48013f644b73505a9647852cb51e3957258992b856f9bb6fef10",
        }
        for request in requests.values():
            assert not any(message.images for message in request.messages)
            assert "[image " not in request.messages[0].content


def test_every_judges_request_carries_the_conversations_images_numbered_in_order():
    run = build_run(dialogues=1)
    unit = run.units.select_related("trigger__turn__dialogue", "endpoint").filter(
        trigger__turn__index=4
    )[0]
    turns = list(Turn.objects.filter(dialogue=unit.trigger.turn.dialogue).order_by("index"))
    first, second, later = image_bytes(), image_bytes("JPEG"), image_bytes()
    stored_turn_image(turns[0], first)
    stored_turn_image(turns[3], second)
    stored_turn_image(turns[5], later)  # after the trigger: never sent
    images = turn_image_parts([unit.trigger.turn.dialogue_id])[unit.trigger.turn.dialogue_id]
    judge = run.judges.first()
    side_b = OtherReply("the other reply", "m", "vanilla")
    for request in (
        judge_request(unit, turns, judge, images=images, rejected=(("x", "not JSON"),)),
        classify_request(unit, turns, judge, images=images),
        pairwise_request(unit, turns, judge, other=side_b, a_shown_first=True, images=images),
    ):
        prompt, *again = request.messages
        assert [image.data for image in prompt.images] == [first, second]
        assert not any(message.images for message in again)  # asked again: not sent twice
        text = prompt.content
        assert f"{turns[0].user_message}\n{MARK}" in text
        assert f"{turns[3].user_message}\n[image 2, attached]" in text
        assert "[image 3" not in text


def _endpoint(name: str, server) -> ModelEndpoint:
    return ModelEndpoint.objects.create(
        name=name,
        display_name=name.title(),
        provider="openai-compatible",
        model_name=name,
        base_url=server.openai_base_url,
        default_params={"temperature": 0.0},
    )


def _vendor(body) -> str:
    if body["model"] == "vision-judge":
        return json.dumps({"verdict": "PASS", "rationale": "Names the fix.", "evidence": REPLY})
    return REPLY


def test_the_judge_gets_the_photo_over_the_wire_and_a_text_only_judge_request_is_text():
    """The multimodal demo's occluded-photo dialogue and a text dialogue, one run through the
    engine: each judge request about the photo sends it as the reply request did (a data URL
    after the prompt's text); the text dialogue's judge requests are plain text."""
    demo = make_images.HERE
    with (demo / "image_dialogues.jsonl").open("rb") as lines:
        corpus_import(stream=lines, images=FolderSource(demo))
    corpus_import(stream=stream(jsonl_bytes([dialogue_record()])))
    photo = TurnImage.objects.get(
        turn__index=1, turn__dialogue__scenario__key="DEMO_IMAGE_OCCLUDED"
    )
    with FakeVendorServer(reply=_vendor) as server:
        run = runs.run_create(
            name="vision",
            endpoints=[_endpoint("vision-model", server)],
            judges=[_endpoint("vision-judge", server)],
            dialogues=Dialogue.objects.exclude(scenario__key="DEMO_IMAGE_LOWRES"),
        )
        runs.run_launch(run_id=run.pk)
        logged = [entry.body for entry in server.requests()]
    run.refresh_from_db()
    assert run.status == RunStatus.DONE
    with photo.file.open("rb") as stream_:
        expected_url = "data:image/png;base64," + base64.b64encode(stream_.read()).decode()

    def sent_images(body) -> list[str]:
        content = body["messages"][-1 if body["model"] == "vision-model" else 0]["content"]
        if isinstance(content, str):
            return []
        return [part["image_url"]["url"] for part in content if part["type"] == "image_url"]

    replies = [body for body in logged if body["model"] == "vision-model"]
    judged = [body for body in logged if body["model"] == "vision-judge"]
    conditions = len(run.conditions)
    assert len(judged) == len(replies) == run.units.count() == (1 + 3) * conditions
    about_photo = [body for body in judged if sent_images(body)]
    text_only = [body for body in judged if not sent_images(body)]
    # The photo's one trigger; the text dialogue's three.
    assert len(about_photo) == conditions and len(text_only) == 3 * conditions
    for body in about_photo:
        assert sent_images(body) == [expected_url]
        text, image = body["messages"][0]["content"]
        assert text["type"] == "text" and MARK in text["text"] and "INTERVENTION" in text["text"]
        assert image == {"type": "image_url", "image_url": {"url": expected_url}}
    # The reply request about the photo sent the same bytes.
    assert {url for body in replies for url in sent_images(body)} == {expected_url}
    for body in text_only:
        assert isinstance(body["messages"][0]["content"], str)
        assert "[image " not in body["messages"][0]["content"]
