"""A scenario's images in the database (``ScenarioTurnImage``) reach curation: the Planner is told
their descriptions, the cold-start Assistant is sent each image with its turn's user message (the
real OpenAI provider against the fake vendor server), the curated dialogue's turn carries the same
stored file, and an insufficient image lets the Planner schedule an INTERVENTION trigger. The
Scenario admin's inline stores an uploaded image and refuses a file that is not one."""

import base64
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from benchmark.corpus.images import ImageStore, store_part
from benchmark.curation.agent_views import ScenarioCard, ScenarioImage
from benchmark.curation.rubrics import intervention_rubric
from benchmark.curation.services import AgentProviders, curation_spec_for, dialogue_curate
from benchmark.models import ScenarioTurnImage, Trigger, TurnImage, turn_image_storage
from benchmark.providers.openai_chat import OpenAIChatProvider
from tests.benchmark.curation import scripted
from tests.benchmark.curation.scripted import PLANNER, ScriptedProvider
from tests.fakes.vendor_server import FakeVendorServer
from tests.images import image_bytes

pytestmark = pytest.mark.django_db

CARDS = "a photo of the 22 printed feature cards laid out on the boardroom table"
WHITEBOARD = "a photo of the workshop room's whiteboard with the seating plan"
BLUR = "the photo is so blurry that the names on the seating plan cannot be read"
RETAKE = "retake the photo closer and in focus"


@pytest.fixture(autouse=True)
def storage_dir(settings, tmp_path):
    settings.STORAGES = {
        **settings.STORAGES,
        "turn_images": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": tmp_path, "base_url": "/no-public-url/"},
        },
    }
    return tmp_path


def scenario_image(scenario, turn: int, data: bytes, **fields) -> ScenarioTurnImage:
    """A scenario image stored as the admin stores one."""
    checked = store_part(data, {}, ImageStore())
    return ScenarioTurnImage.objects.create(
        scenario=scenario,
        turn=turn,
        file=checked.name,
        sha256=checked.sha256,
        media_type=checked.media_type,
        width=checked.width,
        height=checked.height,
        byte_size=checked.byte_size,
        **fields,
    )


@pytest.fixture
def scenario():
    scenario = scripted.make_scenario()
    # Created out of turn order: the card and the dialogue follow the turns.
    scenario_image(
        scenario,
        6,
        image_bytes("JPEG"),
        description=WHITEBOARD,
        problem=BLUR,
        intervention=RETAKE,
        alt="Whiteboard",
    )
    scenario_image(scenario, 2, image_bytes(), description=CARDS, alt="Feature cards")
    return scenario


def test_from_model_carries_the_scenario_s_images_in_turn_order(scenario):
    card = ScenarioCard.from_model(scenario)

    assert card.images == (
        ScenarioImage(turn=2, description=CARDS),
        ScenarioImage(turn=6, description=WHITEBOARD, problem=BLUR, intervention=RETAKE),
    )
    assert card.intervention_turns() == [6]


def test_a_scenario_without_images_has_an_empty_card_and_no_turn_images():
    spec = curation_spec_for(scenario=scripted.make_scenario(), style=scripted.style())

    assert spec.scenario.images == ()
    assert spec.turn_images == {}


def _intervention_decision() -> str:
    rubric = intervention_rubric(problem=BLUR, intervention=RETAKE)
    return json.dumps(
        {
            "tactical_order": {
                "intent": "Share the photo of the whiteboard and ask who sits where.",
                "content_payload": ["Ask who sits next to whom on the seating plan."],
                "behavioral_directive": "Ask only about the seating.",
            },
            "disclose_anchor": None,
            "is_trigger_point": True,
            "trigger_type": "INTERVENTION",
            "evaluation_rubric": {
                "pass_criteria": rubric.pass_criteria,
                "partial_criteria": rubric.partial_criteria,
                "fail_criteria": rubric.fail_criteria,
            },
            "referenced_anchors": [],
            "stop_conversation": False,
        }
    )


def _data_url(image: ScenarioTurnImage) -> str:
    with turn_image_storage().open(image.file.name, "rb") as stream:
        data = stream.read()
    return f"data:{image.media_type};base64,{base64.b64encode(data).decode()}"


def _image_urls(message: dict) -> list[str]:
    content = message["content"]
    if isinstance(content, str):
        return []
    return [part["image_url"]["url"] for part in content if part["type"] == "image_url"]


