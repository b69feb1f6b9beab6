"""The curation loop, driven by scripted agents: the record it writes and the rules it enforces."""

import dataclasses
import json
import re

import pytest

from benchmark.corpus.schema import OFFICIAL_KEYS
from benchmark.curation.agent_views import (
    AssistantView,
    Exchange,
    PlannerView,
    UserAgentView,
    UserOrder,
)
from benchmark.curation.loop import CurationError, curate_dialogue, leaked_tokens
from benchmark.curation.services import curation_spec_for
from tests.benchmark.curation import scripted
from tests.benchmark.curation.scripted import ANCHORS, PLANNER, USER, decision

pytestmark = pytest.mark.django_db


@pytest.fixture
def spec():
    return curation_spec_for(scenario=scripted.make_scenario(), style=scripted.style())


def run(spec, agents, **options):
    return curate_dialogue(
        spec,
        planner=agents.planner,
        user_agent=agents.user_agent,
        assistant=agents.assistant,
        planner_model="planner-model",
        user_model="user-model",
        assistant_model="assistant-model",
        **options,
    )


def _with(script, turn, *replies):
    """The script with the entry for ``turn`` (1-based) replaced by ``replies`` in order."""
    return [*script[: turn - 1], *replies, *script[turn:]]


# --- The record ---------------------------------------------------------------------------------


def test_full_run_writes_one_release_record(spec):
    agents = scripted.providers()
    record = run(spec, agents)

    assert list(record) == [*OFFICIAL_KEYS, "x_workbench"]
    assert record["blueprint_id"] == "BP_TEST_PROFESSIONAL_01_PIM"
    assert record["unique_id_eval"] == (
        f"BP_TEST_PROFESSIONAL_01_PIM__style12__{scripted.PERSONA_UUID}"
    )
    assert record["uuid"] == scripted.PERSONA_UUID
    assert record["category_key"] == "professional_persona"
    assert record["style_combination_index"] == 12
    assert record["evaluated_model"] == "planner-model"
    assert record["num_turns_completed"] == 8
    assert [(t["turn"], t["evaluation_rubric"]["type"]) for t in record["trigger_points"]] == [
        (1, "EMERGENT"),
        (4, "CRITICAL"),
        (8, "RECOVERY"),
    ]
    assert record["trigger_points"][0]["evaluation_rubric"] == {
        "type": "EMERGENT",
        **scripted.RUBRICS["EMERGENT"],
    }
    assert [t["user_message"] for t in record["turn_records"]] == USER
    assert record["turn_records"][0]["assistant_response"].startswith("Reply 1:")

    fourth = record["turn_records"][3]["planner"]
    assert list(fourth) == [
        "state_audit",
        "is_trigger_point",
        "stop_conversation",
        "evaluation_rubric",
        "tactical_order",
    ]
    assert fourth["state_audit"] == {
        "current_turn": 4,
        "previous_trigger_count": 1,
        "is_max_reached": False,
    }
    assert fourth["evaluation_rubric"]["type"] == "CRITICAL"
    assert list(fourth["tactical_order"]) == ["intent", "content_payload", "behavioral_directive"]
    assert record["turn_records"][1]["planner"]["evaluation_rubric"] is None
    assert record["turn_records"][-1]["planner"]["stop_conversation"] is True

    assert record["token_usage"]["planner"]["calls"] == 8
    assert record["token_usage"]["user_agent"]["calls"] == 8
    assert record["token_usage"]["assistant"]["calls"] == 8
    assert record["token_usage"]["assistant"]["completion_tokens"] == sum(
        len(reply.split()) for reply in scripted.ASSISTANT
    )

    ext = record["x_workbench"]
    assert list(ext) == [
        "persona",
        "scenario",
        "anchors",
        "trigger_anchors",
        "status",
        "provenance",
    ]
    assert ext["status"] == "draft"
    assert ext["persona"] == {"name": scripted.PERSONA_NAME, "summary": scripted.PERSONA_SUMMARY}
    assert ext["scenario"]["hidden_goal"] == scripted.HIDDEN_GOAL
    assert ext["anchors"] == [
        {"key": "A1", "text": ANCHORS[0], "turn": 1},
        {"key": "A2", "text": ANCHORS[1], "turn": 2},
        {"key": "A3", "text": ANCHORS[2], "turn": 3},
        {"key": "A4", "text": ANCHORS[3], "turn": 5},
    ]
    assert ext["trigger_anchors"] == {"1": ["A1"], "4": ["A2", "A3"], "8": ["A1", "A4"]}
    provenance = ext["provenance"]
    assert provenance["curation_model"] == "planner-model"
    assert provenance["prompt_versions"] == {"planner": "v2", "user_agent": "v1", "assistant": "v1"}
    assert re.match(r"\d{4}-\d\d-\d\dT", provenance["curated_at"])
    json.dumps(record)  # plain JSON all the way down


