import re

import pytest

from benchmark.curation.prompts import PROMPTS_DIR, Prompt, PromptError, load_prompt

EXPECTED_PLACEHOLDERS = {
    "planner": {
        "persona",
        "domain",
        "scenario_title",
        "surface_request",
        "hidden_goal",
        "ideal_trajectory",
        "anchors",
        "roadmap",
        "conversation",
        "triggers",
        "turn",
        "max_turns",
        "phase",
        "still_needed",
        "images",
    },
    "user_agent": {
        "persona",
        "style_description",
        "style_traits",
        "min_words",
        "max_words",
        "conversation",
        "intent",
        "content_payload",
        "behavioral_directive",
        "anchor",
    },
    "assistant": set(),
    "judge": {
        "conversation",
        "trigger_type",
        "pass_criteria",
        "partial_criteria",
        "fail_criteria",
        "reply",
    },
    "rubric_injection": {"trigger_type", "pass_criteria"},
    "rubric_intervention": {"problem", "intervention"},
}
# The latest version of each prompt: version 2 added the INTERVENTION trigger type (issue #18).
EXPECTED_VERSIONS = {"planner": "v2", "judge": "v2", "rubric_injection": "v2"}


@pytest.mark.parametrize("name", sorted(EXPECTED_PLACEHOLDERS))
def test_every_product_prompt_has_its_version_and_placeholders(name):
    prompt = load_prompt(name)
    version = EXPECTED_VERSIONS.get(name, "v1")
    assert prompt.version == version
    assert (PROMPTS_DIR / f"{name}.{version}.txt").exists()
    assert prompt.placeholders == EXPECTED_PLACEHOLDERS[name]


def test_load_prompt_is_cached():
    assert load_prompt("planner") is load_prompt("planner")


def test_unknown_prompt_is_a_clear_error():
    with pytest.raises(PromptError, match=r"no prompt file nope\.v<N>\.txt"):
        load_prompt("nope")


def test_render_leaves_json_braces_alone_and_never_expands_values():
    prompt = Prompt("t", "v1", 'Say {greeting}. Answer {"verdict": "PASS"} or {\n}.')
    assert prompt.render(greeting="hi {greeting}") == (
        'Say hi {greeting}. Answer {"verdict": "PASS"} or {\n}.'
    )


def test_render_rejects_missing_and_unexpected_fields():
    prompt = Prompt("t", "v1", "{a} and {b}")
    with pytest.raises(PromptError, match=r"no value for \['b'\]"):
        prompt.render(a=1)
    with pytest.raises(PromptError, match=r"no placeholder for \['c'\]"):
        prompt.render(a=1, b=2, c=3)


def test_judge_prompt_demands_a_json_verdict_with_a_verbatim_quote():
    text = load_prompt("judge").text
    assert '{"verdict": "PASS" | "PARTIAL" | "FAIL", "rationale": ' in text
    assert '"evidence": "an exact quote copied from the reply"}' in text
    assert "verbatim" in text
    assert "boilerplate ALWAYS fails a RECOVERY reply" in text
    for verdict, score in (("PASS", "1.0"), ("PARTIAL", "0.5"), ("FAIL", "0.0")):
        assert f"{verdict} ({score})" in text
    # The judge never receives style or persona (SPEC 2.2).
    assert not {"style", "persona", "style_description"} & load_prompt("judge").placeholders


def test_rubric_injection_never_mentions_evaluation():
    text = load_prompt("rubric_injection").render(
        trigger_type="RECOVERY", pass_criteria="Offers a checklist for the move."
    )
    forbidden = r"evaluat|judg|scor|grade|rubric|criteri|\btest|benchmark|\bpass(es|ed)?\b"
    assert not re.search(forbidden, text, re.IGNORECASE)
    assert "The RECOVERY principle applies to your next reply" in text
    assert text.endswith("do not mention these instructions.")
