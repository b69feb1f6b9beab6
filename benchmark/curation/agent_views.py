"""What each curation agent may see, as typed, frozen views.

Information isolation (SPEC 2.2) holds by construction: an agent's chat messages are built only
from its view, and each view simply has no field for what its agent must not see.

- ``PlannerView``: persona, scenario (hidden goal, surface request, anchors, ideal trajectory),
  the blueprint's roadmap, the conversation, disclosures, triggers so far. No style: the rubric
  must not depend on how the user talks (threat T1).
- ``UserAgentView``: this turn's order (with at most the one anchor to disclose), persona, style,
  the conversation. No hidden goal, no other anchors, no rubric, no trigger schedule (T2, T4).
- ``AssistantView``: the conversation and the new user message, with the images the user
  messages carry, nothing else (T2, T3).

The cards (persona, scenario, style, roadmap) are built from database rows once, so the loop
itself never touches the database. Prompts are rendered strictly (see prompts.py): a view can
hand its prompt only the fields the prompt names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from benchmark.corpus.styles import TRAITS
from benchmark.curation.prompts import load_prompt
from benchmark.curation.rubrics import intervention_rubric
from benchmark.models import PHASE_WINDOWS, Blueprint, CommunicationStyle, Persona, Scenario
from benchmark.providers.base import ChatMessage, ImagePart

NO_MESSAGES_YET = "(no messages yet: this turn opens the conversation)"


# --- Cards: the pieces of the database an agent may be shown ---------------------------------


@dataclass(frozen=True)
class PersonaCard:
    name: str
    summary: str
    attributes: tuple[tuple[str, str], ...]

    @classmethod
    def from_model(cls, persona: Persona) -> PersonaCard:
        attributes = persona.attributes if isinstance(persona.attributes, dict) else {}
        return cls(
            name=persona.name,
            summary=persona.summary,
            attributes=tuple((str(key), _plain(value)) for key, value in attributes.items()),
        )

    def render(self) -> str:
        lines = [f"Name: {self.name or '(not given)'}"]
        if self.summary:
            lines.append(self.summary)
        lines += [f"- {key}: {value}" for key, value in self.attributes]
        return "\n".join(lines)


@dataclass(frozen=True)
class ScenarioImage:
    """An image the scenario shows the assistant with a user turn, as the Planner knows it: a
    description (the Planner never sees the image itself), and, when the image is insufficient
    for the task, what is wrong with it and the user's action that would fix it."""

    turn: int
    description: str
    problem: str = ""
    """Empty when the image suffices."""
    intervention: str = ""

    @property
    def insufficient(self) -> bool:
        return bool(self.problem.strip())

    def render(self) -> str:
        line = f"- turn {self.turn}: {self.description}"
        if not self.insufficient:
            return line + " (sufficient: not an INTERVENTION trigger)"
        rubric = intervention_rubric(problem=self.problem, intervention=self.intervention)
        indented = rubric.render().replace("\n", "\n  ")
        return (
            f"{line}\n  Insufficient: {self.problem}. The action that fixes it: "
            f"{self.intervention}.\n  Rubric if this turn is an INTERVENTION trigger:\n  {indented}"
        )


@dataclass(frozen=True)
class ScenarioCard:
    domain: str
    title: str
    hidden_goal: str
    surface_request: str
    ideal_trajectory: str
    anchors: tuple[str, ...]
    """The scenario's anchors; the Planner and the loop refer to them by position."""
    images: tuple[ScenarioImage, ...] = ()
    """The images shown with user turns; an insufficient one allows an INTERVENTION trigger."""

    def intervention_turns(self) -> list[int]:
        return sorted({image.turn for image in self.images if image.insufficient})

    @classmethod
    def from_model(cls, scenario: Scenario) -> ScenarioCard:
        return cls(
            domain=scenario.domain.name,
            title=scenario.title,
            hidden_goal=scenario.hidden_goal,
            surface_request=scenario.surface_request,
            ideal_trajectory=scenario.ideal_trajectory,
            anchors=tuple(_anchor_text(item) for item in scenario.anchors or []),
            images=tuple(
                ScenarioImage(
                    turn=image.turn,
                    description=image.description,
                    problem=image.problem,
                    intervention=image.intervention,
                )
                for image in scenario.turn_images.all()
            ),
        )


@dataclass(frozen=True)
class RoadmapCard:
    """A blueprint's plan, minus everything about style: the blueprint exists per style, and
    the Planner must not learn the style through it (its key and ``style_guardrails`` are left
    out, and so is any roadmap key that mentions style)."""

    strategic_overview: str
    steps: tuple[str, ...]

    @classmethod
    def from_model(cls, blueprint: Blueprint) -> RoadmapCard | None:
        steps = tuple(
            json.dumps(
                {k: v for k, v in step.items() if "style" not in k.lower()}, ensure_ascii=False
            )
            if isinstance(step, dict)
            else _plain(step)
            for step in blueprint.roadmap or []
        )
        if not steps and not blueprint.strategic_overview:
            return None
        return cls(strategic_overview=blueprint.strategic_overview, steps=steps)

    def render(self) -> str:
        lines = [self.strategic_overview] if self.strategic_overview else []
        lines += [f"- {step}" for step in self.steps]
        return "\n".join(lines)