def test_the_planner_decides_each_turn_before_the_assistant_replies(spec):
    journal: list[str] = []
    agents = scripted.providers(journal=journal)
    run(spec, agents)
    assert journal == ["planner", "user_agent", "assistant"] * 8
    # The Planner's request for turn 4 holds the replies of turns 1-3, not the reply it judges.
    planner_turn_4 = agents.planner.texts()[3]
    assert "Reply 3:" in planner_turn_4
    assert "Reply 4:" not in planner_turn_4


def test_every_request_carries_the_replay_key_of_its_agent_dialogue_and_turn(spec):
    agents = scripted.providers(user=_with(USER, 2, "Fine.", USER[1]))
    run(spec, agents)
    for agent, provider, model in (
        ("planner", agents.planner, "planner-model"),
        ("user_agent", agents.user_agent, "user-model"),
        ("assistant", agents.assistant, "assistant-model"),
    ):
        keys = [request.replay_key for request in provider.requests]
        assert {(k.kind, k.agent, k.unique_id_eval, k.model) for k in keys} == {
            ("curation", agent, spec.unique_id_eval, model)
        }
        expected = [1, 2, 2, *range(3, 9)] if agent == "user_agent" else list(range(1, 9))
        # A re-ask of turn 2 carries the same key as the first ask.
        assert [k.turn for k in keys] == expected


def test_the_dialogue_ends_at_max_turns(spec):
    last = decision("Wrap up: everything is final.", trigger="RECOVERY", refs=[0, 3])
    record = run(spec, scripted.providers(planner=[*PLANNER[:7], last]), max_turns=8)
    assert record["num_turns_completed"] == 8
    audit = record["turn_records"][-1]["planner"]["state_audit"]
    assert audit["is_max_reached"] is True
    assert record["turn_records"][-1]["planner"]["stop_conversation"] is False


# --- Isolation -------------------------------------------------------------------------------


def _forbidden_for_everyone_but_the_planner():
    rubric_texts = [text for rubric in scripted.RUBRICS.values() for text in rubric.values()]
    return [*rubric_texts, scripted.HIDDEN_GOAL, "EMERGENT", "CRITICAL", "RECOVERY"]


def test_the_assistant_sees_the_conversation_and_nothing_else(spec):
    agents = scripted.providers()
    run(spec, agents)
    forbidden = [
        *_forbidden_for_everyone_but_the_planner(),
        scripted.PERSONA_NAME,
        scripted.PERSONA_SUMMARY,
        "Columbus",
        spec.style.description,
        spec.scenario.surface_request,
        spec.scenario.ideal_trajectory,
        spec.scenario.title,
        *ANCHORS,
    ]
    for text in agents.assistant.texts():
        for item in forbidden:
            assert item not in text
    last = agents.assistant.requests[-1].payload()["messages"]
    assert [m["role"] for m in last] == ["system", *["user", "assistant"] * 7, "user"]
    assert [m["content"] for m in last[1::2]] == USER


def test_the_user_agent_never_sees_rubric_schedule_hidden_goal_or_later_anchors(spec):
    agents = scripted.providers()
    run(spec, agents)
    disclosed_by_turn = {1: 0, 2: 1, 3: 2, 5: 3}
    texts = agents.user_agent.texts()
    assert len(texts) == 8
    for turn, text in enumerate(texts, start=1):
        for item in _forbidden_for_everyone_but_the_planner():
            assert item not in text
        assert re.search(r"\btrigger", text, re.IGNORECASE) is None
        assert scripted.PERSONA_NAME in text  # it plays the persona …
        assert spec.style.description in text  # … in the persona's style
        for index, anchor in enumerate(ANCHORS):
            if disclosed_by_turn.get(turn) != index:
                assert anchor not in text  # at most this turn's anchor, and only its text


def test_the_planner_never_sees_the_style(spec):
    agents = scripted.providers()
    run(spec, agents)
    for text in agents.planner.texts():
        assert spec.style.description not in text
        assert "Precise and exact" not in text
        assert "full of questions" not in text.lower()
        assert re.search(r"\bPIM\b", text) is None
        assert spec.blueprint_id not in text
        assert "5-25" not in text and "5–25" not in text
        assert scripted.HIDDEN_GOAL in text  # it does see the scenario


