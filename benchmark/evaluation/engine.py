"""Executing evaluation units: claim them, get each model's reply, have every judge score it,
and every pairwise judge compare it with the replies it is paired with (in both orders).

Units run in **batches** (one Celery task per batch, ``settings.EVAL_BATCH_SIZE`` units). The
thread running a batch does all the database work, a few statements per round for the whole
batch; the provider calls themselves are coroutines on the worker process's event loop
(``aio.py``), all in flight at once up to ``settings.EVAL_MAX_CALLS_IN_FLIGHT`` per process.
Completed calls come back through a queue and are handled together, so the bookkeeping of a
round of 30 completions costs about what one completion did before (bench/pipeline.py).

Idempotency contract of ``units_execute`` (safe to call any number of times, concurrently, for
the same units — as Celery's at-least-once delivery will):

- Units are claimed with one conditional UPDATE (pending, or running with an expired lease, in a
  running run) that stamps a claim token; units another worker holds are skipped.
- While the batch runs it renews its units' lease (their ``claimed_at``) and its calls' in-flight
  claims every third of the lease, so a call slower than the lease (a reasoning model, a slot
  long queued for) is not taken for a dead worker's: only a batch that stopped renewing — its
  process died or hangs — loses its units to the sweep or another claim.
- Every later write is conditioned on that token, so a worker that lost its lease cannot
  overwrite the new owner's work; judgments are unique per (unit, judge), pairwise judgments per
  (comparison, judge, order).
- Every provider call goes through the response cache, and its cache row is written as soon as
  the call returns, before anything else: a call that completed once is never paid for again,
  whether its unit is retried, resumed or redelivered after a crash. An identical call in flight
  elsewhere (another unit, batch or run) is awaited rather than repeated (``inflight.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from django.db import connection, transaction
from django.db.models import BooleanField, ExpressionWrapper, F, Q
from django.utils import timezone

from benchmark.evaluation import aio, inflight
from benchmark.evaluation.classifier_output import ClassifierOutputError, parse_classifier_output
from benchmark.evaluation.evidence import grade_evidence
from benchmark.evaluation.judge_output import (
    JudgeOutputError,
    pairwise_winner,
    parse_judge_output,
    parse_pairwise_output,
)
from benchmark.evaluation.requests import (
    OtherReply,
    TurnImages,
    cache_key,
    classify_request,
    judge_request,
    pairwise_request,
    reply_request,
    turn_image_parts,
)
from benchmark.models import (
    CallPurpose,
    ClassificationState,
    EvaluationRun,
    EvaluationUnit,
    EvidenceStatus,
    FailureModeClassification,
    JudgeDisagreement,
    Judgment,
    JudgmentRepeat,
    JudgmentState,
    ModelEndpoint,
    ModelPrice,
    PairOrder,
    PairwiseComparison,
    PairwiseJudgment,
    ProviderCall,
    ResponseCacheEntry,
    RunSource,
    RunStatus,
    TriggerType,
    Turn,
    UnitState,
)
from benchmark.providers.base import ChatProvider, ChatRequest, ChatResult, ProviderError
from benchmark.providers.factory import provider_for
from benchmark.sql import units_update_owned
from benchmark.vocabulary import Verdict

logger = logging.getLogger(__name__)

JUDGE_MAX_TRIES = 3
IN_FLIGHT_POLL_S = 0.2
LIVE_TTL_S = 1.0
PRICE_TTL_S = 60.0
SALVAGE_S = 180.0
"""After a failure of the batch itself, how long to keep collecting calls already in flight, so
their (paid) results reach the cache."""
SALVAGE_DB_PAUSES_S = (0.5, 2.0, 5.0)
"""Pauses between tries to save a failed batch's state while the database is unreachable."""


# --- Per-process helpers ----------------------------------------------------------------------

_providers: dict[tuple[int, int, str], ChatProvider] = {}
_providers_lock = threading.Lock()


def provider_for_endpoint(endpoint: ModelEndpoint) -> ChatProvider:
    """One provider (one HTTP connection pool) per endpoint per process."""
    key = (
        os.getpid(),
        endpoint.pk,
        f"{endpoint.provider}|{endpoint.base_url}|{endpoint.api_key_env}",
    )
    with _providers_lock:
        if key not in _providers:
            provider = _providers[key] = provider_for(endpoint)
            aio.on_exit(provider.aclose)
        return _providers[key]


_prices: dict[str, tuple[float, ModelPrice | None]] = {}


def _price(model_name: str) -> ModelPrice | None:
    cached = _prices.get(model_name)
    if cached and time.monotonic() - cached[0] < PRICE_TTL_S:
        return cached[1]
    price = ModelPrice.objects.filter(model_name=model_name).first()
    _prices[model_name] = (time.monotonic(), price)
    return price


def call_cost(endpoint: ModelEndpoint, result: ChatResult) -> Decimal:
    """What a call cost, from its endpoint's model's ``ModelPrice`` (0 without one); the price
    is read at most once a minute per process. Shared with curation (``curation/calls.py``)."""
    price = _price(endpoint.model_name)
    if price is None:
        return Decimal(0)
    return price.cost(
        input_tokens=result.input_tokens,
        output_tokens=result.output_tokens,
        reasoning_tokens=result.reasoning_tokens,
    )


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
    """A started run's judges (frozen while it runs: the admin makes them read-only; a re-judge
    adds judges and stamps a new ``started_at``, so this key changes with them)."""
    key = (run.pk, run.started_at)
    if key not in _judges:
        _judges[key] = list(run.judges.order_by("id"))
    return _judges[key]


