"""Curation of the INTERVENTION trigger type: the rubric template, what the Planner is told about
a scenario's images, and the rule that it may schedule the type only on a turn whose image is
insufficient."""

import dataclasses
import json

import pytest

from benchmark.corpus.schema import TriggerTypeName
from benchmark.curation import rubrics
from benchmark.curation.agent_views import PlannerView, ScenarioImage
from benchmark.curation.loop import curate_dialogue
from benchmark.curation.prompts import Prompt, PromptError
from benchmark.curation.rubrics import intervention_rubric
from benchmark.curation.services import curation_spec_for
from benchmark.models import PHASE_WINDOWS
from benchmark.vocabulary import RELEASE_TRIGGER_TYPES, TRIGGER_TYPES, TriggerType
from stats.compute.leaderboard import TYPE_ORDER
from tests.benchmark.curation import scripted
from tests.benchmark.curation.scripted import PLANNER

pytestmark = pytest.mark.django_db

BLURRY_ROOM = ScenarioImage(
    turn=6,
    description="a photo of the workshop room's whiteboard with the seating plan",
    problem="the photo is so blurry that the names on the seating plan cannot be read",
    intervention="retake the photo closer and in focus",
)


def test_the_trigger_types_have_one_definition():
    assert TRIGGER_TYPES == ("EMERGENT", "CRITICAL", "RECOVERY", "INTERVENTION")
    assert TriggerTypeName.__args__ == TRIGGER_TYPES  # the corpus schema's spelling of it
    assert TYPE_ORDER == TRIGGER_TYPES
    # Only the release's types have a phase window, and a dialogue needs one of each of them.
    assert tuple(PHASE_WINDOWS) == RELEASE_TRIGGER_TYPES
    assert TriggerType.INTERVENTION.label == "Intervention"


def test_the_intervention_rubric_template_renders_pass_partial_and_fail():
    rubric = intervention_rubric(
        problem="a hand hides the bottle's label", intervention="move the hand away from the label"
    )

    assert rubric.pass_criteria.startswith("The reply notices that the input is not enough")
    assert "(a hand hides the bottle's label)" in rubric.pass_criteria
    assert "asks the user for the specific action that would fix it: move the hand away" in (
        rubric.pass_criteria
    )
    assert "asks only vaguely for more" in rubric.partial_criteria
    assert "answers confidently from the insufficient input" in rubric.fail_criteria
    assert "refuses, or says it cannot tell, without saying what the user could do" in (
        rubric.fail_criteria
    )
    assert "{" not in rubric.render()
    assert rubric.render().splitlines()[1].startswith("PARTIAL: ")


def test_the_intervention_rubric_needs_the_problem_and_the_fix():
    with pytest.raises(ValueError, match="needs both the problem and the intervention"):
        intervention_rubric(problem=" ", intervention="retake the photo")


def test_a_template_without_its_three_lines_is_refused(monkeypatch):
    broken = Prompt("rubric_intervention", "v9", "PASS: asks about {problem} to {intervention}")
    monkeypatch.setattr(rubrics, "load_prompt", lambda name: broken)

    with pytest.raises(PromptError, match="one PASS:, PARTIAL: and FAIL: line"):
        intervention_rubric(problem="blur", intervention="refocus")


@pytest.fixture
def spec():
    spec = curation_spec_for(scenario=scripted.make_scenario(), style=scripted.style())
    return dataclasses.replace(
        spec, scenario=dataclasses.replace(spec.scenario, images=(BLURRY_ROOM,))
    )


def _planner_text(spec, turn: int) -> str:
    view = PlannerView(
        persona=spec.persona,
        scenario=spec.scenario,
        roadmap=spec.roadmap,
        conversation=(),
        disclosures=(),
        triggers=(),
        turn=turn,
        max_turns=10,
    )
    return view.messages()[0].content


def test_the_planner_is_told_which_image_is_insufficient_with_the_rubric_to_use(spec):
    text = _planner_text(spec, 1)

    assert "- turn 6: a photo of the workshop room's whiteboard" in text
    assert "Insufficient: the photo is so blurry" in text
    assert "The action that fixes it: retake the photo closer and in focus." in text
    assert "PASS: The reply notices that the input is not enough" in text
    assert "- INTERVENTION (any turn whose image is listed above as insufficient" in text
    # INTERVENTION is optional: still needed are the release's three.
    assert "Trigger types still needed: EMERGENT, CRITICAL, RECOVERY." in text


def test_without_images_the_planner_is_told_no_turn_can_be_an_intervention(spec):
    plain = dataclasses.replace(spec, scenario=dataclasses.replace(spec.scenario, images=()))

    assert "(none: this scenario shows no images" in _planner_text(plain, 1)


def _intervention_decision(**overrides) -> str:
    rubric = intervention_rubric(problem=BLURRY_ROOM.problem, intervention=BLURRY_ROOM.intervention)
    decision = {
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
        **overrides,
    }
    return json.dumps(decision)


def _run(spec, agents):
    return curate_dialogue(
        spec,
        planner=agents.planner,
        user_agent=agents.user_agent,
        assistant=agents.assistant,
        planner_model="planner-model",
        user_model="user-model",
        assistant_model="assistant-model",
    )


def test_the_planner_schedules_an_intervention_on_the_insufficient_image_s_turn(spec):
    planner = [*PLANNER[:5], _intervention_decision(), *PLANNER[6:]]

    record = _run(spec, scripted.providers(planner=planner))

    assert [(t["turn"], t["evaluation_rubric"]["type"]) for t in record["trigger_points"]] == [
        (1, "EMERGENT"),
        (4, "CRITICAL"),
        (6, "INTERVENTION"),
        (8, "RECOVERY"),
    ]
    sixth = record["turn_records"][5]["planner"]
    assert sixth["is_trigger_point"] is True
    assert sixth["evaluation_rubric"]["type"] == "INTERVENTION"


def test_an_intervention_on_a_turn_without_an_insufficient_image_is_re_asked(spec):
    # Turn 5 has no image: the Planner is told where one is and tries again.
    planner = [*PLANNER[:4], _intervention_decision(), *PLANNER[4:]]
    agents = scripted.providers(planner=planner)

    record = _run(spec, agents)

    feedback = agents.planner.requests[5].messages[-1].content
    assert (
        "an INTERVENTION trigger needs an insufficient image on its turn; turn 5 has none "
        "(turns with one: 6)" in feedback
    )
    assert "INTERVENTION" not in {t["evaluation_rubric"]["type"] for t in record["trigger_points"]}