def test_a_curated_dialogue_carries_the_scenario_s_images_and_its_intervention(scenario):
    cards, whiteboard = ScenarioTurnImage.objects.get(turn=2), ScenarioTurnImage.objects.get(turn=6)
    planner_ep, user_ep, assistant_ep = scripted.make_endpoints()
    spec = curation_spec_for(scenario=scenario, style=scripted.style())
    planner = ScriptedProvider([*PLANNER[:5], _intervention_decision(), *PLANNER[6:]], name="p")
    user_agent = ScriptedProvider(scripted.USER, name="u")

    with FakeVendorServer() as server:
        assistant = OpenAIChatProvider(
            base_url=server.openai_base_url, api_key="sk-test-scenario-images-0123"
        )
        dialogue = dialogue_curate(
            spec=spec,
            planner_endpoint=planner_ep,
            user_endpoint=user_ep,
            assistant_endpoint=assistant_ep,
            providers=AgentProviders(planner=planner, user_agent=user_agent, assistant=assistant),
        )
        sent = [entry.body["messages"] for entry in server.requests()]

    # The cold-start Assistant got each image with its turn's user message, on the wire, and
    # kept it in the history of later turns; no other message carried one.
    assert len(sent) == 8
    for turn, messages in enumerate(sent, start=1):
        users = [m for m in messages if m["role"] == "user"]
        expected = {2: [_data_url(cards)], 6: [_data_url(whiteboard)]}
        assert [_image_urls(m) for m in users] == [expected.get(n, []) for n in range(1, turn + 1)]
    assert sent[1][-1]["content"][0] == {"type": "text", "text": scripted.USER[1]}
    # The Planner and the User Agent never see an image (the Planner reads the descriptions).
    for agent in (planner, user_agent):
        assert not [m for r in agent.requests for m in r.messages if m.images]
    assert (
        f"- turn 6: {WHITEBOARD}\n  Insufficient: {BLUR}."
        in planner.requests[0].messages[0].content
    )

    # The saved turns name the very files the scenario's images name.
    stored = [
        (image.turn.index, image.position, image.file.name, image.sha256, image.alt)
        for image in TurnImage.objects.filter(turn__dialogue=dialogue).order_by("turn__index")
    ]
    assert stored == [
        (2, 0, cards.file.name, cards.sha256, "Feature cards"),
        (6, 0, whiteboard.file.name, whiteboard.sha256, "Whiteboard"),
    ]
    triggers = Trigger.objects.filter(turn__dialogue=dialogue).order_by("turn__index")
    assert [(t.turn.index, t.type) for t in triggers] == [
        (1, "EMERGENT"),
        (4, "CRITICAL"),
        (6, "INTERVENTION"),
        (8, "RECOVERY"),
    ]
    assert dialogue.findings == []


def test_images_of_turns_the_dialogue_never_reached_are_left_out(scenario):
    scenario_image(scenario, 9, image_bytes(), description="a late photo")
    planner_ep, user_ep, assistant_ep = scripted.make_endpoints()
    spec = curation_spec_for(scenario=scenario, style=scripted.style())

    dialogue = dialogue_curate(
        spec=spec,
        planner_endpoint=planner_ep,
        user_endpoint=user_ep,
        assistant_endpoint=assistant_ep,
        providers=scripted.providers(),  # stops after turn 8, no INTERVENTION
    )

    assert dialogue.turns.count() == 8
    assert sorted(
        TurnImage.objects.filter(turn__dialogue=dialogue).values_list("turn__index", flat=True)
    ) == [2, 6]
    assert "INTERVENTION" not in set(
        Trigger.objects.filter(turn__dialogue=dialogue).values_list("type", flat=True)
    )


# --- The Scenario admin's inline ---------------------------------------------------------------


def _change_form(scenario, **image_fields) -> dict:
    return {
        "key": scenario.key,
        "domain": scenario.domain_id,
        "persona": scenario.persona_id,
        "title": scenario.title,
        "hidden_goal": scenario.hidden_goal,
        "surface_request": scenario.surface_request,
        "ideal_trajectory": scenario.ideal_trajectory,
        "anchors": json.dumps(scenario.anchors),
        "turn_images-TOTAL_FORMS": "1",
        "turn_images-INITIAL_FORMS": "0",
        "turn_images-MIN_NUM_FORMS": "0",
        "turn_images-MAX_NUM_FORMS": "1000",
        **{f"turn_images-0-{name}": value for name, value in image_fields.items()},
        "_save": "Save",
    }