_pairwise_judges: dict[tuple[int, object], list[ModelEndpoint]] = {}


def _run_pairwise_judges(run: EvaluationRun) -> list[ModelEndpoint]:
    """A started run's pairwise judges (a pairwise judging step adds them and stamps a new
    ``started_at``, as a re-judge does, so this key changes with them)."""
    key = (run.pk, run.started_at)
    if key not in _pairwise_judges:
        _pairwise_judges[key] = list(run.pairwise_judges.order_by("id"))
    return _pairwise_judges[key]


def call_usage(result: ChatResult) -> dict:
    """The accounting fields a cache entry and a call record share (here and in curation)."""
    return {
        "input_tokens": result.input_tokens,
        "output_tokens": result.output_tokens,
        "reasoning_tokens": result.reasoning_tokens,
        "latency_s": result.latency_s,
        "request_id": result.request_id[:200],
    }


def cached_results(keys: Iterable[str]) -> dict[str, ChatResult]:
    """The cache's answers for ``keys`` (one query), as results of no attempt."""
    rows = ResponseCacheEntry.objects.filter(key__in=list(keys)).values_list(
        "key", "text", "input_tokens", "output_tokens", "reasoning_tokens", "request_id"
    )
    return {
        key: ChatResult(
            text=text,
            input_tokens=inp,
            output_tokens=out,
            reasoning_tokens=reasoning,
            latency_s=0.0,
            attempts=0,
            request_id=request_id,
        )
        for key, text, inp, out, reasoning, request_id in rows
    }


# --- Claiming ---------------------------------------------------------------------------------


def units_claim(unit_ids: list[int]) -> tuple[list[EvaluationUnit], str]:
    """Claim the units that are this worker's to run; returns them and the claim token.

    Pending units of running runs are claimed, and running units whose claim is older than
    their run's lease (their worker died, or stopped renewing). A SELECT by primary key says
    which; one conditional UPDATE per kind (pending, or running with an expired lease) claims
    them, so two workers never hold one unit; a SELECT reads what was won.

    Every statement finds the batch's units by primary key and never names the run: given the
    run and the state, PostgreSQL may read the run's pending units through the (run, state)
    index and filter them by id, which costs as many rows as the run has pending units — per
    batch, so a run's claims grew with the square of its size (bench/pipeline.py). A run
    cancelled between the SELECT and the UPDATE is caught by the batch's liveness check
    before its first call, which hands the units back."""
    now = timezone.now()
    token = uuid.uuid4().hex
    claim = {
        "state": UnitState.RUNNING,
        "claim_token": token,
        "claimed_at": now,
        "attempts": F("attempts") + 1,
    }
    units = EvaluationUnit.objects.filter(pk__in=unit_ids)
    rows = list(
        units.filter(state__in=[UnitState.PENDING, UnitState.RUNNING])
        .annotate(no_reply=ExpressionWrapper(Q(reply=""), output_field=BooleanField()))
        .values_list("pk", "run_id", "state", "claimed_at", "no_reply")
    )
    runs = {
        run_id: (lease_s, judging_only)
        for run_id, lease_s, judging_only in EvaluationRun.objects.filter(
            pk__in={row[1] for row in rows}, status=RunStatus.RUNNING
        ).values_list("pk", "lease_seconds", "judging_only")
    }
    pending: list[int] = []
    lapsed: dict[int, list[int]] = defaultdict(list)  # lease → running units past it
    for unit_id, run_id, state, claimed_at, no_reply in rows:
        if run_id not in runs:
            continue
        lease_s, judging_only = runs[run_id]
        if judging_only and no_reply:
            continue  # a re-judged run never generates a reply: such units stay put
        if state == UnitState.PENDING:
            pending.append(unit_id)
        elif claimed_at is not None and claimed_at < now - timedelta(seconds=lease_s):
            lapsed[lease_s].append(unit_id)
    if pending:
        EvaluationUnit.objects.filter(pk__in=pending, state=UnitState.PENDING).update(**claim)
    for lease_s, ids in lapsed.items():
        EvaluationUnit.objects.filter(
            pk__in=ids,
            state=UnitState.RUNNING,
            claimed_at__lt=now - timedelta(seconds=lease_s),
        ).update(**claim)
    claimed = list(units.filter(claim_token=token).select_related("trigger__turn__dialogue"))
    # A batch's units share a run or two and a few models: each is read and built once and
    # shared by its units, rather than joined into every unit's row and built per unit
    # (building them was 6 % of a worker's CPU, bench/pipeline.py).
    shared_runs = EvaluationRun.objects.select_related("primary_judge", "failure_mode_classifier")
    run_of = shared_runs.in_bulk({unit.run_id for unit in claimed})
    endpoint_of = ModelEndpoint.objects.in_bulk({unit.endpoint_id for unit in claimed})
    for unit in claimed:
        unit.run = run_of[unit.run_id]
        unit.endpoint = endpoint_of[unit.endpoint_id]
        _live[unit.run_id] = (time.monotonic(), True)  # the claim just saw it running
    return claimed, token


# --- A batch ----------------------------------------------------------------------------------


