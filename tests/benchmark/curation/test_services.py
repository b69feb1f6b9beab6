"""Curated dialogues are saved through the corpus importer, as drafts, and never overwrite."""

import pytest

from benchmark.curation.loop import CurationError
from benchmark.curation.services import (
    DialogueExistsError,
    curation_blueprint,
    curation_spec_for,
    dialogue_curate,
)
from benchmark.models import Anchor, Blueprint, CommunicationStyle, Dialogue, Trigger
from tests.benchmark.curation import scripted
from tests.benchmark.curation.scripted import USER

pytestmark = pytest.mark.django_db


@pytest.fixture
def scenario():
    return scripted.make_scenario()


@pytest.fixture
def endpoints():
    return scripted.make_endpoints()


def curate(spec, endpoints, agents):
    planner, user, assistant = endpoints
    return dialogue_curate(
        spec=spec,
        planner_endpoint=planner,
        user_endpoint=user,
        assistant_endpoint=assistant,
        providers=agents,
    )


def test_a_curated_dialogue_is_imported_as_a_draft(scenario, endpoints):
    spec = curation_spec_for(scenario=scenario, style=scripted.style())
    dialogue = curate(spec, endpoints, scripted.providers())

    dialogue.refresh_from_db()
    assert dialogue.status == "draft"
    assert dialogue.unique_id_eval == spec.unique_id_eval
    assert dialogue.scenario == scenario
    assert dialogue.persona == scenario.persona
    assert dialogue.style.index == scripted.STYLE_INDEX
    assert dialogue.blueprint.key == "BP_TEST_PROFESSIONAL_01_PIM"
    assert dialogue.curation_model == "planner-ep-model"
    assert dialogue.prompt_versions == {"planner": "v2", "user_agent": "v1", "assistant": "v1"}
    assert dialogue.curated_at is not None
    assert dialogue.findings == []  # the same checks as an import, and nothing to report
    assert [t.user_message for t in dialogue.turns.all()] == USER

    triggers = Trigger.objects.filter(turn__dialogue=dialogue).order_by("turn__index")
    assert [(t.turn.index, t.type) for t in triggers] == [
        (1, "EMERGENT"),
        (4, "CRITICAL"),
        (8, "RECOVERY"),
    ]
    assert [a.key for a in triggers[1].anchors.order_by("key")] == ["A2", "A3"]

    anchors = Anchor.objects.filter(dialogue=dialogue).select_related("disclosed_in")
    disclosed_in = [a.disclosed_in.index for a in anchors]
    assert disclosed_in == [1, 2, 3, 5]
    assert len(set(disclosed_in)) == len(disclosed_in)  # one anchor per turn


def test_the_same_dialogue_is_never_curated_twice(scenario, endpoints):
    spec = curation_spec_for(scenario=scenario, style=scripted.style())
    first = curate(spec, endpoints, scripted.providers())
    again = scripted.providers()
    with pytest.raises(DialogueExistsError, match="already exists") as caught:
        curate(spec, endpoints, again)
    assert caught.value.dialogue_id == first.id
    assert again.planner.requests == []  # refused before any model call


def test_a_failed_curation_saves_nothing(scenario, endpoints):
    spec = curation_spec_for(scenario=scenario, style=scripted.style())
    too_long = " ".join(["word"] * 30)
    agents = scripted.providers(user=[USER[0], USER[1], *[too_long] * 4])
    with pytest.raises(CurationError, match="^turn 3: .*the message has 30 words"):
        curate(spec, endpoints, agents)
    assert not Dialogue.objects.exists()


def test_an_inactive_endpoint_is_refused(scenario, endpoints):
    endpoints[1].is_active = False
    spec = curation_spec_for(scenario=scenario, style=scripted.style())
    with pytest.raises(CurationError, match="model endpoint user-ep is inactive"):
        curate(spec, endpoints, scripted.providers())


def test_a_blueprint_gives_its_id_and_roadmap_but_not_its_style(scenario, endpoints):
    style = scripted.style()
    blueprint = Blueprint.objects.create(
        key="BP_TEST_PROFESSIONAL_01_PIM",
        scenario=scenario,
        style=style,
        strategic_overview="Drip the CFO first, then the hybrid setup, then the vote.",
        roadmap=[
            {"turn": 1, "anchors_to_reveal": ["CFO leaves early"], "style_note": "curt, exact"}
        ],
        style_guardrails={"tone": "terse questions only"},
    )
    assert curation_blueprint(scenario=scenario, style=style) == blueprint
    spec = curation_spec_for(scenario=scenario, style=style, blueprint=blueprint)
    agents = scripted.providers()
    dialogue = curate(spec, endpoints, agents)

    assert dialogue.blueprint == blueprint
    planner_prompt = agents.planner.texts()[0]
    assert "Drip the CFO first, then the hybrid setup, then the vote." in planner_prompt
    assert '"anchors_to_reveal": ["CFO leaves early"]' in planner_prompt
    for style_hint in ("curt, exact", "style_note", "terse questions only", blueprint.key):
        assert style_hint not in planner_prompt


def test_a_blueprint_for_another_style_is_refused(scenario):
    other = CommunicationStyle.objects.get(index=1)
    blueprint = Blueprint.objects.create(key="BP_X_NONE", scenario=scenario, style=other)
    with pytest.raises(ValueError, match="is for another style"):
        curation_spec_for(scenario=scenario, style=scripted.style(), blueprint=blueprint)
