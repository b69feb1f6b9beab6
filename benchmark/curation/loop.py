"""The three-agent curation loop: Planner, User Agent and cold-start Assistant write one dialogue.

Each turn runs in this order, which is what makes the rubric prospective:

1. The **Planner** sees the scenario and the conversation so far and decides the turn: the order
   for the user, at most one new anchor to disclose, and — if the turn is a trigger point — the
   trigger type and its rubric. All of this is fixed before the assistant has said anything.
2. The **User Agent** turns the order into the user's message, in the persona's voice and style.
3. The **Assistant** answers from the conversation alone (cold start).

Every agent sees only its view (views.py). Replies are checked, and a rejected reply is sent
back to its agent with the reasons, at most ``max_regenerations`` times; after that the whole
dialogue fails with a ``CurationError`` naming the turn and the rule, and nothing is returned:

- Planner: the JSON schema (schema.py); the anchor exists and was not disclosed before; the
  order does not reveal a second undisclosed anchor; a trigger names the disclosed anchors its
  rubric relies on; a CRITICAL trigger relies on anchors from at least two different earlier
  turns; no stop before every trigger type has a trigger.
- User Agent: the style's word bounds (``len(text.split())``), and no undisclosed anchor in the
  message (the leak heuristic below).

The loop touches no database and no vendor SDK: it talks to providers (``CompletesChat``: their
``complete`` alone) and returns one release-format record, which the service saves through the
corpus importer. The response cache and the call records are a provider in front of the real one
(``calls.py``), so the loop neither knows of them nor can make a call that escapes them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from django.utils import timezone

from benchmark.corpus.images import embedded_part
from benchmark.corpus.styles import word_count
from benchmark.curation.agent_views import (
    AssistantView,
    Disclosure,
    Exchange,
    PersonaCard,
    PlannerView,
    RoadmapCard,
    ScenarioCard,
    StyleCard,
    TriggerSoFar,
    UserAgentView,
    UserOrder,
)
from benchmark.curation.prompts import load_prompt
from benchmark.curation.schema import PlannerDecision, PlannerReplyError, parse_planner_reply
from benchmark.models import PHASE_WINDOWS, DialogueStatus, TriggerType
from benchmark.providers.base import (
    ChatMessage,
    ChatRequest,
    ChatResult,
    CompletesChat,
    ImagePart,
    ReplayKey,
)

# The agents, which are also the names of their prompt files.
AGENTS = ("planner", "user_agent", "assistant")


class CurationError(Exception):
    """The dialogue could not be curated; nothing was (or may be) saved."""

    def __init__(self, message: str, *, turn: int | None = None) -> None:
        super().__init__(message)
        self.turn = turn


@dataclass(frozen=True)
class CurationSpec:
    """Everything one curation needs, read from the database once (services.curation_spec_for).

    The identifiers are the release record's; the cards are what the agents may be shown."""

    persona_uuid: str
    scenario_key: str
    category_key: str
    blueprint_id: str
    style_index: int
    persona: PersonaCard
    scenario: ScenarioCard
    style: StyleCard
    roadmap: RoadmapCard | None
    turn_images: Mapping[int, tuple[ImagePart, ...]] = field(default_factory=dict)
    """Turn number → the images its user message carries (the scenario's, with their bytes):
    sent to the Assistant with that message, and saved with the dialogue's turn."""

    @property
    def unique_id_eval(self) -> str:
        return f"{self.blueprint_id}__style{self.style_index}__{self.persona_uuid}"


