"""The replay provider: answers from recorded replies, judgments, failure-mode labels,
pairwise verdicts and curation agents' answers, offline and free.

It lets the whole pipeline (curation, evaluation, judging, analysis) run without a key or a
network — the demo, CI, and anyone reproducing published numbers from the released recordings.
A request is identified by its ``ReplayKey`` and the sha256 of the images its user messages
carry (in order; none for a text-only request), never by its text, so prompt edits do not break
replay while a different image is a different recording. A recording row names its images in an
optional ``images`` list of hex digests; a row without one is a text-only recording.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.providers.base import ChatMessage, ChatRequest, ChatResult, ProviderError, ReplayKey
from benchmark.providers.images import request_images
from benchmark.providers.registry import Connection, ProviderSpec, register

REPLAY = "replay"
DEMO_DATA_DIR = Path(__file__).resolve().parent.parent / "demo_data"

Images = tuple[str, ...]
"""The sha256 (hex) of every image in the request's user messages, in order: () for text only."""
ReplyKey = tuple[str, int, str, str, Images]
"""(unique_id_eval, turn, model, condition, images)"""
JudgmentKey = tuple[str, int, str, str, str, Images]
"""(unique_id_eval, turn, model, condition, judge, images)"""
PairwiseKey = tuple[str, int, str, str, str, str, str, Images]
"""(unique_id_eval, turn, first model, first condition, second model, second condition, judge,
images): the reply shown first (Response 1), the one shown second, and the pairwise judge."""
CurationKey = tuple[str, str, int, Images]
"""(agent, unique_id_eval, turn, images): any model may replay a curation, so the model is no
part of it."""
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
CURATION_AGENTS = ("planner", "user_agent", "assistant")


def estimate_tokens(text: str) -> int:
    """Whitespace words × 1.3, rounded: the usual rule of thumb for English (a token is about
    three quarters of a word). Replayed calls have no real usage, but accounting and cost views
    should still show plausible, deterministic numbers."""
    return round(len(text.split()) * 1.3)


