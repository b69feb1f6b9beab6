"""The engine's seam for multimodal turns: a reply request's user messages carry their turns'
images (the corpus's bytes, hash and alt text), earlier turns' too, later turns' never; the
batch reads them once per dialogue."""

import pytest

from benchmark.evaluation.engine import _Batch
from benchmark.evaluation.requests import reply_request, turn_image_parts
from benchmark.models import Turn
from tests.annotation.conftest import build_run
from tests.images import image_bytes, stored_turn_image

pytestmark = pytest.mark.django_db


def test_a_reply_request_sends_each_user_turn_with_its_images():
    run = build_run(dialogues=1)
    unit = run.units.select_related("trigger__turn__dialogue", "endpoint").get(
        trigger__turn__index=4, condition="vanilla", endpoint=run.endpoints.first()
    )
    turns = list(Turn.objects.filter(dialogue=unit.trigger.turn.dialogue).order_by("index"))
    first, second, later = image_bytes(), image_bytes("JPEG"), image_bytes()
    stored_turn_image(turns[0], first, alt="the box")
    stored_turn_image(turns[3], second, position=0, alt="the mug")
    stored_turn_image(turns[4], later)  # after the trigger: never sent
    images = turn_image_parts([unit.trigger.turn.dialogue_id])[unit.trigger.turn.dialogue_id]
    request = reply_request(unit, turns, images)
    users = [m for m in request.messages if m.role == "user"]
    assert len(users) == 4
    assert [len(m.images) for m in users] == [1, 0, 0, 1]
    sent = users[0].images[0]
    assert (sent.data, sent.media_type, sent.alt) == (first, "image/png", "the box")
    assert users[3].images[0].data == second and users[3].images[0].media_type == "image/jpeg"
    assert later not in [p.data for m in request.messages for p in m.images]


def test_the_batch_reads_the_images_of_its_units_dialogues_once():
    run = build_run(dialogues=2)
    units = list(run.units.select_related("trigger__turn", "endpoint", "run"))
    dialogue_id = units[0].trigger.turn.dialogue_id
    turn = Turn.objects.get(dialogue_id=dialogue_id, index=1)
    data = image_bytes()
    stored_turn_image(turn, data)
    batch = _Batch(units, token="t")
    for job in batch.jobs:
        if job.unit.trigger.turn.dialogue_id == dialogue_id:
            assert [p.data for p in job.images[1]] == [data]
        else:
            assert job.images == {}
