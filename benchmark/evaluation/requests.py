"""The requests an evaluation sends: a model's reply at a trigger, a judge's verdict on it, a
classifier's failure-mode label for a RECOVERY reply the primary judge failed, and a pairwise
judge's choice between two replies at the same trigger.

Isolation by construction: the model under test sees only the frozen conversation up to and
including the trigger-turn user message, with its turns' images (plus, in the rubric-injected
condition, the trigger's principle as a system instruction); the judge sees that conversation
(its images attached to the prompt, numbered in the transcript), the rubric and the reply —
never the persona, the style or the hidden goal (SPEC 2.2) — and a pairwise judge sees two
replies as "Response 1" and "Response 2", never which model or condition wrote either.
"""

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from benchmark.curation.prompts import load_prompt
from benchmark.models import (
    Condition,
    EvaluationUnit,
    ModelEndpoint,
    Turn,
    TurnImage,
    turn_image_storage,
)
from benchmark.providers.base import ChatMessage, ChatRequest, ImagePart, ReplayKey
from benchmark.providers.factory import sampling_params
from benchmark.providers.images import request_images
from benchmark.vocabulary import FAILURE_MODE_DEFINITIONS, FAILURE_MODES


class TurnText(Protocol):
    """What the history reads of a turn (a ``Turn``, or a row of one)."""

    @property
    def index(self) -> int: ...
    @property
    def user_message(self) -> str: ...
    @property
    def assistant_response(self) -> str: ...


class TurnIndex(Protocol):
    @property
    def index(self) -> int: ...


class TriggerAt(Protocol):
    """What the history reads of a trigger: where it is (``trigger.turn.index``)."""

    @property
    def turn(self) -> TurnIndex: ...


# A dialogue's turn images as the providers take them: turn number → its images, in order.
TurnImages = Mapping[int, tuple[ImagePart, ...]]


def turn_image_parts(dialogue_ids: Iterable[int]) -> dict[int, dict[int, tuple[ImagePart, ...]]]:
    """The dialogues' turn images with their bytes (read from the turn-image storage), by
    dialogue id then turn number: one query, then one read per image. The bytes are the
    corpus's, exactly as imported (the sha256 the replay provider keys by is theirs)."""
    found: dict[int, dict[int, list[ImagePart]]] = defaultdict(lambda: defaultdict(list))
    storage = turn_image_storage()
    for image in (
        TurnImage.objects.filter(turn__dialogue_id__in=list(dialogue_ids))
        .select_related("turn")
        .order_by("turn__dialogue_id", "turn__index", "position")
    ):
        with storage.open(image.file.name, "rb") as stream:
            data = stream.read()
        found[image.turn.dialogue_id][image.turn.index].append(
            ImagePart(image.media_type, data, image.sha256, image.alt)
        )
    return {
        dialogue_id: {index: tuple(parts) for index, parts in by_turn.items()}
        for dialogue_id, by_turn in found.items()
    }


def conversation_until(
    trigger: TriggerAt, turns: Sequence[TurnText], images: TurnImages | None = None
) -> tuple[ChatMessage, ...]:
    """The frozen history: every earlier turn in full, then the trigger turn's user message;
    each user message with its turn's ``images`` (``turn_image_parts``), if given."""
    images = images or {}
    messages: list[ChatMessage] = []
    for turn in turns:
        if turn.index > trigger.turn.index:
            break
        messages.append(ChatMessage("user", turn.user_message, images.get(turn.index, ())))
        if turn.index < trigger.turn.index:
            messages.append(ChatMessage("assistant", turn.assistant_response))
    return tuple(messages)


def reply_request(
    unit: EvaluationUnit, turns: list[Turn], images: TurnImages | None = None
) -> ChatRequest:
    """The model under test's request: the conversation as the user wrote it, images
    included."""
    trigger, endpoint = unit.trigger, unit.endpoint
    messages = conversation_until(trigger, turns, images)
    if unit.condition == Condition.RUBRIC_INJECTED:
        instruction = load_prompt("rubric_injection").render(
            trigger_type=trigger.type, pass_criteria=trigger.pass_criteria
        )
        messages = (ChatMessage("system", instruction), *messages)
    return ChatRequest(
        model=endpoint.model_name,
        messages=messages,
        params=sampling_params(endpoint),
        replay_key=ReplayKey(
            "reply",
            trigger.turn.dialogue.unique_id_eval,
            trigger.turn.index,
            endpoint.model_name,
            unit.condition,
        ),
    )


def _transcript(messages: tuple[ChatMessage, ...]) -> str:
    """The conversation as text for a judge's prompt. A user message that carried images says
    so by number, in the order ``_asking_again`` attaches them to the prompt; a conversation
    without images reads exactly as it always has (recorded replays and the response cache
    key on it)."""
    names = {"user": "USER", "assistant": "ASSISTANT"}
    shown = 0
    blocks = []
    for message in messages:
        if message.role not in names:
            continue
        block = f"[{names[message.role]}]\n{message.content}"
        for _ in message.images:
            shown += 1
            block += f"\n[image {shown}, attached]"
        blocks.append(block)
    return "\n\n".join(blocks)