def test_views_have_no_field_for_what_their_agent_must_not_see():
    fields = {
        view: {f.name for f in dataclasses.fields(view)}
        for view in (PlannerView, UserAgentView, AssistantView)
    }
    # The images a user message carries (scenario images): sent to the Assistant alone; the
    # other views render the conversation as text (test_scenario_images.py checks the requests).
    assert fields[AssistantView] == {"conversation", "user_message", "user_images"}
    assert {f.name for f in dataclasses.fields(Exchange)} == {"user", "assistant", "images"}
    assert fields[UserAgentView] == {"order", "persona", "style", "conversation"}
    assert "style" not in fields[PlannerView]
    assert {f.name for f in dataclasses.fields(UserOrder)} == {
        "intent",
        "content_payload",
        "behavioral_directive",
        "anchor",
    }


# --- Word bounds -----------------------------------------------------------------------------

LONG_MESSAGE = " ".join(["word"] * 40)


def test_a_message_outside_the_word_bounds_is_regenerated_with_feedback(spec):
    agents = scripted.providers(user=_with(USER, 1, LONG_MESSAGE, USER[0]))
    record = run(spec, agents)
    assert record["turn_records"][0]["user_message"] == USER[0]
    assert record["token_usage"]["user_agent"]["calls"] == 9
    retry = agents.user_agent.requests[1].payload()["messages"]
    assert retry[-2] == {"role": "assistant", "content": LONG_MESSAGE}
    assert "the message has 40 words; it must have between 5 and 25 words" in retry[-1]["content"]


def test_too_short_counts_as_well(spec):
    agents = scripted.providers(user=_with(USER, 2, "Fine.", USER[1]))
    run(spec, agents)
    assert (
        "the message has 1 word; it must have between 5"
        in agents.user_agent.requests[2].messages[-1].content
    )


def test_word_bounds_still_broken_after_k_regenerations_fail_the_dialogue(spec):
    agents = scripted.providers(user=[USER[0], *[LONG_MESSAGE] * 3])
    with pytest.raises(CurationError) as caught:
        run(spec, agents, max_regenerations=2)
    message = str(caught.value)
    assert message.startswith("turn 2: the User Agent gave no acceptable message in 3 attempt(s)")
    assert "the message has 40 words; it must have between 5 and 25 words" in message
    assert caught.value.turn == 2
    assert len(agents.user_agent.requests) == 1 + 3
    assert len(agents.assistant.requests) == 1  # turn 2 never reached the assistant


# --- Anchor drip -----------------------------------------------------------------------------


def _planner_retry_feedback(agents, request_number):
    return agents.planner.requests[request_number].messages[-1].content


def test_disclosing_two_anchors_at_once_is_re_asked(spec):
    agents = scripted.providers(planner=_with(PLANNER, 2, decision(disclose=[1, 2]), PLANNER[1]))
    record = run(spec, agents)
    assert "$.disclose_anchor: Input should be a valid integer" in _planner_retry_feedback(
        agents, 2
    )
    assert record["x_workbench"]["anchors"][1] == {"key": "A2", "text": ANCHORS[1], "turn": 2}


def test_an_order_that_smuggles_a_second_anchor_is_re_asked(spec):
    smuggling = decision(disclose=1, payload=("Mention in passing: " + ANCHORS[2],))
    agents = scripted.providers(planner=_with(PLANNER, 2, smuggling, PLANNER[1]))
    run(spec, agents)
    feedback = _planner_retry_feedback(agents, 2)
    assert "the tactical order also reveals anchor [2], which is not disclosed yet" in feedback
    # The rejected order never reached the User Agent (anchor [2] is disclosed only at turn 3).
    assert ANCHORS[2] not in agents.user_agent.texts()[1]


def test_re_disclosing_an_anchor_is_re_asked(spec):
    agents = scripted.providers(planner=_with(PLANNER, 2, decision(disclose=0), PLANNER[1]))
    run(spec, agents)
    assert "anchor [0] was already disclosed at turn 1" in _planner_retry_feedback(agents, 2)


def test_a_nonexistent_anchor_is_re_asked(spec):
    agents = scripted.providers(planner=_with(PLANNER, 2, decision(disclose=7), PLANNER[1]))
    run(spec, agents)
    assert "disclose_anchor 7 does not exist" in _planner_retry_feedback(agents, 2)


