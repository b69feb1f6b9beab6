"""A scripted ChatProvider and the scripted conversation the curation tests run.

``ScriptedProvider`` answers each request with the next entry of its script (a string, or a
function of the request) and records every ``ChatRequest``, so tests can inspect exactly what
each agent was sent. One provider per agent gives per-agent scripts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from benchmark.curation.services import AgentProviders
from benchmark.models import CommunicationStyle, Domain, ModelEndpoint, Persona, Scenario
from benchmark.providers.base import ChatRequest, ChatResult

Reply = str | Callable[[ChatRequest], str]


class ScriptedProvider:
    def __init__(
        self, script: Sequence[Reply], *, name: str, journal: list[str] | None = None
    ) -> None:
        self.script = list(script)
        self.name = name
        self.requests: list[ChatRequest] = []
        self.journal = journal if journal is not None else []

    def complete(self, request: ChatRequest) -> ChatResult:
        self.requests.append(request)
        self.journal.append(self.name)
        if len(self.requests) > len(self.script):
            raise AssertionError(f"{self.name}: script exhausted after {len(self.script)} replies")
        entry = self.script[len(self.requests) - 1]
        text = entry(request) if callable(entry) else entry
        return ChatResult(
            text=text,
            input_tokens=sum(len(m.content.split()) for m in request.messages),
            output_tokens=len(text.split()),
        )

    def texts(self) -> list[str]:
        """Each request's payload as one string: what the agent could possibly have read."""
        return [
            "\n".join([r.model, *(m["content"] for m in r.payload()["messages"])])
            for r in self.requests
        ]


# --- The scenario ---------------------------------------------------------------------------

PERSONA_UUID = "c0ffee00c0ffee00c0ffee00c0ffee00"
PERSONA_NAME = "Renata Vasquez"
PERSONA_SUMMARY = (
    "41, project lead at a thirty-person digital agency in Columbus, Ohio, who runs discovery "
    "workshops for financial-services clients."
)
HIDDEN_GOAL = (
    "Leave the workshop with a budget-approved phase-one scope that the remote branch managers "
    "genuinely helped shape."
)
ANCHORS = [
    "Marcus, the CFO who signs the budget, leaves the workshop at 10:15 for a board call.",
    "Five of the fourteen attendees are branch managers joining remotely on Teams.",
    "Prioritisation is a dot vote with 22 feature cards printed on A4 and physical sticky dots.",
    "The boardroom opens only at 9:00, leaving 30 minutes of setup with Priya, a junior designer.",
]
STYLE_INDEX = 12  # PQ: precise, questioning, 5–25 words


def make_scenario(
    *, persona_uuid: str = PERSONA_UUID, key: str = "TEST_PROFESSIONAL_01", anchors=None
) -> Scenario:
    persona = Persona.objects.create(
        external_id=persona_uuid,
        name=PERSONA_NAME,
        summary=PERSONA_SUMMARY,
        attributes={"city": "Columbus, Ohio"},
    )
    return Scenario.objects.create(
        key=key,
        domain=Domain.objects.get(key="professional_persona"),
        persona=persona,
        title="Discovery workshop for a credit union's member app",
        hidden_goal=HIDDEN_GOAL,
        surface_request="Draft a half-day workshop agenda, its activities and the invite.",
        ideal_trajectory=(
            "Sees that the CFO's early exit forces budget decisions to the front; connects the "
            "remote attendees with the physical vote; closes with a pre-workshop checklist."
        ),
        anchors=ANCHORS if anchors is None else anchors,
    )


def style() -> CommunicationStyle:
    return CommunicationStyle.objects.get(index=STYLE_INDEX)


def make_endpoints() -> tuple[ModelEndpoint, ModelEndpoint, ModelEndpoint]:
    return tuple(  # type: ignore[return-value]
        ModelEndpoint.objects.create(
            name=name, display_name=name, provider="replay", model_name=f"{name}-model"
        )
        for name in ("planner-ep", "user-ep", "assistant-ep")
    )