def curate_dialogue(
    spec: CurationSpec,
    *,
    planner: CompletesChat,
    user_agent: CompletesChat,
    assistant: CompletesChat,
    planner_model: str,
    user_model: str,
    assistant_model: str,
    max_turns: int = 10,
    max_regenerations: int = 3,
    on_turn: Callable[[int], None] | None = None,
) -> dict:
    """Run the loop and return one dialogue in the release format plus ``x_workbench``.

    ``on_turn(n)``, when given, is called before turn ``n`` starts (progress reporting); an
    exception it raises stops the loop there and passes through, and nothing is returned.

    Raises CurationError when a check still fails after ``max_regenerations`` re-asks, or when
    the dialogue ends without a trigger of each type; ProviderError passes through untouched
    (the caller decides whether a transient failure is worth a retry of the whole dialogue)."""
    if max_turns < 1 or max_regenerations < 0:
        raise ValueError("max_turns must be at least 1 and max_regenerations at least 0")
    if len(spec.scenario.anchors) < 2:
        raise CurationError(
            f"scenario {spec.scenario_key} has {len(spec.scenario.anchors)} anchor(s); "
            "curation needs at least two (a CRITICAL trigger synthesises two)"
        )
    run = _Curation(
        spec=spec,
        agents={
            "planner": (planner, planner_model),
            "user_agent": (user_agent, user_model),
            "assistant": (assistant, assistant_model),
        },
        max_turns=max_turns,
        max_regenerations=max_regenerations,
        on_turn=on_turn,
    )
    return run.run()


# --- Anchor leak heuristic ---------------------------------------------------------------------
#
# Does a text reveal an anchor that is not disclosed yet? An anchor is a short concrete fact
# ("five of the fourteen attendees are branch managers joining remotely on Teams"); a text that
# reveals it reuses its content words. So: take the anchor's *distinctive* tokens — content words
# (4+ letters, or anything with a digit), minus stopwords, minus every token already visible
# this turn (the conversation, the disclosed anchors, this turn's order) — and call it a leak
# when the text contains at least half of them, and at least two. Anchors with fewer than two
# distinctive tokens cannot be told apart from what is already said and are never flagged.
# Tokens are case-folded and a final "s" is dropped from words longer than four letters, so
# "Managers" matches "manager". The heuristic misses paraphrases with new words (an audit finds
# those), and errs towards false alarms only when a text repeats most of an anchor's rare words.

LEAK_SHARE = 0.5
LEAK_MIN_TOKENS = 2

_WORD = re.compile(r"[^\W_]+")
_STOPWORDS = frozenset(
    """
    about above after again also always among another anyone anything around because been
    before being below between both could does doing done down during each either else even
    ever every from further have having here into itself just know like made make many maybe
    more most much must need needs only other over really same should since some still such
    than that their them then there these they thing things this those through very want
    well were what when where which while will with without would your yours
    """.split()
)


def _tokens(text: str) -> set[str]:
    tokens = set()
    for word in _WORD.findall(text.casefold()):
        if word in _STOPWORDS or not (len(word) >= 4 or any(c.isdigit() for c in word)):
            continue
        tokens.add(word[:-1] if len(word) > 4 and word.endswith("s") else word)
    return tokens


def leaked_tokens(text: str, anchor: str, visible: set[str]) -> set[str]:
    """The anchor's distinctive tokens found in ``text`` if they amount to a leak, else empty.

    ``visible`` is the token set of everything already visible this turn (``_tokens``)."""
    distinctive = _tokens(anchor) - visible
    if len(distinctive) < LEAK_MIN_TOKENS:
        return set()
    shared = distinctive & _tokens(text)
    needed = max(LEAK_MIN_TOKENS, math.ceil(LEAK_SHARE * len(distinctive)))
    return shared if len(shared) >= needed else set()


# --- The loop ----------------------------------------------------------------------------------


@dataclass
class _Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    def add(self, result: ChatResult) -> None:
        self.prompt_tokens += result.input_tokens
        self.completion_tokens += result.output_tokens
        self.calls += 1


def _rejection(problems: list[str]) -> ChatMessage:
    return ChatMessage("user", "Not accepted:\n" + "\n".join(f"- {p}" for p in problems))


def _order_text(decision: PlannerDecision) -> str:
    order = decision.tactical_order
    return "\n".join([order.intent, *order.content_payload, order.behavioral_directive])


