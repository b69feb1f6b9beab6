"""The Planner's structured output, parsed strictly.

The Planner answers with one JSON object (optionally inside a single ```json fence, nothing
around it). Anything else — prose around the JSON, a missing or extra key, a string where a
boolean belongs — is rejected with a message the loop feeds back to the Planner, so it can
correct itself. No coercion: a decision that has to be guessed at is not a decision.

What the schema checks is what can be checked from the reply alone. Whether the decision fits
the dialogue (anchor exists, not disclosed before, CRITICAL has two earlier anchors, …) depends
on the dialogue's state and is checked by the loop.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    model_validator,
)

from benchmark.corpus.schema import NonBlank, TriggerTypeName, json_path

AnchorIndex = Annotated[StrictInt, Field(ge=0)]

_FENCED = re.compile(r"\A```(?:json)?[ \t]*\n(?P<body>.*?)\n?```\Z", re.DOTALL)


class PlannerReplyError(ValueError):
    """The Planner's reply is not a valid decision. The message says why, for the Planner."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class TacticalOrder(_Strict):
    intent: NonBlank
    content_payload: list[NonBlank] = Field(min_length=1)
    behavioral_directive: NonBlank


class PlannerRubric(_Strict):
    pass_criteria: NonBlank
    partial_criteria: NonBlank
    fail_criteria: NonBlank


class PlannerDecision(_Strict):
    """One turn's decision. Every key is required (null where the Planner means "none")."""

    tactical_order: TacticalOrder
    disclose_anchor: AnchorIndex | None
    is_trigger_point: StrictBool
    trigger_type: TriggerTypeName | None
    evaluation_rubric: PlannerRubric | None
    referenced_anchors: list[AnchorIndex]
    stop_conversation: StrictBool

    @model_validator(mode="after")
    def _trigger_fields_agree(self) -> Self:
        if self.is_trigger_point:
            if self.trigger_type is None or self.evaluation_rubric is None:
                raise ValueError(
                    "a trigger point needs trigger_type and evaluation_rubric (not null)"
                )
        elif (
            self.trigger_type is not None
            or self.evaluation_rubric is not None
            or self.referenced_anchors
        ):
            raise ValueError(
                "is_trigger_point is false, so trigger_type and evaluation_rubric must be null "
                "and referenced_anchors empty"
            )
        return self


def parse_planner_reply(text: str) -> PlannerDecision:
    """The decision in ``text``, or PlannerReplyError listing every problem found."""
    body = text.strip()
    fenced = _FENCED.match(body)
    if fenced:
        body = fenced["body"]
    try:
        raw = json.loads(body)
    except json.JSONDecodeError as exc:
        raise PlannerReplyError(
            f"the reply is not a JSON object: {exc.msg} (line {exc.lineno}, column {exc.colno}); "
            "reply with the JSON object only"
        ) from None
    if not isinstance(raw, dict):
        raise PlannerReplyError(f"the reply must be a JSON object, not {type(raw).__name__}")
    try:
        return PlannerDecision.model_validate(raw)
    except ValidationError as exc:
        problems = [
            f"{json_path(item['loc'])}: {item['msg']}" for item in exc.errors(include_url=False)
        ]
        raise PlannerReplyError("; ".join(problems)) from None