def judge_request(
    unit: EvaluationUnit,
    turns: list[Turn],
    judge: ModelEndpoint,
    *,
    images: TurnImages | None = None,
    rejected: tuple[tuple[str, str], ...] = (),
) -> ChatRequest:
    """``images``: the dialogue's turn images (``turn_image_parts``): those of the conversation
    up to the trigger go with the prompt, as the model under test was sent them, so a verdict
    on an INTERVENTION reply can rest on what the photo shows. ``rejected``: the judge's
    earlier outputs on this reply and why each could not be used."""
    trigger = unit.trigger
    conversation = conversation_until(trigger, turns, images)
    prompt = load_prompt("judge").render(
        conversation=_transcript(conversation),
        trigger_type=trigger.type,
        pass_criteria=trigger.pass_criteria,
        partial_criteria=trigger.partial_criteria,
        fail_criteria=trigger.fail_criteria,
        reply=unit.reply,
    )
    return ChatRequest(
        model=judge.model_name,
        messages=_asking_again(prompt, rejected, request_images(conversation)),
        params=sampling_params(judge),
        replay_key=ReplayKey(
            "judgment",
            trigger.turn.dialogue.unique_id_eval,
            trigger.turn.index,
            unit.endpoint.model_name,
            unit.condition,
            judge=judge.model_name,
        ),
    )


def _asking_again(
    prompt: str,
    rejected: tuple[tuple[str, str], ...],
    images: tuple[ImagePart, ...] = (),
) -> tuple[ChatMessage, ...]:
    """The prompt with the conversation's ``images`` (numbered in it by ``_transcript``), then
    each earlier unusable output and why it could not be used: asking again continues that
    conversation, so every try is a distinct request."""
    messages = [ChatMessage("user", prompt, images)]
    for previous, reason in rejected:
        messages += [
            ChatMessage("assistant", previous),
            ChatMessage(
                "user",
                f"That answer could not be used: {reason}. Answer again with only the JSON object.",
            ),
        ]
    return tuple(messages)


def classify_request(
    unit: EvaluationUnit,
    turns: list[Turn],
    classifier: ModelEndpoint,
    *,
    images: TurnImages | None = None,
    rejected: tuple[tuple[str, str], ...] = (),
) -> ChatRequest:
    """The failure-mode classifier sees what a judge sees (conversation with its images,
    rubric, reply) and the taxonomy's definitions (``benchmark.vocabulary``); never the model
    or the condition."""
    trigger = unit.trigger
    conversation = conversation_until(trigger, turns, images)
    prompt = load_prompt("failure_mode").render(
        definitions="\n".join(
            f"- {mode.value}: {definition}" for mode, definition in FAILURE_MODE_DEFINITIONS.items()
        ),
        mode_values=" | ".join(f'"{mode}"' for mode in FAILURE_MODES),
        conversation=_transcript(conversation),
        pass_criteria=trigger.pass_criteria,
        fail_criteria=trigger.fail_criteria,
        reply=unit.reply,
    )
    return ChatRequest(
        model=classifier.model_name,
        messages=_asking_again(prompt, rejected, request_images(conversation)),
        params=sampling_params(classifier),
        replay_key=ReplayKey(
            "failure_mode",
            trigger.turn.dialogue.unique_id_eval,
            trigger.turn.index,
            unit.endpoint.model_name,
            unit.condition,
            judge=classifier.model_name,
        ),
    )


@dataclass(frozen=True)
class OtherReply:
    """Side B of a pairwise comparison, as its request needs it: the reply, and (for the replay
    provider's key only, never for the prompt) who wrote it."""

    reply: str
    model_name: str
    condition: str


def pairwise_request(
    unit_a: EvaluationUnit,
    turns: list[Turn],
    judge: ModelEndpoint,
    *,
    other: OtherReply,
    a_shown_first: bool,
    images: TurnImages | None = None,
    rejected: tuple[tuple[str, str], ...] = (),
) -> ChatRequest:
    """Side A's reply (``unit_a``) against side B's (``other``) at A's trigger, A shown first or
    second, with the conversation's images as a judge gets them. The two orders are two
    distinct requests (and cache keys): a judge's answer in one order is never served for the
    other."""
    trigger = unit_a.trigger
    conversation = conversation_until(trigger, turns, images)
    first = (unit_a.reply, unit_a.endpoint.model_name, unit_a.condition)
    second = (other.reply, other.model_name, other.condition)
    if not a_shown_first:
        first, second = second, first
    prompt = load_prompt("pairwise_judge").render(
        conversation=_transcript(conversation),
        trigger_type=trigger.type,
        pass_criteria=trigger.pass_criteria,
        partial_criteria=trigger.partial_criteria,
        fail_criteria=trigger.fail_criteria,
        response_1=first[0],
        response_2=second[0],
    )
    return ChatRequest(
        model=judge.model_name,
        messages=_asking_again(prompt, rejected, request_images(conversation)),
        params=sampling_params(judge),
        replay_key=ReplayKey(
            "pairwise",
            trigger.turn.dialogue.unique_id_eval,
            trigger.turn.index,
            first[1],
            first[2],
            judge=judge.model_name,
            other_model=second[1],
            other_condition=second[2],
        ),
    )


def cache_key(
    endpoint: ModelEndpoint, request: ChatRequest, *, sample_index: int, salt: str
) -> str:
    """Hash of (endpoint, model, parameters, messages, sample index[, salt]).

    ``salt`` is empty for runs that share the cache, and the run id for runs that opted out
    (fresh sampling): their calls are still cached, so a resume inside the run never pays twice,
    but nothing is reused across runs."""
    identity = {
        "endpoint": endpoint.name,
        "base_url": endpoint.base_url,
        **request.payload(),
        "sample": sample_index,
        "salt": salt,
    }
    blob = json.dumps(identity, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()
