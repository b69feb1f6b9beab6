"""The replay provider: answers from recorded replies, judgments, failure-mode labels,
pairwise verdicts and curation agents' answers, offline and free.

It lets the whole pipeline (curation, evaluation, judging, analysis) run without a key or a
network — the demo, CI, and anyone reproducing published numbers from the released recordings.
A request is identified by its ``ReplayKey``, never by its text, so prompt edits do not break
replay.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.providers.base import ChatMessage, ChatRequest, ChatResult, ProviderError, ReplayKey
from benchmark.providers.registry import Connection, ProviderSpec, register

REPLAY = "replay"
DEMO_DATA_DIR = Path(__file__).resolve().parent.parent / "demo_data"

ReplyKey = tuple[str, int, str, str]
"""(unique_id_eval, turn, model, condition)"""
JudgmentKey = tuple[str, int, str, str, str]
"""(unique_id_eval, turn, model, condition, judge)"""
PairwiseKey = tuple[str, int, str, str, str, str, str]
"""(unique_id_eval, turn, first model, first condition, second model, second condition, judge):
the reply shown first (Response 1), the one shown second, and the pairwise judge."""
CurationKey = tuple[str, str, int]
"""(agent, unique_id_eval, turn): any model may replay a curation, so the model is no part of it."""
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
            jkey = (*_reply_key(row), str(row["judge"]))
            if jkey in judgments:
                raise ValueError(f"{judgments_path.name}: judgment recorded twice for {jkey}")
            judgments[jkey] = {name: row[name] for name in ("verdict", "rationale", "evidence")}
        failure_modes: dict[JudgmentKey, dict[str, str]] = {}
        if failure_modes_path is not None and failure_modes_path.exists():
            for row in _rows(failure_modes_path):
                fkey = (*_reply_key(row), str(row["classifier"]))
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

    def lookup(self, key: ReplayKey) -> str | None:
        """The recorded text for ``key``: a reply, or a judgment or failure-mode label as the JSON
        a judge or classifier would send, or a curation agent's answer."""
        if key.kind == "curation":
            return self.curation.get((key.agent, key.unique_id_eval, key.turn))
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
                )
            )
            return None if verdict is None else json.dumps(verdict, ensure_ascii=False)
        reply_key: ReplyKey = (key.unique_id_eval, key.turn, key.model, key.condition)
        if key.kind == "reply":
            return self.replies.get(reply_key)
        recorded = self.failure_modes if key.kind == "failure_mode" else self.judgments
        judgment = recorded.get((*reply_key, key.judge))
        return None if judgment is None else json.dumps(judgment, ensure_ascii=False)


@functools.cache
def _demo_store() -> ReplayStore:
    return ReplayStore.from_jsonl(
        DEMO_DATA_DIR / "replies.jsonl",
        DEMO_DATA_DIR / "judgments.jsonl",
        DEMO_DATA_DIR / "failure_modes.jsonl",
        DEMO_DATA_DIR / "curation.jsonl",
        DEMO_DATA_DIR / "pairwise_verdicts.jsonl",
    )


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as stream:
        for line in stream:
            if line.strip():
                yield json.loads(line)


def _reply_key(row: dict[str, Any]) -> ReplyKey:
    return (str(row["unique_id_eval"]), int(row["turn"]), str(row["model"]), str(row["condition"]))


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
    )


def _curation_key(row: dict[str, Any], where: str) -> CurationKey:
    agent = row.get("agent")
    if agent not in CURATION_AGENTS:
        raise ValueError(
            f"{where}: agent must be one of {', '.join(CURATION_AGENTS)}, not {agent!r}"
        )
    return (agent, str(row["unique_id_eval"]), int(row["turn"]))


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
        text = self._store.lookup(key)
        if text is None:
            raise ProviderError(f"nothing recorded for {_describe(key)}", retryable=False)
        return ChatResult(
            text=text,
            input_tokens=_prompt_tokens(request.messages),
            output_tokens=estimate_tokens(text),
            latency_s=0.0,
            attempts=1,
            # Deterministic, so a replayed run is identical call for call.
            request_id="replay-" + hashlib.sha256(repr(key).encode()).hexdigest()[:16],
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