def test_a_user_message_leaking_an_undisclosed_anchor_is_regenerated(spec):
    leaking = "Agenda fine. Five of fourteen join on Teams. Also: 22 feature cards, sticky dots."
    agents = scripted.providers(user=_with(USER, 2, leaking, USER[1]))
    record = run(spec, agents)
    assert record["turn_records"][1]["user_message"] == USER[1]
    feedback = agents.user_agent.requests[2].messages[-1].content
    assert "the message brings up details that are not for this turn" in feedback
    assert '"22"' in feedback and '"feature"' in feedback
    assert ANCHORS[2] not in feedback  # the feedback does not hand over the anchor


def test_the_leak_heuristic():
    anchor = ANCHORS[1]
    assert leaked_tokens("Five branch managers join remotely via Teams.", anchor, set()) == {
        "five",
        "branch",
        "manager",
        "remotely",
        "team",
    }
    assert leaked_tokens("Five people, one branch.", anchor, set()) == set()
    # Words already visible this turn are not evidence of a leak.
    visible = {"five", "fourteen", "attendee", "branch", "manager", "joining", "remotely"}
    assert leaked_tokens("Five branch managers on Teams.", anchor, visible) == set()


# --- Planner protocol rules --------------------------------------------------------------------


def test_malformed_planner_json_is_re_asked(spec):
    agents = scripted.providers(
        planner=_with(PLANNER, 1, "Here is my plan: disclose [0].", PLANNER[0])
    )
    record = run(spec, agents)
    assert record["num_turns_completed"] == 8
    retry = agents.planner.requests[1].payload()["messages"]
    assert retry[-2] == {"role": "assistant", "content": "Here is my plan: disclose [0]."}
    assert retry[-1]["content"].startswith("Not accepted:\n- the reply is not a JSON object")


def test_malformed_planner_json_k_times_fails_the_dialogue(spec):
    agents = scripted.providers(planner=["{not json"] * 4)
    with pytest.raises(
        CurationError,
        match=r"^turn 1: the Planner gave no acceptable decision in "
        r"4 attempt\(s\); last problem\(s\): the reply is not a JSON object",
    ):
        run(spec, agents)
    assert agents.user_agent.requests == []


def test_critical_without_anchors_from_two_earlier_turns_is_re_asked(spec):
    one_turn_only = decision(trigger="CRITICAL", refs=[2])
    agents = scripted.providers(planner=_with(PLANNER, 4, one_turn_only, PLANNER[3]))
    record = run(spec, agents)
    feedback = _planner_retry_feedback(agents, 4)
    assert (
        "a CRITICAL trigger must rely on anchors disclosed in at least two different earlier "
        "turns; its referenced anchors were disclosed in turn(s) 3"
    ) in feedback
    assert record["x_workbench"]["trigger_anchors"]["4"] == ["A2", "A3"]


def test_an_anchor_disclosed_in_the_trigger_turn_is_not_earlier(spec):
    same_turn = decision(trigger="CRITICAL", refs=[0, 2], disclose=2)
    agents = scripted.providers(planner=_with(PLANNER, 3, same_turn, PLANNER[2]))
    run(spec, agents)
    assert "were disclosed in turn(s) 1" in _planner_retry_feedback(agents, 3)


def test_a_trigger_must_rely_on_disclosed_anchors(spec):
    agents = scripted.providers(
        planner=_with(PLANNER, 1, decision(trigger="EMERGENT", refs=[3]), PLANNER[0])
    )
    run(spec, agents)
    feedback = _planner_retry_feedback(agents, 1)
    assert "referenced_anchors [3] are not disclosed by turn 1" in feedback


def test_stopping_before_every_trigger_type_is_re_asked(spec):
    early_stop = decision("Wrap up.", stop=True)
    agents = scripted.providers(planner=_with(PLANNER, 2, early_stop, PLANNER[1]))
    run(spec, agents)
    feedback = _planner_retry_feedback(agents, 2)
    assert "stop_conversation is true, but the dialogue has no CRITICAL or RECOVERY trigger" in (
        feedback
    )


def test_a_dialogue_without_every_trigger_type_fails(spec):
    agents = scripted.providers(planner=PLANNER[:5])
    with pytest.raises(CurationError, match="ended after 5 turn\\(s\\) without a RECOVERY trigger"):
        run(spec, agents, max_turns=5)


def test_a_scenario_with_fewer_than_two_anchors_fails_before_any_call():
    scenario = scripted.make_scenario(anchors=[ANCHORS[0]])
    spec = curation_spec_for(scenario=scenario, style=scripted.style())
    agents = scripted.providers()
    with pytest.raises(CurationError, match="has 1 anchor\\(s\\); curation needs at least two"):
        run(spec, agents)
    assert agents.planner.requests == []