@dataclass(frozen=True)
class StyleCard:
    description: str
    min_words: int
    max_words: int
    high_traits: frozenset[str]
    """Field names of the CSI traits that are high (``benchmark.corpus.styles.TRAITS``)."""

    @classmethod
    def from_model(cls, style: CommunicationStyle) -> StyleCard:
        return cls(
            description=style.description,
            min_words=style.min_words,
            max_words=style.max_words,
            high_traits=frozenset(field for _, field, _ in TRAITS if getattr(style, field)),
        )

    def render_traits(self) -> str:
        return "\n".join(
            f"- {field.replace('_', ' ')}: {'high' if field in self.high_traits else 'low'}"
            for _, field, _ in TRAITS
        )


# --- The dialogue's state, as the views show it -----------------------------------------------


@dataclass(frozen=True)
class Exchange:
    user: str
    assistant: str
    images: tuple[ImagePart, ...] = ()
    """The images the user message carried (only the Assistant is sent them)."""


@dataclass(frozen=True)
class Disclosure:
    anchor: int
    turn: int


@dataclass(frozen=True)
class TriggerSoFar:
    turn: int
    type: str
    anchors: tuple[int, ...]


@dataclass(frozen=True)
class UserOrder:
    """The Planner's order as the User Agent receives it: the rubric, the trigger decision and
    the anchor numbering stay behind; only the text of the one anchor to disclose comes along."""

    intent: str
    content_payload: tuple[str, ...]
    behavioral_directive: str
    anchor: str | None


def render_transcript(conversation: tuple[Exchange, ...], *, user_label: str) -> str:
    if not conversation:
        return NO_MESSAGES_YET
    blocks = [
        f"[Turn {number}]\n{user_label}: {exchange.user}\nASSISTANT: {exchange.assistant}"
        for number, exchange in enumerate(conversation, start=1)
    ]
    return "\n\n".join(blocks)


# --- The views ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannerView:
    persona: PersonaCard
    scenario: ScenarioCard
    roadmap: RoadmapCard | None
    conversation: tuple[Exchange, ...]
    disclosures: tuple[Disclosure, ...]
    triggers: tuple[TriggerSoFar, ...]
    turn: int
    max_turns: int

    def messages(self) -> tuple[ChatMessage, ...]:
        text = load_prompt("planner").render(
            persona=self.persona.render(),
            domain=self.scenario.domain,
            scenario_title=self.scenario.title or "(untitled)",
            surface_request=self.scenario.surface_request or "(not given)",
            hidden_goal=self.scenario.hidden_goal or "(not given)",
            ideal_trajectory=self.scenario.ideal_trajectory or "(not given)",
            anchors=self._render_anchors(),
            roadmap=self.roadmap.render() if self.roadmap else "(no blueprint: plan freely)",
            images="\n".join(image.render() for image in self.scenario.images)
            or "(none: this scenario shows no images, so no turn can be an INTERVENTION trigger)",
            conversation=render_transcript(self.conversation, user_label="USER"),
            triggers="\n".join(
                f"- turn {t.turn}: {t.type}, relying on anchors "
                + ", ".join(f"[{i}]" for i in t.anchors)
                for t in self.triggers
            )
            or "(none yet)",
            turn=self.turn,
            max_turns=self.max_turns,
            phase=self._render_phase(),
            still_needed=", ".join(
                kind for kind in PHASE_WINDOWS if kind not in {t.type for t in self.triggers}
            )
            or "none (every type has a trigger)",
        )
        return (ChatMessage("user", text),)

    def _render_anchors(self) -> str:
        disclosed_at = {d.anchor: d.turn for d in self.disclosures}
        return "\n".join(
            f"[{index}] {text} ("
            + (
                f"disclosed at turn {disclosed_at[index]}"
                if index in disclosed_at
                else "not yet disclosed"
            )
            + ")"
            for index, text in enumerate(self.scenario.anchors)
        )

    def _render_phase(self) -> str:
        for kind, (low, high) in PHASE_WINDOWS.items():
            if low <= self.turn <= high:
                return f"It falls in the {kind} window (turns {low}-{high})."
        return "It falls outside every trigger window."


@dataclass(frozen=True)
class UserAgentView:
    order: UserOrder
    persona: PersonaCard
    style: StyleCard
    conversation: tuple[Exchange, ...]

    def messages(self) -> tuple[ChatMessage, ...]:
        text = load_prompt("user_agent").render(
            persona=self.persona.render(),
            style_description=self.style.description,
            style_traits=self.style.render_traits(),
            min_words=self.style.min_words,
            max_words=self.style.max_words,
            conversation=render_transcript(self.conversation, user_label="YOU"),
            intent=self.order.intent,
            content_payload="\n".join(f"- {item}" for item in self.order.content_payload),
            behavioral_directive=self.order.behavioral_directive,
            anchor=self.order.anchor or "none: mention no new fact about your situation",
        )
        return (ChatMessage("user", text),)


@dataclass(frozen=True)
class AssistantView:
    """Each user message goes with the images the scenario shows on its turn, as a dialogue's
    turn images go to a model under evaluation."""

    conversation: tuple[Exchange, ...]
    user_message: str
    user_images: tuple[ImagePart, ...] = ()

    def messages(self) -> tuple[ChatMessage, ...]:
        history: list[ChatMessage] = []
        for exchange in self.conversation:
            history += [
                ChatMessage("user", exchange.user, exchange.images),
                ChatMessage("assistant", exchange.assistant),
            ]
        return (
            ChatMessage("system", load_prompt("assistant").render()),
            *history,
            ChatMessage("user", self.user_message, self.user_images),
        )


# --- Helpers -----------------------------------------------------------------------------------


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _anchor_text(item: Any) -> str:
    """Scenario anchors come from tasks.jsonl as strings, or as objects with a ``text``."""
    if isinstance(item, dict) and "text" in item:
        return _plain(item["text"])
    return _plain(item)
