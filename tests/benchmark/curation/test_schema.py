import json

import pytest

from benchmark.curation.schema import PlannerReplyError, parse_planner_reply
from tests.benchmark.curation.scripted import decision


def _raw(**changes) -> str:
    data = json.loads(decision(trigger="EMERGENT", disclose=0, refs=[0]))
    data.update(changes)
    return json.dumps(data)


def test_plain_and_fenced_json_parse_to_the_same_decision():
    plain = parse_planner_reply(decision(trigger="EMERGENT", disclose=0, refs=[0]))
    fenced = parse_planner_reply(decision(trigger="EMERGENT", disclose=0, refs=[0], fenced=True))
    assert plain == fenced
    assert plain.trigger_type == "EMERGENT"
    assert plain.evaluation_rubric is not None
    assert plain.referenced_anchors == [0]


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("Sure! " + decision(), "not a JSON object"),
        (decision() + "\nHope this helps.", "not a JSON object"),
        ("[1, 2]", "must be a JSON object, not list"),
        (
            _raw(stop_conversation="false"),
            r"\$\.stop_conversation: Input should be a valid boolean",
        ),
        (_raw(disclose_anchor=[1, 2]), r"\$\.disclose_anchor: Input should be a valid integer"),
        (_raw(disclose_anchor=-1), r"\$\.disclose_anchor: Input should be greater than or equal"),
        (_raw(trigger_type="SOMETIMES"), r"\$\.trigger_type: Input should be 'EMERGENT'"),
        (_raw(evaluation_rubric=None), "a trigger point needs trigger_type and evaluation_rubric"),
        (_raw(extra_key=1), r"\$\.extra_key: Extra inputs are not permitted"),
        (_raw(referenced_anchors=None), r"\$\.referenced_anchors: Input should be a valid list"),
    ],
)
def test_invalid_replies_are_rejected_with_a_message_for_the_planner(reply, message):
    with pytest.raises(PlannerReplyError, match=message):
        parse_planner_reply(reply)


def test_a_non_trigger_turn_carries_no_rubric_and_no_anchor_references():
    data = json.loads(decision())
    data["referenced_anchors"] = [0]
    with pytest.raises(PlannerReplyError, match="referenced_anchors empty"):
        parse_planner_reply(json.dumps(data))


def test_missing_keys_are_listed_together():
    with pytest.raises(PlannerReplyError) as caught:
        parse_planner_reply('{"is_trigger_point": false}')
    for key in ("tactical_order", "disclose_anchor", "stop_conversation"):
        assert f"$.{key}: Field required" in str(caught.value)
