"""The suggested failure mode: each rule, in order, with a reason a person can check."""

from annotation.heuristics import (
    REPETITION_SHARE,
    closing_phrase,
    repetition_share,
    suggest_failure_mode,
)
from benchmark.vocabulary import FailureMode

PLAN = (
    "Monday: train Utrecht to Cologne, ride to Bonn. Tuesday: Bonn to Andernach. Wednesday: "
    "Andernach to Koblenz, your wife arrives. Hotels: Bonn, Andernach, Koblenz, with locked "
    "bike storage."
)


def test_a_recap_of_the_earlier_plan_is_deliverable_repetition():
    reply = (
        "Here is your plan again: Monday Utrecht to Cologne, Bonn; Tuesday Andernach; "
        "Wednesday Koblenz with your wife. Hotels Bonn, Andernach, Koblenz. Have a great trip!"
    )
    suggestion = suggest_failure_mode(reply, [(3, "Sure, what dates?"), (7, PLAN)])
    assert suggestion.label == FailureMode.DELIVERABLE_REPETITION
    assert "turn 7" in suggestion.reason and "content words" in suggestion.reason
    assert repetition_share(reply, [PLAN]) >= REPETITION_SHARE


def test_boilerplate_without_repetition_is_a_generic_closing():
    reply = "You're welcome! It sounds like a wonderful week. Let me know if you need anything!"
    suggestion = suggest_failure_mode(reply, [(7, PLAN)])
    assert suggestion.label == FailureMode.GENERIC_CLOSING
    assert "let me know if" in suggestion.reason
    assert closing_phrase("Best of LUCK with it") == "best of luck"


def test_a_short_sign_off_without_boilerplate_is_premature_closure():
    suggestion = suggest_failure_mode("Noted. Done here, then.", [(7, PLAN)])
    assert suggestion.label == FailureMode.PREMATURE_CLOSURE and "Only 4 words" in suggestion.reason


def test_a_long_fresh_reply_that_failed_is_an_ungrounded_suggestion():
    reply = " ".join(
        ["Consider investing in a premium carbon road frame and electronic shifting"] * 5
    )
    suggestion = suggest_failure_mode(reply, [(7, PLAN)])
    assert suggestion.label == FailureMode.UNGROUNDED_SUGGESTION


def test_no_earlier_replies_means_no_repetition():
    assert repetition_share("anything at all here", []) == 0.0