# --- The scripts ----------------------------------------------------------------------------

RUBRICS = {
    "EMERGENT": {
        "pass_criteria": "Front-loads the decisions that need the departing signatory.",
        "partial_criteria": "Notes the early departure but leaves sign-off late.",
        "fail_criteria": "A generic agenda that ignores the departure.",
    },
    "CRITICAL": {
        "pass_criteria": "Connects remote attendees with the physical vote and proposes a channel.",
        "partial_criteria": "Says remote people should vote somehow, without a channel.",
        "fail_criteria": "Room-only voting rules.",
    },
    "RECOVERY": {
        "pass_criteria": "Offers a pre-workshop checklist tied to the CFO timing and setup window.",
        "partial_criteria": "Forward-looking advice only loosely tied to this workshop.",
        "fail_criteria": "A generic closing; boilerplate always fails.",
    },
}


def decision(
    intent: str = "Move the planning forward.",
    *,
    payload: Sequence[str] = ("Ask for the next piece of the workshop plan.",),
    directive: str = "Ask only for that piece.",
    disclose: int | list[int] | None = None,
    trigger: str | None = None,
    refs: Sequence[int] = (),
    stop: bool = False,
    fenced: bool = False,
) -> str:
    """One Planner reply, as the Planner would write it."""
    text = json.dumps(
        {
            "tactical_order": {
                "intent": intent,
                "content_payload": list(payload),
                "behavioral_directive": directive,
            },
            "disclose_anchor": disclose,
            "is_trigger_point": trigger is not None,
            "trigger_type": trigger,
            "evaluation_rubric": RUBRICS[trigger] if trigger else None,
            "referenced_anchors": list(refs),
            "stop_conversation": stop,
        },
        indent=2,
    )
    return f"```json\n{text}\n```" if fenced else text


PLANNER = [
    decision(
        "Open with the surface request for an agenda skeleton.",
        payload=("Ask for a half-day agenda skeleton for the credit union workshop.",),
        disclose=0,
        trigger="EMERGENT",
        refs=[0],
    ),
    decision("React to the skeleton and ask for an icebreaker.", disclose=1),
    decision("Ask how to run the prioritisation.", disclose=2, fenced=True),
    decision("Ask how long the voting block should run.", trigger="CRITICAL", refs=[1, 2]),
    decision("Ask for a setup checklist.", disclose=3),
    decision("Ask to tighten the invite email."),
    decision("Approve the invite."),
    decision("Wrap up: everything is final.", trigger="RECOVERY", refs=[0, 3], stop=True),
]

USER = [
    "Need a half-day workshop agenda for a credit union client. "
    "Marcus, our CFO, leaves at 10:15 for a board call.",
    "Agenda looks fine. Five of the fourteen are branch managers joining on Teams. "
    "Icebreaker ideas?",
    "Prioritisation will be a dot vote: 22 feature cards printed on A4, physical sticky dots. "
    "Rules?",
    "How long should the voting block run, and who explains the rules?",
    "Room opens only at 9:00, so Priya, our junior designer, gets 30 minutes of setup. Checklist?",
    "Can you tighten the invite email to five sentences?",
    "Invite looks good. Anything missing from it?",
    "Perfect, agenda and invite are final. Sending both tonight, thanks!",
]

ASSISTANT = [f"Reply {n}: here is what I suggest.\n\n- step one\n- step two" for n in range(1, 9)]


def providers(
    planner: Sequence[Reply] = PLANNER,
    user: Sequence[Reply] = USER,
    assistant: Sequence[Reply] = ASSISTANT,
    journal: list[str] | None = None,
) -> AgentProviders:
    journal = [] if journal is None else journal
    return AgentProviders(
        planner=ScriptedProvider(planner, name="planner", journal=journal),
        user_agent=ScriptedProvider(user, name="user_agent", journal=journal),
        assistant=ScriptedProvider(assistant, name="assistant", journal=journal),
    )
