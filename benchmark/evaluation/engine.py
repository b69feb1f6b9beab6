"""Executing one evaluation unit: claim it, get the model's reply, have every judge score it.

Idempotency contract of ``unit_execute`` (safe to call any number of times, concurrently, for the
same unit — as Celery's at-least-once delivery will):

- A unit is claimed with one conditional UPDATE (pending, or running with an expired lease, in a
  running run); whoever does not win the claim does nothing.
- Every write is conditioned on the claim token, so a worker that lost its lease cannot
  overwrite the new owner's work; judgments are unique per (unit, judge).
- Every provider call goes through the response cache: a call that completed once is never paid
  for again, whether the unit is retried, resumed or redelivered after a crash.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.db.models import F
from django.utils import timezone

from benchmark.evaluation import inflight
from benchmark.evaluation.evidence import grade_evidence
from benchmark.evaluation.judge_output import JudgeOutputError, parse_judge_output
from benchmark.evaluation.requests import cache_key, judge_request, reply_request
from benchmark.models import (
    CallPurpose,
    EvaluationRun,
    EvaluationUnit,
    EvidenceStatus,
    JudgeDisagreement,
    Judgment,
    JudgmentState,
    ModelEndpoint,
    ModelPrice,
    ProviderCall,
    ResponseCacheEntry,
    RunStatus,
    UnitState,
)
from benchmark.providers.base import ChatProvider, ChatRequest, ChatResult, ProviderError
from benchmark.providers.factory import provider_for

JUDGE_MAX_TRIES = 3
IN_FLIGHT_POLL_S = 0.2
LIVE_TTL_S = 1.0
PRICE_TTL_S = 60.0


class RunStopped(Exception):
    """The run was cancelled (or is no longer running): make no new calls."""


# --- Per-process helpers ----------------------------------------------------------------------

_providers: dict[tuple[int, str], ChatProvider] = {}
_providers_lock = threading.Lock()


def provider_for_endpoint(endpoint: ModelEndpoint) -> ChatProvider:
    """One provider (one HTTP connection pool) per endpoint per process."""
    key = (endpoint.pk, f"{endpoint.provider}|{endpoint.base_url}|{endpoint.api_key_env}")
    with _providers_lock:
        if key not in _providers:
            _providers[key] = provider_for(endpoint)
        return _providers[key]


_prices: dict[str, tuple[float, ModelPrice | None]] = {}


def _price(model_name: str) -> ModelPrice | None:
    cached = _prices.get(model_name)
    if cached and time.monotonic() - cached[0] < PRICE_TTL_S:
        return cached[1]
    price = ModelPrice.objects.filter(model_name=model_name).first()
    _prices[model_name] = (time.monotonic(), price)
    return price


# --- Calls: cache, accounting, cancellation ---------------------------------------------------


@dataclass
class CallContext:
    run: EvaluationRun
    unit: EvaluationUnit
    salt: str


_live: dict[int, tuple[float, bool]] = {}


def _run_is_live(run_id: int) -> bool:
    """Is the run still running? Read at most once a second per process: cancelling stops new
    calls within that second, without a query before every call."""
    cached = _live.get(run_id)
    now = time.monotonic()
    if cached and now - cached[0] < LIVE_TTL_S:
        return cached[1]
    live = EvaluationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING).exists()
    _live[run_id] = (now, live)
    return live


_judges: dict[tuple[int, object], list[ModelEndpoint]] = {}


def _run_judges(run: EvaluationRun) -> list[ModelEndpoint]:
    """A started run's judges (frozen once it started: the admin makes them read-only)."""
    key = (run.pk, run.started_at)
    if key not in _judges:
        _judges[key] = list(run.judges.order_by("id"))
    return _judges[key]


def _usage(result: ChatResult) -> dict:
    """The accounting fields a cache entry and a call record share."""
    return {
        "input_tokens": result.input_tokens,
        "output_tokens": result.output_tokens,
        "reasoning_tokens": result.reasoning_tokens,
        "latency_s": result.latency_s,
        "request_id": result.request_id[:200],
    }


def _cached(key: str) -> ChatResult | None:
    hit = ResponseCacheEntry.objects.filter(key=key).first()
    if hit is None:
        return None
    return ChatResult(
        text=hit.text,
        input_tokens=hit.input_tokens,
        output_tokens=hit.output_tokens,
        reasoning_tokens=hit.reasoning_tokens,
        latency_s=0.0,
        attempts=0,
        request_id=hit.request_id,
    )