@dataclass(frozen=True)
class ReplayStore:
    replies: dict[ReplyKey, str]
    judgments: dict[JudgmentKey, dict[str, str]]
    """Each value: {"verdict", "rationale", "evidence"}."""
    failure_modes: dict[JudgmentKey, dict[str, str]] = field(default_factory=dict)
    """By classifier in place of judge; each value: {"failure_mode", "quote", "rationale"}."""
    curation: dict[CurationKey, str] = field(default_factory=dict)
    """Each value: the agent's answer as sent (a Planner's is its JSON decision as text)."""
    pairwise: dict[PairwiseKey, dict[str, str]] = field(default_factory=dict)
    """Each value: {"choice", "rationale"}, the choice a screen position ("1", "2") or a tie."""

    @classmethod
    def from_jsonl(
        cls,
        replies_path: Path,
        judgments_path: Path,
        failure_modes_path: Path | None = None,
        curation_path: Path | None = None,
        pairwise_path: Path | None = None,
    ) -> ReplayStore:
        """Load recordings; a key recorded twice is an error (which one would replay mean?).
        The failure-mode, curation and pairwise recordings are optional: without the file,
        none are served."""
        replies: dict[ReplyKey, str] = {}
        for row in _rows(replies_path):
            key = _reply_key(row)
            if key in replies:
                raise ValueError(f"{replies_path.name}: reply recorded twice for {key}")
            replies[key] = row["reply"]
        judgments: dict[JudgmentKey, dict[str, str]] = {}
        for row in _rows(judgments_path):
            uid, turn, model, condition, images = _reply_key(row)
            jkey = (uid, turn, model, condition, str(row["judge"]), images)
            if jkey in judgments:
                raise ValueError(f"{judgments_path.name}: judgment recorded twice for {jkey}")
            judgments[jkey] = {name: row[name] for name in ("verdict", "rationale", "evidence")}
        failure_modes: dict[JudgmentKey, dict[str, str]] = {}
        if failure_modes_path is not None and failure_modes_path.exists():
            for row in _rows(failure_modes_path):
                uid, turn, model, condition, images = _reply_key(row)
                fkey = (uid, turn, model, condition, str(row["classifier"]), images)
                if fkey in failure_modes:
                    raise ValueError(
                        f"{failure_modes_path.name}: failure mode recorded twice for {fkey}"
                    )
                failure_modes[fkey] = {
                    name: row[name] for name in ("failure_mode", "quote", "rationale")
                }
        curation: dict[CurationKey, str] = {}
        if curation_path is not None and curation_path.exists():
            for number, row in enumerate(_rows(curation_path), start=1):
                ckey = _curation_key(row, f"{curation_path.name} line {number}")
                if ckey in curation:
                    raise ValueError(
                        f"{curation_path.name} line {number}: answer recorded twice for {ckey}"
                    )
                curation[ckey] = _curation_answer(row, f"{curation_path.name} line {number}")
        pairwise: dict[PairwiseKey, dict[str, str]] = {}
        if pairwise_path is not None and pairwise_path.exists():
            for number, row in enumerate(_rows(pairwise_path), start=1):
                pkey = pairwise_key(row)
                if pkey in pairwise:
                    raise ValueError(
                        f"{pairwise_path.name} line {number}: verdict recorded twice for {pkey}"
                    )
                pairwise[pkey] = {name: row[name] for name in ("choice", "rationale")}
        return cls(
            replies=replies,
            judgments=judgments,
            failure_modes=failure_modes,
            curation=curation,
            pairwise=pairwise,
        )

    @classmethod
    def from_demo_data(cls) -> ReplayStore:
        """The demo recordings, loaded once per process (every replay provider shares them)."""
        return _demo_store()

    def recorded_for_other_images(self, key: ReplayKey, images: Images) -> bool:
        """Whether ``key`` has a recording, but for images other than ``images``: what a
        missing-recording error should say, since the text alone would look recorded."""
        # Only on the error path, so a scan of every recording's images is cheap enough.
        return any(
            recorded != images and self.lookup(key, recorded) is not None
            for recorded in self._all_images()
        )

    def _all_images(self) -> set[Images]:
        stores: list[Iterable[tuple[Any, ...]]] = [
            self.replies,
            self.judgments,
            self.failure_modes,
            self.curation,
            self.pairwise,
        ]
        return {key[-1] for store in stores for key in store}

    def lookup(self, key: ReplayKey, images: Images = ()) -> str | None:
        """The recorded text for ``key`` and ``images``: a reply, or a judgment or failure-mode
        label as the JSON a judge or classifier would send, or a curation agent's answer."""
        if key.kind == "curation":
            return self.curation.get((key.agent, key.unique_id_eval, key.turn, images))
        if key.kind == "pairwise":
            verdict = self.pairwise.get(
                (
                    key.unique_id_eval,
                    key.turn,
                    key.model,
                    key.condition,
                    key.other_model,
                    key.other_condition,
                    key.judge,
                    images,
                )
            )
            return None if verdict is None else json.dumps(verdict, ensure_ascii=False)
        if key.kind == "reply":
            return self.replies.get(
                (key.unique_id_eval, key.turn, key.model, key.condition, images)
            )
        recorded = self.failure_modes if key.kind == "failure_mode" else self.judgments
        judgment = recorded.get(
            (key.unique_id_eval, key.turn, key.model, key.condition, key.judge, images)
        )
        return None if judgment is None else json.dumps(judgment, ensure_ascii=False)


@functools.cache
def _demo_store() -> ReplayStore:
    store = ReplayStore.from_jsonl(
        DEMO_DATA_DIR / "replies.jsonl",
        DEMO_DATA_DIR / "judgments.jsonl",
        DEMO_DATA_DIR / "failure_modes.jsonl",
        DEMO_DATA_DIR / "curation.jsonl",
        DEMO_DATA_DIR / "pairwise_verdicts.jsonl",
    )
    # The multimodal demo's replies and verdicts (demo_data/make_images.py) live in files of
    # their own; served beside the rest, so a run on the image dialogues replays offline too.
    images = ReplayStore.from_jsonl(
        DEMO_DATA_DIR / "image_replies.jsonl", DEMO_DATA_DIR / "image_judgments.jsonl"
    )
    twice = (store.replies.keys() & images.replies.keys()) | (
        store.judgments.keys() & images.judgments.keys()
    )
    if twice:
        raise ValueError(f"demo recordings: recorded twice for {min(map(str, twice))}")
    store.replies.update(images.replies)
    store.judgments.update(images.judgments)
    return store


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as stream:
        for line in stream:
            if line.strip():
                yield json.loads(line)


def _reply_key(row: dict[str, Any]) -> ReplyKey:
    return (
        str(row["unique_id_eval"]),
        int(row["turn"]),
        str(row["model"]),
        str(row["condition"]),
        _row_images(row),
    )