def test_the_scenario_admin_stores_an_uploaded_image(client_for, admin_user):
    scenario = scripted.make_scenario()
    data = image_bytes("JPEG")
    url = reverse("admin:benchmark_scenario_change", args=[scenario.id])

    response = client_for(admin_user).post(
        url,
        _change_form(
            scenario,
            turn="3",
            upload=SimpleUploadedFile("room.jpg", data),
            description=WHITEBOARD,
            alt="Whiteboard",
            problem=BLUR,
            intervention=RETAKE,
        ),
    )

    assert response.status_code == 302, response.content.decode()
    image = ScenarioTurnImage.objects.get(scenario=scenario)
    checked = store_part(data, {}, ImageStore(write=False))
    assert (image.turn, image.file.name, image.sha256) == (3, checked.name, checked.sha256)
    assert (image.media_type, image.width, image.height) == ("image/jpeg", 24, 16)
    assert image.byte_size == len(data)
    with turn_image_storage().open(image.file.name, "rb") as stored:
        assert stored.read() == data
    assert turn_image_storage().exists("display/" + checked.name.removeprefix("original/"))
    assert ScenarioCard.from_model(scenario).intervention_turns() == [3]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"upload": SimpleUploadedFile("notes.png", b"not an image at all")},
            "notes.png: not a PNG, JPEG, WebP or GIF image",
        ),
        ({}, "Choose an image file."),
        (
            {"upload": SimpleUploadedFile("room.png", image_bytes()), "problem": BLUR},
            "Say what the user could do to fix the problem.",
        ),
    ],
)
def test_the_scenario_admin_refuses_a_bad_image_with_a_clear_error(
    client_for, admin_user, storage_dir, fields, message
):
    scenario = scripted.make_scenario()
    url = reverse("admin:benchmark_scenario_change", args=[scenario.id])

    response = client_for(admin_user).post(
        url, _change_form(scenario, turn="3", description=WHITEBOARD, **fields)
    )

    assert response.status_code == 200
    assert message in response.content.decode()
    assert not ScenarioTurnImage.objects.exists()
    assert not list(storage_dir.iterdir())  # nothing stored


def test_the_scenario_admin_is_closed_to_non_staff(client_for, researcher):
    scenario = scripted.make_scenario()
    url = reverse("admin:benchmark_scenario_change", args=[scenario.id])

    response = client_for(researcher).get(url)

    assert response.status_code == 302
    assert "/login/" in response["Location"]


def test_the_scenario_admin_refuses_more_images_on_a_turn_than_the_cap(
    client_for, admin_user, settings
):
    settings.PROACTBENCH_IMAGE_MAX_PER_TURN = 1
    scenario = scripted.make_scenario()
    form = _change_form(
        scenario, turn="3", upload=SimpleUploadedFile("a.png", image_bytes()), description="one"
    )
    form.update(
        {
            "turn_images-TOTAL_FORMS": "2",
            "turn_images-1-turn": "3",
            "turn_images-1-upload": SimpleUploadedFile("b.png", image_bytes()),
            "turn_images-1-description": "two",
        }
    )
    url = reverse("admin:benchmark_scenario_change", args=[scenario.id])

    response = client_for(admin_user).post(url, form)

    assert response.status_code == 200
    assert "turn 3 has 2 images, more than 1 (PROACTBENCH_IMAGE_MAX_PER_TURN)" in (
        response.content.decode()
    )
    assert not ScenarioTurnImage.objects.exists()


def test_a_change_without_a_new_file_keeps_the_stored_image(client_for, admin_user, scenario):
    image = ScenarioTurnImage.objects.get(turn=2)
    form = _change_form(scenario, id=image.id, turn="2", description="new")
    form.update({"turn_images-0-scenario": scenario.id, "turn_images-INITIAL_FORMS": "1"})
    url = reverse("admin:benchmark_scenario_change", args=[scenario.id])

    response = client_for(admin_user).post(url, form)

    assert response.status_code == 302, response.content.decode()
    changed = ScenarioTurnImage.objects.get(id=image.id)
    assert changed.description == "new"
    assert (changed.file.name, changed.sha256, changed.byte_size) == (
        image.file.name,
        image.sha256,
        image.byte_size,
    )
