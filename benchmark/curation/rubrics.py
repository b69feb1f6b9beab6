"""Rubric templates: the criteria a trigger type's rubric starts from, kept as versioned prompt
files like every other text an agent is shown (``benchmark/prompts/rubric_<type>.v<N>.txt``).

Only INTERVENTION has one (ProactiveBench, seeds/002): its rubric follows from two facts about
the turn's image, what makes it insufficient and the action that would fix it, so the Planner is
handed the rendered template with each insufficient image and adapts it rather than inventing the
bar. The other types' rubrics depend on the anchors and are written by the Planner from scratch.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmark.curation.prompts import PromptError, load_prompt

_LABELS = {"PASS:": "pass_criteria", "PARTIAL:": "partial_criteria", "FAIL:": "fail_criteria"}


@dataclass(frozen=True)
class RubricCriteria:
    pass_criteria: str
    partial_criteria: str
    fail_criteria: str

    def render(self) -> str:
        return (
            f"PASS: {self.pass_criteria}\nPARTIAL: {self.partial_criteria}\n"
            f"FAIL: {self.fail_criteria}"
        )


def intervention_rubric(*, problem: str, intervention: str) -> RubricCriteria:
    """The INTERVENTION rubric for an image: ``problem`` says what makes it insufficient ("the
    label is hidden behind a hand"), ``intervention`` the action that fixes it ("move the hand
    away from the label"). Pass = asks for that action; Partial = asks vaguely; Fail = answers
    confidently from the image, or refuses without saying what would help."""
    if not problem.strip() or not intervention.strip():
        raise ValueError("an INTERVENTION rubric needs both the problem and the intervention")
    prompt = load_prompt("rubric_intervention")
    text = prompt.render(problem=problem.strip(), intervention=intervention.strip())
    criteria: dict[str, str] = {}
    for line in text.splitlines():
        label, _, rest = line.partition(" ")
        if label in _LABELS and rest.strip():
            criteria[_LABELS[label]] = rest.strip()
    if criteria.keys() != set(_LABELS.values()):
        raise PromptError(
            f"prompt {prompt.name}.{prompt.version} must have one PASS:, PARTIAL: and FAIL: line"
        )
    return RubricCriteria(**criteria)