Asked = tuple[int, int]
"""(endpoint id, epoch) of a judge or classifier call: epoch 0 is the judgment (and the
classification), 1, 2, … the judge's repeats."""
PairAsked = tuple[int, int, str]
"""(comparison id, pairwise judge's endpoint id, order) of a pairwise judge call."""


@dataclass(eq=False)
class _Job:
    """One unit's way through the batch: its reply if it has none, every judge × epoch that
    has not answered and — for a unit that is side A of pairwise comparisons — every pairwise
    judge × order that has not, then — for a RECOVERY reply the primary judge failed — the
    classifier."""

    unit: EvaluationUnit
    turns: list[Turn]
    images: TurnImages  # the dialogue's turn images (multimodal turns), bytes read once
    judges: list[ModelEndpoint]
    salt: str
    judges_left: set[Asked]
    classify: bool  # the run's classifier still has to label this reply if it fails
    verdicts: dict[str, str] = field(default_factory=dict)  # judge name → verdict (epoch 0)
    pairs: dict[int, OtherReply] = field(default_factory=dict)  # comparison id → side B
    pair_judges: list[ModelEndpoint] = field(default_factory=list)
    pairs_left: set[PairAsked] = field(default_factory=set)
    tries: dict[Asked | PairAsked, int] = field(default_factory=dict)  # outputs asked for
    rejected: dict[Asked | PairAsked, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    outstanding: int = 0  # calls made for it that have not come back
    error: str = ""
    stopped: bool = False
    finished: bool = False


@dataclass(eq=False)
class _Call:
    job: _Job
    endpoint: ModelEndpoint
    request: ChatRequest
    purpose: CallPurpose  # a JUDGMENT call is made to its judge: the endpoint
    key: str
    epoch: int = 0
    pair: PairAsked | None = None  # a PAIRWISE call's comparison, judge and order


# Tasks on the loop must be referenced until they finish (the loop keeps only weak references).
_tasks: set[asyncio.Task] = set()


class _Batch:
    def __init__(self, units: list[EvaluationUnit], token: str) -> None:
        self.token = token
        self.unit_ids = [unit.pk for unit in units]
        self.results: queue.SimpleQueue = queue.SimpleQueue()
        self.in_flight = 0
        self.ready: list[_Call] = []
        self.waiting: list[_Call] = []
        self.next_poll = 0.0
        # Writes waiting for the next flush.
        self.replies: list[EvaluationUnit] = []
        self.judgments: list[Judgment] = []
        self.repeats: list[JudgmentRepeat] = []
        self.classifications: list[FailureModeClassification] = []
        self.pairwise_judgments: list[PairwiseJudgment] = []
        self.disagreements: list[JudgeDisagreement] = []
        self.done: list[int] = []
        self.errored: list[EvaluationUnit] = []
        self.handed_back: list[int] = []
        self.outcomes: dict[int, str] = {}
        self.uncommitted: list[tuple] = []  # a round of results whose transaction is open
        self.claimed: set[str] = set()  # in-flight claims this batch holds (calls it makes)
        # The lease is renewed every third of the shortest lease of the batch's runs, so two
        # renewals can fail or come late before it lapses.
        self.lease_s = min(unit.run.lease_seconds for unit in units)
        self.renew_every_s = self.lease_s / 3
        self.next_renewal = time.monotonic() + self.renew_every_s
        self.jobs = self._jobs(units)

    # -- set-up --

    def _jobs(self, units: list[EvaluationUnit]) -> list[_Job]:
        dialogue_ids = {unit.trigger.turn.dialogue_id for unit in units}
        turns: dict[int, list[Turn]] = defaultdict(list)
        for turn in Turn.objects.filter(dialogue_id__in=dialogue_ids).order_by(
            "dialogue_id", "index"
        ):
            turns[turn.dialogue_id].append(turn)
        images = turn_image_parts(dialogue_ids)
        # A unit without a reply on its first claim cannot have been judged yet; after a crash,
        # or in a re-judge, some judges (and the classifier) may have answered: one query each
        # for the units that may have something, so nothing answered is asked again.
        again = [unit.pk for unit in units if unit.reply or unit.attempts > 1]
        earlier: dict[int, list[tuple[str, str, str]]] = defaultdict(list)
        answered: set[tuple[int, str, int]] = set()  # (unit, judge name, epoch)
        classified: set[tuple[int, str]] = set()
        if again:
            for unit_id, name, state, verdict in Judgment.objects.filter(
                unit_id__in=again
            ).values_list("unit_id", "judge_name", "state", "verdict"):
                earlier[unit_id].append((name, state, verdict))
                answered.add((unit_id, name, 0))
            if any(unit.run.judge_epochs > 1 for unit in units):
                answered.update(
                    JudgmentRepeat.objects.filter(unit_id__in=again).values_list(
                        "unit_id", "judge_name", "epoch"
                    )
                )
            if any(unit.run.failure_mode_classifier_id for unit in units):
                classified.update(
                    FailureModeClassification.objects.filter(unit_id__in=again).values_list(
                        "unit_id", "classifier_name"
                    )
                )
        pairs, pair_answered = self._pairs(units)
        jobs = []
        for unit in units:
            judges = _run_judges(unit.run)
            pair_judges = _run_pairwise_judges(unit.run) if unit.pk in pairs else []
            classifier = unit.run.failure_mode_classifier
            jobs.append(
                _Job(
                    unit=unit,
                    turns=turns[unit.trigger.turn.dialogue_id],
                    images=images.get(unit.trigger.turn.dialogue_id, {}),
                    judges=judges,
                    salt="" if unit.run.use_cache else f"run-{unit.run_id}",
                    judges_left={
                        (judge.pk, epoch)
                        for judge in judges
                        for epoch in range(unit.run.judge_epochs)
                        if (unit.pk, judge.name, epoch) not in answered
                    },
                    classify=classifier is not None
                    and unit.trigger.type == TriggerType.RECOVERY
                    and (unit.pk, classifier.name) not in classified,
                    verdicts={
                        name: verdict
                        for name, state, verdict in earlier[unit.pk]
                        if state == JudgmentState.DONE
                    },
                    pairs=pairs.get(unit.pk, {}),
                    pair_judges=pair_judges,
                    pairs_left={
                        (comparison_id, judge.pk, order)
                        for comparison_id in pairs.get(unit.pk, {})
                        for judge in pair_judges
                        for order in PairOrder.values
                        if (comparison_id, judge.name, order) not in pair_answered
                    },
                )
            )
        return jobs

    @staticmethod
    def _pairs(
        units: list[EvaluationUnit],
    ) -> tuple[dict[int, dict[int, OtherReply]], set[tuple[int, str, str]]]:
        """The comparisons whose side A is one of ``units`` (with side B's reply), and the
        (comparison, judge name, order) verdicts they already have: two queries for the batch,
        none for a batch whose runs have no pairwise judge."""
        ids = [unit.pk for unit in units if unit.reply and _run_pairwise_judges(unit.run)]
        pairs: dict[int, dict[int, OtherReply]] = defaultdict(dict)
        if not ids:
            return pairs, set()
        for (
            comparison_id,
            unit_a_id,
            reply,
            model_name,
            condition,
        ) in PairwiseComparison.objects.filter(unit_a_id__in=ids).values_list(
            "pk", "unit_a_id", "unit_b__reply", "unit_b__endpoint__model_name", "unit_b__condition"
        ):
            pairs[unit_a_id][comparison_id] = OtherReply(reply, model_name, condition)
        if not pairs:
            return pairs, set()
        answered = set(
            PairwiseJudgment.objects.filter(comparison__unit_a_id__in=list(pairs)).values_list(
                "comparison_id", "judge_name", "order"
            )
        )
        return pairs, answered

    # -- the loop --

    def run(self) -> dict[int, str]:
        try:
            for job in self.jobs:
                self._start(job)
            self._flush()
            while self.ready or self.waiting or self.in_flight:
                if self.ready:
                    ready, self.ready = self.ready, []
                    self._dispatch(ready)
                if self.waiting and time.monotonic() >= self.next_poll:
                    waiting, self.waiting = self.waiting, []
                    self._dispatch(waiting)
                self._flush()
                if time.monotonic() >= self.next_renewal:
                    self._renew()
                if self.ready:
                    continue
                if self.in_flight:
                    timeout = min(
                        max(0.0, self.next_poll - time.monotonic()) if self.waiting else LIVE_TTL_S,
                        max(0.0, self.next_renewal - time.monotonic()),
                    )
                    try:
                        items = [self.results.get(timeout=timeout)]
                    except queue.Empty:
                        continue
                    while True:
                        try:
                            items.append(self.results.get_nowait())
                        except queue.Empty:
                            break
                    # One transaction per round: its cache rows, call records and states.
                    # A bug while moving units on still commits the cache rows and call records
                    # (what was paid for); the units' own writes are left to the hand-back.
                    # Until it commits, the round's results are also kept here: if the
                    # database goes away mid-round, ``_abandon`` records them again.
                    self.uncommitted = items
                    with transaction.atomic():
                        bugs = self._complete(items)
                        if not bugs:
                            self._flush()
                    self.uncommitted = []
                    if bugs:
                        raise bugs[0]
                elif self.waiting:
                    time.sleep(max(0.0, self.next_poll - time.monotonic()))
            self._flush()
        except BaseException:
            self._abandon()
            raise
        return self.outcomes

    def _renew(self) -> None:
        """Renew the lease of the units this batch still runs, and of the in-flight claims of
        the calls it makes: one UPDATE and one Redis round trip. A unit taken over meanwhile
        (its token changed) is left alone."""
        unfinished = [job.unit.pk for job in self.jobs if not job.finished]
        if unfinished:
            self._owned().filter(pk__in=unfinished).update(claimed_at=timezone.now())
        inflight.renew_many(list(self.claimed), lease_s=self.lease_s)
        self.next_renewal = time.monotonic() + self.renew_every_s

    def _start(self, job: _Job) -> None:
        if job.unit.reply:
            self._start_judging(job)
        elif job.unit.run.source == RunSource.IMPORTED or job.unit.run.judging_only:
            # Never claimed (``units_claim``); kept as a guard: such a run has no one to ask.
            job.error = "no reply to judge, and this run does not generate replies"
            self._finish(job)
        else:
            self._call(
                job,
                job.unit.endpoint,
                reply_request(job.unit, job.turns, job.images),
                CallPurpose.REPLY,
            )

    def _start_judging(self, job: _Job) -> None:
        """Every judge and every pairwise judge still to answer, all at once; the classifier
        (if any) once they all have."""
        for judge in job.judges:
            for epoch in range(job.unit.run.judge_epochs):
                if (judge.pk, epoch) in job.judges_left:
                    self._judge_call(job, judge, epoch)
        for comparison_id in job.pairs:
            for judge in job.pair_judges:
                for order in PairOrder.values:
                    if (comparison_id, judge.pk, order) in job.pairs_left:
                        self._pairwise_call(job, comparison_id, judge, order)
        if job.outstanding == 0:
            self._judged_all(job)

    def _judged_all(self, job: _Job) -> None:
        """Every judge has answered: label the failure mode if the primary judge failed it."""
        primary = job.unit.run.primary_judge
        if (
            job.classify
            and not (job.error or job.stopped)
            and primary is not None
            and job.verdicts.get(primary.name) == Verdict.FAIL
        ):
            job.classify = False
            self._classify_call(job)
        else:
            self._finish(job)

    def _judge_call(self, job: _Job, judge: ModelEndpoint, epoch: int = 0) -> None:
        rejected = job.rejected.get((judge.pk, epoch), ())
        request = judge_request(job.unit, job.turns, judge, images=job.images, rejected=rejected)
        self._call(job, judge, request, CallPurpose.JUDGMENT, epoch=epoch)

    def _pairwise_call(
        self, job: _Job, comparison_id: int, judge: ModelEndpoint, order: str
    ) -> None:
        asked = (comparison_id, judge.pk, order)
        request = pairwise_request(
            job.unit,
            job.turns,
            judge,
            other=job.pairs[comparison_id],
            a_shown_first=order == PairOrder.AB,
            images=job.images,
            rejected=job.rejected.get(asked, ()),
        )
        self._call(job, judge, request, CallPurpose.PAIRWISE, pair=asked)

    def _classify_call(self, job: _Job) -> None:
        classifier = job.unit.run.failure_mode_classifier
        assert classifier is not None
        rejected = job.rejected.get((classifier.pk, 0), ())
        request = classify_request(
            job.unit, job.turns, classifier, images=job.images, rejected=rejected
        )
        self._call(job, classifier, request, CallPurpose.CLASSIFICATION)

    def _call(
        self,
        job: _Job,
        endpoint: ModelEndpoint,
        request: ChatRequest,
        purpose: CallPurpose,
        *,
        epoch: int = 0,
        pair: PairAsked | None = None,
    ) -> None:
        # A repeat is a fresh sample of the same request: its own cache key, so the judge is
        # asked again rather than served its first answer; epoch 0 keeps the key it always had.
        salt = job.salt if epoch == 0 else f"{job.salt}|epoch-{epoch}"
        key = cache_key(endpoint, request, sample_index=job.unit.sample_index, salt=salt)
        job.outstanding += 1
        self.ready.append(_Call(job, endpoint, request, purpose, key, epoch, pair))

    # -- making calls --

    def _dispatch(self, calls: list[_Call]) -> None:
        """Serve what the cache has; make the calls nobody else is making; wait for the rest."""
        live: list[_Call] = []
        for call in calls:
            job = call.job
            if not job.error and not job.stopped and not _run_is_live(job.unit.run_id):
                job.stopped = True  # cancelled: no new calls
            if job.error or job.stopped:
                self._settle(call)
            else:
                live.append(call)
        if not live:
            return
        keys = [call.key for call in live]
        lease_s = max(call.job.unit.run.lease_seconds for call in live)
        claimed = inflight.claim_many(keys, lease_s=lease_s)
        hits = cached_results(keys)
        inflight.release_many([key for key in claimed if key in hits])
        submit: list[tuple[_Call, ChatProvider | None, ProviderError | None]] = []
        for call in live:
            if call.key in hits:
                self._resolve(call, hits[call.key])
            elif call.key in claimed:
                claimed.discard(call.key)  # the same request twice in a batch: made once
                try:
                    submit.append((call, provider_for_endpoint(call.endpoint), None))
                except ProviderError as exc:  # unusable configuration: fails like a call
                    submit.append((call, None, exc))
            else:
                if not self.waiting:
                    self.next_poll = time.monotonic() + IN_FLIGHT_POLL_S
                self.waiting.append(call)
        if submit:
            self.claimed.update(call.key for call, provider, _ in submit if provider is not None)
            self.in_flight += len(submit)
            aio.submit(self._spawn(submit))

    async def _spawn(self, submit) -> None:
        for call, provider, error in submit:
            if error is not None:
                self.results.put((call, None, error, None))
                continue
            task = asyncio.ensure_future(self._one(call, provider))
            _tasks.add(task)
            task.add_done_callback(_tasks.discard)

    async def _one(self, call: _Call, provider: ChatProvider) -> None:
        try:
            async with aio.calls_slot():
                result = await provider.acomplete(call.request)
        except ProviderError as exc:
            self.results.put((call, None, exc, None))
        except BaseException as exc:  # a bug, or the loop shutting down: the batch re-raises it
            self.results.put((call, None, None, exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
        else:
            self.results.put((call, result, None, None))

    # -- calls coming back --

    def _complete(self, items) -> list[BaseException]:
        """Record calls that came back and move their units on; returns the exceptions of
        calls that failed with a bug rather than a provider error (the caller raises them)."""
        for _ in items:
            self.in_flight -= 1
        cache_rows, call_rows = _records(items)
        bugs = [bug for *_, bug in items if bug is not None]
        # Cache first: from here on a crash cannot make us pay for these calls again.
        ResponseCacheEntry.objects.bulk_create(cache_rows, ignore_conflicts=True)
        inflight.release_many([call.key for call, *_ in items])
        self.claimed.difference_update(call.key for call, *_ in items)
        ProviderCall.objects.bulk_create(call_rows)
        if bugs:
            return bugs
        try:
            for call, result, error, _ in items:
                self._resolve(call, result if error is None else error)
        except Exception as exc:
            return [exc]
        return []

    def _resolve(self, call: _Call, outcome: ChatResult | ProviderError) -> None:
        job = call.job
        job.outstanding -= 1
        if isinstance(outcome, ProviderError):
            job.error = job.error or str(outcome)
        elif job.error or job.stopped:
            pass  # its result is cached; a later run of the unit will use it
        elif call.purpose == CallPurpose.REPLY:
            self._replied(job, outcome)
        elif call.purpose == CallPurpose.CLASSIFICATION:
            self._classified(call, outcome.text)
        elif call.purpose == CallPurpose.PAIRWISE:
            self._pairwise_judged(call, outcome.text)
        else:
            self._judged(call, outcome.text)
        if job.outstanding == 0 and not job.finished:
            if call.purpose in (CallPurpose.JUDGMENT, CallPurpose.PAIRWISE):
                self._judged_all(job)
            else:
                self._finish(job)

    def _replied(self, job: _Job, result: ChatResult) -> None:
        if not result.text.strip():
            job.error = "the model returned an empty reply"
            return
        unit = job.unit
        unit.reply = result.text
        unit.input_tokens = result.input_tokens
        unit.output_tokens = result.output_tokens
        unit.reasoning_tokens = result.reasoning_tokens
        unit.latency_s = result.latency_s
        self.replies.append(unit)
        self._start_judging(job)

    def _judged(self, call: _Call, raw: str) -> None:
        job, judge, epoch = call.job, call.endpoint, call.epoch
        asked = (judge.pk, epoch)
        tries = job.tries[asked] = job.tries.get(asked, 0) + 1
        model = Judgment if epoch == 0 else JudgmentRepeat
        numbered = {} if epoch == 0 else {"epoch": epoch}
        try:
            parsed = parse_judge_output(raw, reply=job.unit.reply)
        except JudgeOutputError as exc:
            job.rejected[asked] = (*job.rejected.get(asked, ()), (raw, str(exc)))
            if tries < JUDGE_MAX_TRIES:
                self._judge_call(job, judge, epoch)  # ask again, telling it what was wrong
                return
            self._record(
                model(
                    unit=job.unit,
                    judge=judge,
                    judge_name=judge.name,
                    state=JudgmentState.JUDGE_ERROR,
                    raw_output=raw,
                    attempts=JUDGE_MAX_TRIES,
                    error=f"unusable after {JUDGE_MAX_TRIES} tries: {exc}",
                    **numbered,
                )
            )
            return
        grade = grade_evidence(parsed.evidence, job.unit.reply)
        self._record(
            model(
                unit=job.unit,
                judge=judge,
                judge_name=judge.name,
                state=JudgmentState.DONE,
                verdict=parsed.verdict,
                rationale=parsed.rationale,
                evidence=parsed.evidence,
                raw_output=raw,
                attempts=tries,
                evidence_status=EvidenceStatus.EXACT,
                evidence_found_share=grade.found_share,
                **numbered,
            )
        )
        if epoch == 0:
            job.verdicts[judge.name] = parsed.verdict

    def _record(self, judged: Judgment | JudgmentRepeat) -> None:
        if isinstance(judged, JudgmentRepeat):
            self.repeats.append(judged)
        else:
            self.judgments.append(judged)

    def _pairwise_judged(self, call: _Call, raw: str) -> None:
        job, judge = call.job, call.endpoint
        assert call.pair is not None
        comparison_id, _, order = asked = call.pair
        tries = job.tries[asked] = job.tries.get(asked, 0) + 1
        try:
            parsed = parse_pairwise_output(raw)
        except JudgeOutputError as exc:
            job.rejected[asked] = (*job.rejected.get(asked, ()), (raw, str(exc)))
            if tries < JUDGE_MAX_TRIES:
                self._pairwise_call(job, comparison_id, judge, order)  # saying what was wrong
                return
            self.pairwise_judgments.append(
                PairwiseJudgment(
                    comparison_id=comparison_id,
                    judge=judge,
                    judge_name=judge.name,
                    order=order,
                    state=JudgmentState.JUDGE_ERROR,
                    raw_output=raw,
                    attempts=JUDGE_MAX_TRIES,
                    error=f"unusable after {JUDGE_MAX_TRIES} tries: {exc}",
                )
            )
            return
        self.pairwise_judgments.append(
            PairwiseJudgment(
                comparison_id=comparison_id,
                judge=judge,
                judge_name=judge.name,
                order=order,
                state=JudgmentState.DONE,
                # Stored as a side, never as the screen position the judge named.
                winner=pairwise_winner(parsed.choice, a_shown_first=order == PairOrder.AB),
                rationale=parsed.rationale,
                raw_output=raw,
                attempts=tries,
            )
        )

    def _classified(self, call: _Call, raw: str) -> None:
        job, classifier = call.job, call.endpoint
        asked = (classifier.pk, 0)
        tries = job.tries[asked] = job.tries.get(asked, 0) + 1
        try:
            label = parse_classifier_output(raw, reply=job.unit.reply)
        except ClassifierOutputError as exc:
            job.rejected[asked] = (*job.rejected.get(asked, ()), (raw, str(exc)))
            if tries < JUDGE_MAX_TRIES:
                self._classify_call(job)  # ask again, telling it what was wrong
                return
            self.classifications.append(
                FailureModeClassification(
                    unit=job.unit,
                    classifier=classifier,
                    classifier_name=classifier.name,
                    state=ClassificationState.CLASSIFIER_ERROR,
                    raw_output=raw,
                    attempts=JUDGE_MAX_TRIES,
                    error=f"unusable after {JUDGE_MAX_TRIES} tries: {exc}",
                )
            )
            return
        grade = grade_evidence(label.quote, job.unit.reply)
        self.classifications.append(
            FailureModeClassification(
                unit=job.unit,
                classifier=classifier,
                classifier_name=classifier.name,
                state=ClassificationState.DONE,
                failure_mode=label.failure_mode,
                quote=label.quote,
                quote_status=EvidenceStatus.EXACT,
                quote_found_share=grade.found_share,
                rationale=label.rationale,
                raw_output=raw,
                attempts=tries,
            )
        )

    def _settle(self, call: _Call) -> None:
        """A call that will not be made (its unit failed or its run stopped)."""
        call.job.outstanding -= 1
        if call.job.outstanding == 0 and not call.job.finished:
            self._finish(call.job)

    def _finish(self, job: _Job) -> None:
        job.finished = True
        unit = job.unit
        if job.error:
            unit.state, unit.error, unit.finished_at = (
                UnitState.ERROR,
                job.error[:4000],
                timezone.now(),
            )
            self.errored.append(unit)
            self.outcomes[unit.pk] = UnitState.ERROR
        elif job.stopped:
            self.handed_back.append(unit.pk)  # a resume picks it up again
            self.outcomes[unit.pk] = UnitState.PENDING
        else:
            if len(job.judges) > 1 and len(set(job.verdicts.values())) > 1:
                self.disagreements.append(JudgeDisagreement(unit=unit, verdicts=job.verdicts))
            self.done.append(unit.pk)
            self.outcomes[unit.pk] = UnitState.DONE

    # -- writing --

    def _owned(self):
        return EvaluationUnit.objects.filter(
            pk__in=self.unit_ids, claim_token=self.token, state=UnitState.RUNNING
        )

    def _flush(self) -> None:
        """The batch's pending writes, a statement or two each, in dependency order."""
        if self.replies:
            units_update_owned(
                fields=("reply", "input_tokens", "output_tokens", "reasoning_tokens", "latency_s"),
                claim_token=self.token,
                rows=[
                    (
                        u.reply,
                        u.input_tokens,
                        u.output_tokens,
                        u.reasoning_tokens,
                        u.latency_s,
                        u.pk,
                    )
                    for u in self.replies
                ],
            )
            self.replies = []
        # If another delivery of a unit judged or labelled it first, the unique keys keep its
        # rows.
        if self.judgments:
            Judgment.objects.bulk_create(self.judgments, ignore_conflicts=True)
            self.judgments = []
        if self.repeats:
            JudgmentRepeat.objects.bulk_create(self.repeats, ignore_conflicts=True)
            self.repeats = []
        if self.classifications:
            FailureModeClassification.objects.bulk_create(
                self.classifications, ignore_conflicts=True
            )
            self.classifications = []
        if self.pairwise_judgments:
            PairwiseJudgment.objects.bulk_create(self.pairwise_judgments, ignore_conflicts=True)
            self.pairwise_judgments = []
        if self.disagreements:
            # A judge added later extends a unit's verdicts; its adjudication, if any, stays.
            JudgeDisagreement.objects.bulk_create(
                self.disagreements,
                update_conflicts=True,
                unique_fields=["unit"],
                update_fields=["verdicts"],
            )
            self.disagreements = []
        if self.done:
            self._owned().filter(pk__in=self.done).update(
                state=UnitState.DONE, error="", finished_at=timezone.now()
            )
            self.done = []
        if self.errored:
            finished = connection.ops.adapt_datetimefield_value(timezone.now())
            units_update_owned(
                fields=("state", "error", "finished_at"),
                claim_token=self.token,
                rows=[(UnitState.ERROR, u.error, finished, u.pk) for u in self.errored],
            )
            self.errored = []
        if self.handed_back:
            self._hand_back(self.handed_back, failed=False)
            self.handed_back = []

    def _hand_back(self, unit_ids: list[int], *, failed: bool) -> None:
        """Units back to pending. Those of a failed batch are stamped ``dispatched_at``: if no
        retry of the task claims them within the run's lease (the failure was a bug, or the
        retries ran out), the sweep dispatches them again (``runs.runs_sweep``)."""
        self._owned().filter(pk__in=unit_ids).update(
            state=UnitState.PENDING,
            claim_token="",
            claimed_at=None,
            dispatched_at=timezone.now() if failed else None,
        )

    def _abandon(self) -> None:
        """The batch failed (a bug, the database or Redis gone): keep what was paid for, and
        give the units back so that a retry can run them now rather than after their lease
        (and, if no retry comes, the sweep a lease later).

        What was paid for is the round whose transaction did not commit and every call still
        in flight (waited for, up to ``SALVAGE_S``): their cache rows and call records are
        written on a fresh connection. Each step is tried on its own, so Redis being down
        (the in-flight claims) does not stop the units from being handed back."""
        deadline = time.monotonic() + SALVAGE_S
        items, self.uncommitted = list(self.uncommitted), []
        while self.in_flight and time.monotonic() < deadline:
            try:
                items.append(self.results.get(timeout=deadline - time.monotonic()))
            except queue.Empty:
                break
            self.in_flight -= 1
        unfinished = [job.unit.pk for job in self.jobs if not job.finished]

        def save() -> None:
            cache_rows, call_rows = _records(items)  # (prices may need the database)
            with transaction.atomic():
                ResponseCacheEntry.objects.bulk_create(cache_rows, ignore_conflicts=True)
                ProviderCall.objects.bulk_create(call_rows)
                self._hand_back(unfinished, failed=True)

        for pause in (*SALVAGE_DB_PAUSES_S, None):
            try:
                if not connection.in_atomic_block:  # (a caller's transaction: keep it)
                    connection.close()  # whatever state the failure left it in: start afresh
                save()
                break
            except Exception:
                if pause is None:
                    logger.exception(
                        "batch of units %s: could not save its state after a failure",
                        self.unit_ids,
                    )
                else:
                    time.sleep(pause)
        try:
            inflight.release_many([call.key for call, *_ in items])
        except Exception as exc:  # the claims expire with the lease anyway
            logger.warning(
                "batch of units %s: in-flight claims not released: %s", self.unit_ids, exc
            )


def _records(items) -> tuple[list[ResponseCacheEntry], list[ProviderCall]]:
    """The cache rows and call records of calls that came back: a result is cached and
    recorded with its cost; a provider error is recorded as a failed call; a bug, neither."""
    cache_rows, call_rows = [], []
    for call, result, error, _ in items:
        if result is not None:
            cache_rows.append(
                ResponseCacheEntry(
                    key=call.key,
                    endpoint_name=call.endpoint.name,
                    text=result.text,
                    **call_usage(result),
                )
            )
            call_rows.append(
                ProviderCall(
                    run_id=call.job.unit.run_id,
                    unit_id=call.job.unit.pk,
                    endpoint=call.endpoint,
                    purpose=call.purpose,
                    cache_key=call.key,
                    attempts=result.attempts,
                    cost_usd=call_cost(call.endpoint, result),
                    **call_usage(result),
                )
            )
        elif error is not None:
            call_rows.append(
                ProviderCall(
                    run_id=call.job.unit.run_id,
                    unit_id=call.job.unit.pk,
                    endpoint=call.endpoint,
                    purpose=call.purpose,
                    cache_key=call.key,
                    ok=False,
                    error=str(error)[:2000],
                    attempts=error.attempts,
                )
            )
    return cache_rows, call_rows


def units_execute(*, unit_ids: list[int]) -> dict[int, str]:
    """Run units to the end (see the module docstring for the idempotency contract). Returns
    each claimed unit's state afterwards (done, error, or pending when its run was stopped);
    units that were not ours to run are left out."""
    units, token = units_claim(list(unit_ids))
    if not units:
        # A redelivered or retried batch whose units are all finished: its first delivery may
        # have died before closing the run (one query, and only on this rare path).
        for run_id in set(
            EvaluationUnit.objects.filter(pk__in=unit_ids).values_list("run_id", flat=True)
        ):
            run_finish_if_complete(run_id=run_id)
        return {}
    run_ids = sorted({unit.run_id for unit in units})
    with _batches_lock:
        _batches_running.update(run_ids)
    try:
        outcomes = _Batch(units, token).run()
    finally:
        with _batches_lock:
            _batches_running.subtract(run_ids)
            last = [run_id for run_id in run_ids if _batches_running[run_id] <= 0]
            for run_id in last:
                del _batches_running[run_id]
    for run_id in last:
        run_finish_if_complete(run_id=run_id)
    return outcomes


# Batches running in this process, per run. A batch that ends while another batch of its run is
# still running here leaves closing the run to that one (which ends later, its writes after
# ours): asking the database whether any unit is still running reads the run's (run, state)
# index past an entry for every unit that has been running since the table was last vacuumed,
# a cost that grows with the run (bench/pipeline.py). The last batch of the run anywhere always
# asks; so does a batch of a failed task's retry, or the sweep.
_batches_running: Counter[int] = Counter()
_batches_lock = threading.Lock()


def unit_execute(*, unit_id: int) -> str:
    """One unit (a batch of one). Returns its state afterwards, or "skipped"."""
    return units_execute(unit_ids=[unit_id]).get(unit_id, "skipped")


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
    if pending_units(run_id=run_id).exists():
        return
    runs.filter(status=RunStatus.RUNNING).update(status=RunStatus.DONE, finished_at=now)


def pending_units(*, run_id: int):
    """The run's units still to be run: pending ones, except — in a re-judged run, which never
    generates a reply — those without a reply (left pending by a cancel before they replied)."""
    units = EvaluationUnit.objects.filter(run_id=run_id, state=UnitState.PENDING)
    return units.exclude(run__judging_only=True, reply="")
