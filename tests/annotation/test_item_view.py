"""What ``item_view`` reads in its one statement (trigger, conversation, replies) equals what
the ORM gives, for every kind that shows a reply."""

import pytest

from annotation.selectors import item_view
from annotation.services.assignments import assignment_next
from benchmark.evaluation.requests import conversation_until
from benchmark.models import EvaluationUnit, Turn
from tests.annotation.conftest import rater


def _expected_conversation(trigger) -> list[dict]:
    turns = list(Turn.objects.filter(dialogue_id=trigger.turn.dialogue_id).order_by("index"))
    return [{"role": m.role, "text": m.content} for m in conversation_until(trigger, turns)]


@pytest.mark.parametrize(
    "kind",
    ["pairwise", "direct_rating", "adjudication", "failure_mode"],
)
def test_the_view_shows_the_conversation_up_to_the_trigger_and_the_items_replies(kind, make_study):
    extra = {"condition": ""} if kind == "failure_mode" else {}
    study = make_study(kind, **extra)
    r = rater(study, study.raters.first().user)
    seen = 0
    while (assignment := assignment_next(rater=r)) is not None and seen < 4:
        item = assignment.item
        view = item_view(assignment=assignment, study=study)
        trigger = item.trigger
        conversation = _expected_conversation(trigger)
        assert view["conversation"] == conversation
        assert conversation[-1] == {"role": "user", "text": trigger.turn.user_message}
        replies = dict(EvaluationUnit.objects.values_list("pk", "reply"))
        if kind == "pairwise":
            by_case = {"A": replies[item.unit_id], "B": replies[item.unit_b_id]}
            assert replies[item.unit_id] != replies[item.unit_b_id]
            assert [r_["text"] for r_ in view["responses"]] == [
                by_case[case] for case in assignment.display["order"]
            ]
        elif kind == "adjudication":
            assert view["rubric"]["pass"] == trigger.pass_criteria
        else:
            assert view["reply"] == replies[item.unit_id]
        if kind == "direct_rating":
            assert view["rubric"] == {
                "type": trigger.get_type_display(),
                "pass": trigger.pass_criteria,
                "partial": trigger.partial_criteria,
                "fail": trigger.fail_criteria,
            }
        # Next on a held item returns it; answering is other tests' business: skip ahead.
        assignment.state = "lapsed"
        assignment.save(update_fields=["state"])
        seen += 1
    assert seen >= 2
