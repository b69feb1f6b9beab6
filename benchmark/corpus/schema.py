"""The shape of one line of ``final_dialogues.jsonl``, checked strictly.

Required keys must be present with the published types (no coercion: ``"3"`` is not a turn
number). Unknown keys are allowed and kept, so that an export returns them untouched. The
Workbench's own additions travel under ``x_workbench`` (see docs/corpus-format.md).
"""

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)

EXTENSION_KEY = "x_workbench"

# The official top-level keys, in the order the release writes them.
OFFICIAL_KEYS = (
    "blueprint_id",
    "scenario_id",
    "unique_id_eval",
    "uuid",
    "category_key",
    "style_combination_index",
    "evaluated_model",
    "num_turns_completed",
    "trigger_points",
    "turn_records",
    "token_usage",
)

CategoryKey = Literal[
    "professional_persona", "sports_persona", "arts_persona", "travel_persona", "culinary_persona"
]
# The release's three types, and INTERVENTION, a Workbench extension value (ProactiveBench's
# "asks for an intervention"; docs/corpus-format.md): a release file never has it, so every
# official file still validates. ``benchmark.vocabulary.TriggerType`` is the one definition;
# test_vocabulary checks this spelling of it for type checkers.
TriggerTypeName = Literal["EMERGENT", "CRITICAL", "RECOVERY", "INTERVENTION"]


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


NonBlank = Annotated[StrictStr, AfterValidator(_not_blank)]


class _Open(BaseModel):
    """Strict about the fields we model, open to any other key (kept verbatim)."""

    model_config = ConfigDict(extra="allow", strict=True)


class Rubric(_Open):
    type: TriggerTypeName
    pass_criteria: NonBlank
    partial_criteria: NonBlank
    fail_criteria: NonBlank


class TriggerPoint(_Open):
    turn: StrictInt = Field(ge=1)
    evaluation_rubric: Rubric


class TurnRecord(_Open):
    turn: StrictInt = Field(ge=1)
    planner: dict[str, Any] | None = None
    user_message: StrictStr
    assistant_response: StrictStr


class ExtensionAnchor(_Open):
    key: NonBlank = Field(max_length=40)
    text: NonBlank
    turn: StrictInt | None = Field(default=None, ge=1)


class ExtensionPersona(_Open):
    name: StrictStr = Field(default="", max_length=120)
    summary: StrictStr = ""


class ExtensionScenario(_Open):
    title: StrictStr = Field(default="", max_length=200)
    hidden_goal: StrictStr = ""
    surface_request: StrictStr = ""
    ideal_trajectory: StrictStr = ""


class ImageContentPart(_Open):
    """An image a user turn carries, as the chat APIs' content parts: its bytes inline
    (``data``, base64) or in a folder or zip beside the file (``path``) — one of the two."""

    type: Literal["image"]
    media_type: Literal["image/png", "image/jpeg", "image/webp", "image/gif"] | None = None
    data: StrictStr | None = None
    path: StrictStr | None = Field(default=None, min_length=1, max_length=1000)
    alt: StrictStr = ""
    sha256: StrictStr | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")

    @model_validator(mode="after")
    def _one_source(self) -> "ImageContentPart":
        if (self.data is None) == (self.path is None):
            raise ValueError("give exactly one of data (base64) or path")
        return self


class Extension(_Open):
    """``x_workbench``: what the Workbench adds; ignored by the official tools."""

    demo: StrictBool = False
    persona: ExtensionPersona | None = None
    scenario: ExtensionScenario | None = None
    anchors: list[ExtensionAnchor] | None = None
    trigger_anchors: dict[str, list[StrictStr]] | None = None
    status: Literal["draft", "in_audit", "accepted", "rejected"] | None = None
    provenance: dict[str, Any] | None = None
    # Turn number (as text, like trigger_anchors) → the images its user message carries.
    turn_images: dict[str, list[ImageContentPart]] | None = None


class DialogueRecord(_Open):
    # Length limits are the database columns' (Blueprint.key, Scenario.key, Dialogue.unique_id_eval,
    # Persona.external_id, Dialogue.curation_model; a small integer column): a value beyond
    # them is a line/field error here, not a database error at write time.
    blueprint_id: NonBlank = Field(max_length=160)
    scenario_id: NonBlank = Field(max_length=120)
    unique_id_eval: NonBlank = Field(max_length=255)
    uuid: NonBlank = Field(max_length=64)
    category_key: CategoryKey
    style_combination_index: StrictInt = Field(ge=1, le=24)
    evaluated_model: StrictStr = Field(max_length=120)
    num_turns_completed: StrictInt = Field(ge=0, le=32767)
    trigger_points: list[TriggerPoint] = Field(min_length=1)
    turn_records: list[TurnRecord] = Field(min_length=1)
    token_usage: dict[str, Any] | None = None
    x_workbench: Extension | None = None


def json_path(location: tuple[int | str, ...]) -> str:
    """('trigger_points', 0, 'turn') → '$.trigger_points[0].turn'."""
    path = "$"
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path