def _row_images(row: dict[str, Any]) -> Images:
    """A recording's ``images``: the hex sha256 of each image the request carried, in order;
    absent for a text-only recording."""
    images = row.get("images", [])
    if not isinstance(images, list) or not all(
        isinstance(digest, str) and _SHA256.match(digest) for digest in images
    ):
        raise ValueError(
            f"images must be a list of lower-case hex sha256 digests, not {images!r} "
            f"(unique_id_eval {row.get('unique_id_eval')!r}, turn {row.get('turn')!r})"
        )
    return tuple(images)


def pairwise_key(row: dict[str, Any]) -> PairwiseKey:
    """A recorded pairwise verdict's key (``pairwise_verdicts.jsonl``)."""
    return (
        str(row["unique_id_eval"]),
        int(row["turn"]),
        str(row["first_model"]),
        str(row["first_condition"]),
        str(row["second_model"]),
        str(row["second_condition"]),
        str(row["judge"]),
        _row_images(row),
    )


def _curation_key(row: dict[str, Any], where: str) -> CurationKey:
    agent = row.get("agent")
    if agent not in CURATION_AGENTS:
        raise ValueError(
            f"{where}: agent must be one of {', '.join(CURATION_AGENTS)}, not {agent!r}"
        )
    try:
        images = _row_images(row)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    return (agent, str(row["unique_id_eval"]), int(row["turn"]), images)


def _curation_answer(row: dict[str, Any], where: str) -> str:
    """The recorded answer as the agent sends it: text, or the Planner's decision object, which
    is stored as JSON and served as the JSON text a Planner would write."""
    answer = row.get("answer")
    if row["agent"] == "planner" and isinstance(answer, dict):
        return json.dumps(answer, ensure_ascii=False)
    if not isinstance(answer, str) or not answer.strip():
        raise ValueError(f"{where}: answer must be non-empty text (or, for the planner, an object)")
    return answer


class ReplayProvider:
    """Serves recordings. Nothing recorded (or no ``replay_key``) is a non-retryable
    ``ProviderError`` naming the key: asking again cannot make a recording appear."""

    vendor = REPLAY

    def __init__(self, store: ReplayStore) -> None:
        self._store = store

    @classmethod
    def from_connection(cls, connection: Connection) -> ReplayProvider:
        """The demo recordings; an offline provider gets nothing from its endpoint to use."""
        return cls(ReplayStore.from_demo_data())

    def complete(self, request: ChatRequest) -> ChatResult:
        key = request.replay_key
        if key is None:
            raise ProviderError(
                "replay needs a replay_key on the request; none was given", retryable=False
            )
        images = tuple(image.sha256 for image in request_images(request.messages))
        text = self._store.lookup(key, images)
        if text is None:
            described = _describe(key)
            if images:
                described += " with images " + ", ".join(d[:12] for d in images)
            if self._store.recorded_for_other_images(key, images):
                described += " (recorded only for other images)"
            raise ProviderError(f"nothing recorded for {described}", retryable=False)
        return ChatResult(
            text=text,
            input_tokens=_prompt_tokens(request.messages),
            output_tokens=estimate_tokens(text),
            latency_s=0.0,
            attempts=1,
            # Deterministic, so a replayed run is identical call for call.
            request_id="replay-"
            + hashlib.sha256(repr((key, images) if images else key).encode()).hexdigest()[:16],
        )

    async def acomplete(self, request: ChatRequest) -> ChatResult:
        """Recordings are in memory: nothing to wait for."""
        return self.complete(request)

    async def aclose(self) -> None:
        """Nothing to close."""


def _prompt_tokens(messages: Iterable[ChatMessage]) -> int:
    return sum(estimate_tokens(message.content) for message in messages)


def _describe(key: ReplayKey) -> str:
    if key.kind == "curation":
        return (
            f"curation agent={key.agent} unique_id_eval={key.unique_id_eval} turn={key.turn} "
            f"model={key.model}"
        )
    described = (
        f"{key.kind} unique_id_eval={key.unique_id_eval} turn={key.turn} "
        f"model={key.model} condition={key.condition}"
    )
    if key.kind == "failure_mode":
        return described + f" classifier={key.judge}"
    if key.kind == "pairwise":
        return described + (
            f" against model={key.other_model} condition={key.other_condition} judge={key.judge}"
        )
    return described + (f" judge={key.judge}" if key.kind == "judgment" else "")


register(
    ProviderSpec(
        REPLAY,
        "Replay (recorded replies, offline)",
        ReplayProvider.from_connection,
        needs_api_key=False,
        offline=True,
    )
)