@dataclass
class _Curation:
    spec: CurationSpec
    agents: dict[str, tuple[CompletesChat, str]]
    max_turns: int
    max_regenerations: int
    on_turn: Callable[[int], None] | None = None
    exchanges: list[Exchange] = field(default_factory=list)
    disclosed: dict[int, int] = field(default_factory=dict)  # anchor index → turn
    triggers: list[TriggerSoFar] = field(default_factory=list)
    trigger_points: list[dict] = field(default_factory=list)
    turn_records: list[dict] = field(default_factory=list)
    usage: dict[str, _Usage] = field(default_factory=lambda: {a: _Usage() for a in AGENTS})

    def run(self) -> dict:
        for turn in range(1, self.max_turns + 1):
            if self.on_turn is not None:
                self.on_turn(turn)
            decision = self._plan(turn)
            user_message = self._write_user_message(turn, decision)
            reply = self._reply(turn, user_message)
            self._record_turn(turn, decision, user_message, reply)
            if decision.stop_conversation:
                break
        missing = self._missing_types()
        if missing:
            raise CurationError(
                f"the dialogue ended after {len(self.turn_records)} turn(s) without a "
                f"{' or '.join(missing)} trigger; every dialogue needs a trigger of each type"
            )
        return self._release_record()

    # Calling the agents.

    def _ask(self, agent: str, turn: int, messages: tuple[ChatMessage, ...]) -> str:
        provider, model = self.agents[agent]
        # The key lets the replay provider answer from recordings (offline curation); every
        # re-ask of the turn carries the same key, so a recording must pass the checks as is.
        key = ReplayKey(
            kind="curation",
            unique_id_eval=self.spec.unique_id_eval,
            turn=turn,
            model=model,
            condition="",
            agent=agent,
        )
        result = provider.complete(ChatRequest(model=model, messages=messages, replay_key=key))
        self.usage[agent].add(result)
        return result.text

    def _plan(self, turn: int) -> PlannerDecision:
        view = PlannerView(
            persona=self.spec.persona,
            scenario=self.spec.scenario,
            roadmap=self.spec.roadmap,
            conversation=tuple(self.exchanges),
            disclosures=tuple(Disclosure(a, t) for a, t in self.disclosed.items()),
            triggers=tuple(self.triggers),
            turn=turn,
            max_turns=self.max_turns,
        )
        base = view.messages()
        messages = base
        problems: list[str] = []
        for _ in range(self.max_regenerations + 1):
            text = self._ask("planner", turn, messages)
            try:
                decision = parse_planner_reply(text)
            except PlannerReplyError as exc:
                problems = [str(exc)]
            else:
                problems = self._decision_problems(turn, decision)
                if not problems:
                    return decision
            messages = (*base, ChatMessage("assistant", text), _rejection(problems))
        raise CurationError(
            f"turn {turn}: the Planner gave no acceptable decision in "
            f"{self.max_regenerations + 1} attempt(s); last problem(s): {'; '.join(problems)}",
            turn=turn,
        )

    def _write_user_message(self, turn: int, decision: PlannerDecision) -> str:
        anchors = self.spec.scenario.anchors
        new = decision.disclose_anchor
        order = decision.tactical_order
        view = UserAgentView(
            order=UserOrder(
                intent=order.intent,
                content_payload=tuple(order.content_payload),
                behavioral_directive=order.behavioral_directive,
                anchor=anchors[new] if new is not None else None,
            ),
            persona=self.spec.persona,
            style=self.spec.style,
            conversation=tuple(self.exchanges),
        )
        visible_anchors = {*self.disclosed, *([new] if new is not None else [])}
        visible = self._visible_tokens(visible_anchors, extra=_order_text(decision))
        style = view.style
        base = view.messages()
        messages = base
        problems: list[str] = []
        for _ in range(self.max_regenerations + 1):
            text = self._ask("user_agent", turn, messages).strip()
            problems = []
            words = word_count(text)
            if not style.min_words <= words <= style.max_words:
                problems.append(
                    f"the message has {words} word{'' if words == 1 else 's'}; it must have "
                    f"between {style.min_words} and {style.max_words} words"
                )
            leaked: set[str] = set()
            for index, anchor in enumerate(anchors):
                if index not in visible_anchors:
                    leaked |= leaked_tokens(text, anchor, visible)
            if leaked:
                problems.append(
                    "the message brings up details that are not for this turn ("
                    + ", ".join(f'"{token}"' for token in sorted(leaked))
                    + "); leave them out"
                )
            if not problems:
                return text
            messages = (*base, ChatMessage("assistant", text), _rejection(problems))
        raise CurationError(
            f"turn {turn}: the User Agent gave no acceptable message in "
            f"{self.max_regenerations + 1} attempt(s) (style {self.spec.style_index} allows "
            f"{style.min_words}-{style.max_words} words); last problem(s): {'; '.join(problems)}",
            turn=turn,
        )

    def _reply(self, turn: int, user_message: str) -> str:
        view = AssistantView(
            conversation=tuple(self.exchanges),
            user_message=user_message,
            user_images=self.spec.turn_images.get(turn, ()),
        )
        text = self._ask("assistant", turn, view.messages())
        if not text.strip():
            raise CurationError(f"turn {turn}: the Assistant returned an empty reply", turn=turn)
        return text

    # Checking the Planner's decision against the dialogue so far.

    def _decision_problems(self, turn: int, decision: PlannerDecision) -> list[str]:
        anchors = self.spec.scenario.anchors
        problems: list[str] = []
        visible = dict(self.disclosed)
        new = decision.disclose_anchor
        if new is not None:
            if new >= len(anchors):
                problems.append(
                    f"disclose_anchor {new} does not exist; anchors are numbered "
                    f"0-{len(anchors) - 1}"
                )
            elif new in self.disclosed:
                problems.append(
                    f"anchor [{new}] was already disclosed at turn {self.disclosed[new]}; "
                    "disclose a new anchor or null"
                )
            else:
                visible[new] = turn
        order_tokens = self._visible_tokens(set(visible))
        order_text = _order_text(decision)
        for index, anchor in enumerate(anchors):
            if index not in visible and leaked_tokens(order_text, anchor, order_tokens):
                problems.append(
                    f"the tactical order also reveals anchor [{index}], which is not disclosed "
                    "yet; a turn discloses at most one new anchor (the one in disclose_anchor)"
                )
        if decision.is_trigger_point:
            problems += self._trigger_problems(turn, decision, visible)
        if decision.stop_conversation and turn < self.max_turns:
            missing = self._missing_types(also=decision.trigger_type)
            if missing:
                problems.append(
                    f"stop_conversation is true, but the dialogue has no {' or '.join(missing)} "
                    "trigger yet; continue the conversation"
                )
        return problems

    def _trigger_problems(
        self, turn: int, decision: PlannerDecision, visible: dict[int, int]
    ) -> list[str]:
        problems = []
        referenced = list(dict.fromkeys(decision.referenced_anchors))
        if decision.trigger_type == TriggerType.INTERVENTION:
            allowed = self.spec.scenario.intervention_turns()
            if turn not in allowed:
                problems.append(
                    f"an INTERVENTION trigger needs an insufficient image on its turn; turn {turn} "
                    "has none ("
                    + (
                        f"turns with one: {', '.join(map(str, allowed))}"
                        if allowed
                        else "this scenario has no insufficient image"
                    )
                    + ")"
                )
        elif not referenced:
            problems.append(
                "a trigger point must list the anchors its rubric relies on in referenced_anchors"
            )
        unknown = [i for i in referenced if i not in visible]
        if unknown:
            problems.append(
                "referenced_anchors "
                + ", ".join(f"[{i}]" for i in unknown)
                + f" are not disclosed by turn {turn}; a rubric may rely only on disclosed anchors"
            )
        if decision.trigger_type == TriggerType.CRITICAL:
            earlier = sorted({visible[i] for i in referenced if i in visible and visible[i] < turn})
            if len(earlier) < 2:
                problems.append(
                    "a CRITICAL trigger must rely on anchors disclosed in at least two different "
                    "earlier turns; its referenced anchors were disclosed in "
                    + (f"turn(s) {', '.join(map(str, earlier))}" if earlier else "no earlier turn")
                )
        return problems

    def _visible_tokens(self, anchor_indices: set[int], extra: str = "") -> set[str]:
        anchors = self.spec.scenario.anchors
        texts = [e.user + "\n" + e.assistant for e in self.exchanges]
        texts += [anchors[i] for i in anchor_indices]
        return _tokens("\n".join([*texts, extra]))

    def _missing_types(self, also: str | None = None) -> list[str]:
        present = {t.type for t in self.triggers} | {also}
        return [str(kind) for kind in PHASE_WINDOWS if kind not in present]

    # Writing the record.

    def _record_turn(
        self, turn: int, decision: PlannerDecision, user_message: str, reply: str
    ) -> None:
        rubric = None
        if decision.evaluation_rubric is not None:  # present exactly on trigger points (schema)
            rubric = {"type": decision.trigger_type, **decision.evaluation_rubric.model_dump()}
        self.turn_records.append(
            {
                "turn": turn,
                "planner": {
                    "state_audit": {
                        "current_turn": turn,
                        "previous_trigger_count": len(self.triggers),
                        "is_max_reached": turn >= self.max_turns,
                    },
                    "is_trigger_point": decision.is_trigger_point,
                    "stop_conversation": decision.stop_conversation,
                    "evaluation_rubric": rubric,
                    "tactical_order": decision.tactical_order.model_dump(),
                },
                "user_message": user_message,
                "assistant_response": reply,
            }
        )
        if decision.disclose_anchor is not None:
            self.disclosed[decision.disclose_anchor] = turn
        if rubric is not None:
            self.trigger_points.append({"turn": turn, "evaluation_rubric": rubric})
            self.triggers.append(
                TriggerSoFar(
                    turn, rubric["type"], tuple(dict.fromkeys(decision.referenced_anchors))
                )
            )
        self.exchanges.append(
            Exchange(user=user_message, assistant=reply, images=self.spec.turn_images.get(turn, ()))
        )

    def _turn_images(self) -> dict:
        """``turn_images`` for the turns the dialogue reached, inline (the importer checks them
        again and finds their files already stored: content-addressed); no key without any, so
        a text-only scenario's record is what it always was."""
        reached = len(self.turn_records)
        images = {
            str(turn): [embedded_part(image) for image in parts]
            for turn, parts in sorted(self.spec.turn_images.items())
            if parts and turn <= reached
        }
        return {"turn_images": images} if images else {}

    def _release_record(self) -> dict:
        spec = self.spec
        # Anchor keys follow disclosure order (A1 is the first fact the user let slip), as in
        # the demo corpus; at most one anchor per turn makes the order unambiguous.
        in_order = sorted(self.disclosed.items(), key=lambda item: item[1])
        keys = {index: f"A{n}" for n, (index, _) in enumerate(in_order, start=1)}
        planner_model = self.agents["planner"][1]
        return {
            "blueprint_id": spec.blueprint_id,
            "scenario_id": spec.scenario_key,
            "unique_id_eval": spec.unique_id_eval,
            "uuid": spec.persona_uuid,
            "category_key": spec.category_key,
            "style_combination_index": spec.style_index,
            "evaluated_model": planner_model,
            "num_turns_completed": len(self.turn_records),
            "trigger_points": self.trigger_points,
            "turn_records": self.turn_records,
            "token_usage": {
                agent: {
                    "prompt_tokens": usage.prompt_tokens,
                    "completion_tokens": usage.completion_tokens,
                    "calls": usage.calls,
                }
                for agent, usage in self.usage.items()
            },
            "x_workbench": {
                "persona": {"name": spec.persona.name, "summary": spec.persona.summary},
                "scenario": {
                    "title": spec.scenario.title,
                    "hidden_goal": spec.scenario.hidden_goal,
                    "surface_request": spec.scenario.surface_request,
                    "ideal_trajectory": spec.scenario.ideal_trajectory,
                },
                "anchors": [
                    {"key": keys[index], "text": spec.scenario.anchors[index], "turn": turn}
                    for index, turn in in_order
                ],
                "trigger_anchors": {
                    str(t.turn): [keys[index] for index in t.anchors] for t in self.triggers
                },
                **self._turn_images(),
                "status": DialogueStatus.DRAFT.value,
                "provenance": {
                    "curation_model": planner_model,
                    "models": {agent: model for agent, (_, model) in self.agents.items()},
                    "prompt_versions": {agent: load_prompt(agent).version for agent in AGENTS},
                    "curated_at": timezone.now().isoformat(),
                },
            },
        }