def cached_call(
    ctx: CallContext, endpoint: ModelEndpoint, request: ChatRequest, purpose: str
) -> ChatResult:
    """The call's result from the cache, or from the provider (then cached and accounted).

    Never pays twice for one call: a completed call is in the cache; a call in flight elsewhere
    (the identical request from another unit, or run) is awaited rather than repeated."""
    key = cache_key(endpoint, request, sample_index=ctx.unit.sample_index, salt=ctx.salt)
    while True:
        if not _run_is_live(ctx.run.pk):  # cancel stops new calls
            raise RunStopped
        if inflight.claim(key, lease_s=ctx.run.lease_seconds):
            # Ours to make — unless it completed before (a resume, a redelivery, another run).
            hit = _cached(key)
            if hit is None:
                break
            inflight.release(key)
            return hit
        hit = _cached(key)  # someone else is making it: their result, once it is cached
        if hit is not None:
            return hit
        time.sleep(IN_FLIGHT_POLL_S)
    try:
        result = provider_for_endpoint(endpoint).complete(request)
    except ProviderError as exc:
        inflight.release(key)
        ProviderCall.objects.create(
            run=ctx.run,
            unit=ctx.unit,
            endpoint=endpoint,
            purpose=purpose,
            cache_key=key,
            ok=False,
            error=str(exc)[:2000],
            attempts=exc.attempts,
        )
        raise
    price = _price(endpoint.model_name)
    cost = (
        price.cost(
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            reasoning_tokens=result.reasoning_tokens,
        )
        if price
        else Decimal(0)
    )
    # Cache first: from here on a crash cannot make us pay for this call again.
    ResponseCacheEntry.objects.bulk_create(
        [
            ResponseCacheEntry(
                key=key,
                endpoint_name=endpoint.name,
                text=result.text,
                **_usage(result),
            )
        ],
        ignore_conflicts=True,  # one INSERT, no transaction of its own
    )
    inflight.release(key)
    ProviderCall.objects.create(
        run=ctx.run,
        unit=ctx.unit,
        endpoint=endpoint,
        purpose=purpose,
        cache_key=key,
        attempts=result.attempts,
        cost_usd=cost,
        **_usage(result),
    )
    return result


# --- The unit ---------------------------------------------------------------------------------


def unit_claim(*, unit_id: int) -> tuple[EvaluationUnit, str] | None:
    """Claim a unit for this worker. Returns (unit, token), or None when it is not ours to do.

    The common case is one UPDATE (pending → running); a running unit whose claim is older than
    the run's lease (its worker died) is taken over by a second, conditional UPDATE."""
    now = timezone.now()
    token = uuid.uuid4().hex
    claim = {
        "state": UnitState.RUNNING,
        "claim_token": token,
        "claimed_at": now,
        "attempts": F("attempts") + 1,
    }
    units = EvaluationUnit.objects.filter(pk=unit_id)
    won = units.filter(state=UnitState.PENDING, run__status=RunStatus.RUNNING).update(**claim)
    if won != 1:
        lease = units.values_list("run__lease_seconds", flat=True).first()
        if lease is None:
            return None
        stale = now - timedelta(seconds=lease)
        won = units.filter(
            state=UnitState.RUNNING, claimed_at__lt=stale, run__status=RunStatus.RUNNING
        ).update(**claim)
        if won != 1:
            return None
    unit = EvaluationUnit.objects.select_related("run", "endpoint", "trigger__turn__dialogue").get(
        pk=unit_id
    )
    _live[unit.run_id] = (time.monotonic(), True)  # the claim just saw it running
    return unit, token


def _owned(unit: EvaluationUnit, token: str):
    return EvaluationUnit.objects.filter(pk=unit.pk, claim_token=token, state=UnitState.RUNNING)


def _judge_one(ctx: CallContext, turns, judge: ModelEndpoint) -> None:
    unit = ctx.unit
    rejected: tuple[tuple[str, str], ...] = ()
    raw = ""
    for attempt in range(1, JUDGE_MAX_TRIES + 1):
        request = judge_request(unit, turns, judge, rejected=rejected)
        raw = cached_call(ctx, judge, request, CallPurpose.JUDGMENT).text
        try:
            parsed = parse_judge_output(raw, reply=unit.reply)
        except JudgeOutputError as exc:
            rejected = (*rejected, (raw, str(exc)))
            continue
        grade = grade_evidence(parsed.evidence, unit.reply)
        _save_judgment(
            unit,
            judge,
            state=JudgmentState.DONE,
            verdict=parsed.verdict,
            rationale=parsed.rationale,
            evidence=parsed.evidence,
            raw_output=raw,
            attempts=attempt,
            evidence_status=EvidenceStatus.EXACT,
            evidence_found_share=grade.found_share,
        )
        return
    _save_judgment(
        unit,
        judge,
        state=JudgmentState.JUDGE_ERROR,
        raw_output=raw,
        attempts=JUDGE_MAX_TRIES,
        error=f"unusable after {JUDGE_MAX_TRIES} tries: {rejected[-1][1] if rejected else ''}",
    )


def _save_judgment(unit: EvaluationUnit, judge: ModelEndpoint, **fields) -> None:
    # If another delivery of this unit judged it first, the unique key keeps its judgment.
    Judgment.objects.bulk_create(
        [Judgment(unit=unit, judge=judge, judge_name=judge.name, **fields)],
        ignore_conflicts=True,
    )


def _record_disagreement(unit: EvaluationUnit) -> None:
    verdicts = dict(
        Judgment.objects.filter(unit=unit, state=JudgmentState.DONE).values_list(
            "judge_name", "verdict"
        )
    )
    if len(set(verdicts.values())) > 1:
        JudgeDisagreement.objects.get_or_create(unit=unit, defaults={"verdicts": verdicts})


def unit_execute(*, unit_id: int) -> str:
    """Run one unit to the end (see the module docstring for the idempotency contract).
    Returns the unit's state afterwards, or "skipped" when it was not ours to run."""
    claim = unit_claim(unit_id=unit_id)
    if claim is None:
        return "skipped"
    unit, token = claim
    run = unit.run
    ctx = CallContext(run=run, unit=unit, salt="" if run.use_cache else f"run-{run.pk}")
    turns = list(unit.trigger.turn.dialogue.turns.order_by("index"))
    try:
        if not unit.reply:
            result = cached_call(ctx, unit.endpoint, reply_request(unit, turns), CallPurpose.REPLY)
            if not result.text.strip():
                raise ProviderError("the model returned an empty reply", retryable=False)
            unit.reply = result.text
            _owned(unit, token).update(
                reply=result.text,
                input_tokens=result.input_tokens,
                output_tokens=result.output_tokens,
                reasoning_tokens=result.reasoning_tokens,
                latency_s=result.latency_s,
            )
        judges = _run_judges(run)
        # On a first claim nothing can have been judged yet; after a crash, some judge may have.
        done_judges = (
            set(Judgment.objects.filter(unit=unit).values_list("judge_id", flat=True))
            if unit.attempts > 1
            else set()
        )
        for judge in judges:
            if judge.pk not in done_judges:
                _judge_one(ctx, turns, judge)
        if len(judges) > 1:
            _record_disagreement(unit)
    except RunStopped:
        # Hand the unit back; a resume picks it up again.
        _owned(unit, token).update(state=UnitState.PENDING, claim_token="", claimed_at=None)
        run_finish_if_complete(run_id=run.pk)
        return UnitState.PENDING
    except ProviderError as exc:
        _owned(unit, token).update(
            state=UnitState.ERROR, error=str(exc)[:4000], finished_at=timezone.now()
        )
        run_finish_if_complete(run_id=run.pk)
        return UnitState.ERROR
    _owned(unit, token).update(state=UnitState.DONE, error="", finished_at=timezone.now())
    run_finish_if_complete(run_id=run.pk)
    return UnitState.DONE


def run_finish_if_complete(*, run_id: int) -> None:
    """Close the run once no unit is pending or running (a conditional update: exactly one
    worker moves it). While other units still run — the usual case — this is one query."""
    units = EvaluationUnit.objects.filter(run_id=run_id)
    if units.filter(state=UnitState.RUNNING).exists():
        return
    now = timezone.now()
    runs = EvaluationRun.objects.filter(pk=run_id)
    if runs.filter(status=RunStatus.CANCELLING).update(status=RunStatus.CANCELLED, finished_at=now):
        return
    if units.filter(state=UnitState.PENDING).exists():
        return
    runs.filter(status=RunStatus.RUNNING).update(status=RunStatus.DONE, finished_at=now)
