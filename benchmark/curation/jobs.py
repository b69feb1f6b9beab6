"""Curation jobs: launch, cancel and resume a set of (scenario, style) dialogues, one Celery
task per target, with the same audit log as runs (``run_audit_record``'s table).

A target is run under a lease, as evaluation units are (``engine.units_claim``): its task claims
it with one conditional UPDATE that stamps a claim token, and refreshes its heartbeat at every
turn and before every call that reaches a provider; every later write of that task is
conditioned on the token. A target whose heartbeat is older than ``settings.CURATION_LEASE_S``
(its worker died) is taken over by its task delivered again, or dispatched again by the sweep
(``curation_jobs_sweep``, run by Celery beat beside the run sweep). Its calls go through the
response cache (``calls.py``), so the takeover replays the turns already paid for and pays only
from the call the dead worker was in.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from benchmark.curation.calls import CallBook
from benchmark.curation.loop import CurationError
from benchmark.curation.services import (
    DialogueExistsError,
    curation_blueprint,
    curation_spec_for,
    dialogue_curate,
)
from benchmark.evaluation.runs import RunActionError, audit_event_create
from benchmark.models import (
    AuditAction,
    AuditVia,
    CommunicationStyle,
    CurationJob,
    CurationTarget,
    ModelEndpoint,
    ProviderCall,
    RunAuditEvent,
    RunStatus,
    Scenario,
    TargetState,
)
from benchmark.providers.activity import Activity, CallCounts, call_counts, endpoint_activity
from benchmark.providers.base import ProviderError

UNSETTLED = (TargetState.PENDING, TargetState.RUNNING)

TARGET_MAX_CLAIMS = 5
"""A target claimed this many times whose lease lapses once more is given up (failed): every
worker that ran it died, and one more would most likely die the same way (a dialogue that
exhausts a worker's memory or time limit). A resume starts the count again."""


class JobCancelled(Exception):
    """Raised from the heartbeat when the job was cancelled: the loop stops before its next call
    or turn and nothing is saved."""


class LeaseLost(Exception):
    """Raised from the heartbeat when the target is no longer this task's (its lease lapsed and
    it was taken over, or the sweep settled it): stop at once and write nothing more."""


def lease() -> timedelta:
    return timedelta(seconds=settings.CURATION_LEASE_S)


def _dead(cutoff: datetime) -> Q:
    """Running targets whose worker has shown no sign of life since ``cutoff``."""
    return Q(state=TargetState.RUNNING) & (
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)
    )


def curation_job_audit(
    *,
    job: CurationJob,
    action: AuditAction,
    via: AuditVia,
    actor=None,
    actor_name: str = "",
    note: str = "",
) -> RunAuditEvent:
    return audit_event_create(
        subject={"curation_job": job},
        name=job.name,
        action=action,
        via=via,
        actor=actor,
        actor_name=actor_name,
        note=note,
    )


def _enqueue(target_ids: list[int]) -> None:
    for target_id in target_ids:
        curate_target_task.delay(target_id)


def _enqueue_on_commit(target_ids: list[int]) -> None:
    transaction.on_commit(lambda: _enqueue(target_ids))


def curation_job_launch(
    *,
    name: str,
    planner: ModelEndpoint,
    user_agent: ModelEndpoint,
    assistant: ModelEndpoint,
    targets: list[tuple[Scenario, CommunicationStyle]],
    via: AuditVia,
    actor=None,
    actor_name: str = "",
) -> CurationJob:
    """Create the job and one target per (scenario, style), audit the launch, and enqueue one
    task per target once the transaction commits (a task never sees an uncommitted target)."""
    if not targets:
        raise RunActionError("a curation job needs at least one (scenario, style) target")
    with transaction.atomic():
        job = CurationJob.objects.create(
            name=name,
            planner=planner,
            user_agent=user_agent,
            assistant=assistant,
            status=RunStatus.RUNNING,
            started_at=timezone.now(),
            created_by=actor if actor is not None and actor.is_authenticated else None,
        )
        rows = CurationTarget.objects.bulk_create(
            CurationTarget(job=job, scenario=scenario, style=style, dispatched_at=job.started_at)
            for scenario, style in dict.fromkeys(targets)
        )
        curation_job_audit(
            job=job,
            action=AuditAction.LAUNCH,
            via=via,
            actor=actor,
            actor_name=actor_name,
            note=f"{len(rows)} target(s)",
        )
        _enqueue_on_commit([row.id for row in rows])
    return job


def curation_job_cancel(*, job_id: int, via: AuditVia, actor=None, actor_name: str = "") -> None:
    """Stop the job: pending targets, and running ones whose worker is dead (lease lapsed), are
    cancelled now; a live running target stops before its next call or turn (its heartbeat sees
    the job's status) and saves nothing, or is cancelled by the sweep if its worker dies first."""
    with transaction.atomic():
        moved = CurationJob.objects.filter(
            pk=job_id, status__in=(RunStatus.QUEUED, RunStatus.RUNNING)
        ).update(status=RunStatus.CANCELLING)
        if not moved:
            raise RunActionError("only a queued or running curation job can be cancelled")
        now = timezone.now()
        CurationTarget.objects.filter(
            Q(state=TargetState.PENDING) | _dead(now - lease()), job_id=job_id
        ).update(state=TargetState.CANCELLED, claim_token="", heartbeat_at=now)
        job = CurationJob.objects.get(pk=job_id)
        curation_job_audit(
            job=job, action=AuditAction.CANCEL, via=via, actor=actor, actor_name=actor_name
        )
    curation_job_finish_if_settled(job_id=job_id)


def curation_job_resume(*, job_id: int, via: AuditVia, actor=None, actor_name: str = "") -> int:
    """Re-enqueue every target that is not done, with its claims counted afresh (a target still
    running is enqueued too, and taken over only if its lease has lapsed: its claim is a
    conditional UPDATE). Its calls already paid for come from the cache; a target that failed
    its checks was given a fresh sample when it failed (``target_curate``). Returns how many."""
    with transaction.atomic():
        job = CurationJob.objects.select_for_update().get(pk=job_id)
        if job.status not in (
            RunStatus.CANCELLING,
            RunStatus.CANCELLED,
            RunStatus.FAILED,
            RunStatus.DONE,
        ):
            raise RunActionError("this curation job cannot be resumed")
        now = timezone.now()
        targets = CurationTarget.objects.filter(job_id=job_id)
        targets.filter(state__in=(TargetState.CANCELLED, TargetState.FAILED)).update(
            state=TargetState.PENDING, error="", turn=0, claim_token="", claims=0
        )
        targets.filter(state=TargetState.RUNNING).update(claims=0)
        unsettled = targets.filter(state__in=UNSETTLED)
        unsettled.update(dispatched_at=now)
        ids = list(unsettled.order_by("id").values_list("id", flat=True))
        job.status = RunStatus.RUNNING
        job.finished_at = None
        job.save(update_fields=["status", "finished_at"])
        curation_job_audit(
            job=job,
            action=AuditAction.RESUME,
            via=via,
            actor=actor,
            actor_name=actor_name,
            note=f"{len(ids)} target(s)",
        )
        _enqueue_on_commit(ids)
    if not ids:
        curation_job_finish_if_settled(job_id=job_id)
    return len(ids)


def curation_job_finish_if_settled(*, job_id: int) -> None:
    """Once no target is pending or running: cancelling → cancelled; else failed if any target
    failed, done otherwise."""
    with transaction.atomic():
        job = CurationJob.objects.select_for_update().get(pk=job_id)
        if job.status not in (RunStatus.RUNNING, RunStatus.CANCELLING):
            return
        targets = CurationTarget.objects.filter(job_id=job_id)
        if targets.filter(state__in=UNSETTLED).exists():
            return
        if job.status == RunStatus.CANCELLING:
            job.status = RunStatus.CANCELLED
        elif targets.filter(state=TargetState.FAILED).exists():
            job.status = RunStatus.FAILED
        else:
            job.status = RunStatus.DONE
        job.finished_at = timezone.now()
        job.save(update_fields=["status", "finished_at"])


def target_claim(*, target_id: int) -> str | None:
    """Take the target to run it, and return the claim's token; None when it is not this task's
    to run (a duplicate or late delivery). One conditional UPDATE, so of two deliveries at most
    one wins: a pending target of a running job, or a running one whose heartbeat is older than
    the lease (its worker died), claimed fewer than ``TARGET_MAX_CLAIMS`` times."""
    now = timezone.now()
    token = uuid.uuid4().hex
    won = CurationTarget.objects.filter(
        Q(state=TargetState.PENDING) | _dead(now - lease()),
        pk=target_id,
        job__status=RunStatus.RUNNING,
        claims__lt=TARGET_MAX_CLAIMS,
    ).update(
        state=TargetState.RUNNING,
        claim_token=token,
        claims=F("claims") + 1,
        heartbeat_at=now,
        turn=0,
        error="",
    )
    return token if won else None


def target_heartbeat(*, target_id: int, token: str, turn: int | None = None) -> None:
    """Refresh the target's lease (and record the turn the loop has reached). Raises
    JobCancelled when the job is no longer running, LeaseLost when the target is no longer held
    under ``token``; the common case is one UPDATE."""
    fields: dict = {"heartbeat_at": timezone.now()}
    if turn is not None:
        fields["turn"] = turn
    owned = CurationTarget.objects.filter(
        pk=target_id, claim_token=token, state=TargetState.RUNNING
    )
    if owned.filter(job__status=RunStatus.RUNNING).update(**fields):
        return
    if owned.exists():
        raise JobCancelled
    raise LeaseLost


def _settle(target_id: int, token: str, **fields) -> None:
    """The outcome, written only while the target is still this task's."""
    CurationTarget.objects.filter(
        pk=target_id, claim_token=token, state=TargetState.RUNNING
    ).update(claim_token="", heartbeat_at=timezone.now(), **fields)


def target_curate(*, target_id: int) -> None:
    """Claim the target, run the loop with its calls booked to the job and served from the
    cache (``calls.py``) and a heartbeat at every turn and call (progress, the lease, and a stop
    when the job is cancelled or the target taken over), and settle the target. Only a whole
    dialogue is ever saved.

    Idempotent: a delivery that cannot claim the target does nothing but close the job if it is
    settled (its first delivery may have died before closing it); a takeover after a crash
    replays the paid turns from the cache; a dialogue saved by a worker that then died is found
    (``DialogueExistsError``) before any call."""
    token = target_claim(target_id=target_id)
    if token is None:
        job_id = (
            CurationTarget.objects.filter(pk=target_id).values_list("job_id", flat=True).first()
        )
        if job_id is not None:
            curation_job_finish_if_settled(job_id=job_id)
        return
    target = CurationTarget.objects.select_related(
        "job__planner",
        "job__user_agent",
        "job__assistant",
        "scenario__persona",
        "scenario__domain",
        "style",
    ).get(pk=target_id)
    job = target.job

    def on_turn(turn: int) -> None:
        target_heartbeat(target_id=target_id, token=token, turn=turn)

    book = CallBook(
        job_id=job.pk,
        # Per target, not per job: the style-blind Planner's first request is the same for a
        # scenario in every style, and two dialogues must not share a sample.
        cache_salt=f"curation-target-{target.pk}",
        sample=target.sample,
        before_call=lambda: target_heartbeat(target_id=target_id, token=token),
    )
    try:
        spec = curation_spec_for(
            scenario=target.scenario,
            style=target.style,
            blueprint=curation_blueprint(scenario=target.scenario, style=target.style),
        )
        dialogue = dialogue_curate(
            spec=spec,
            planner_endpoint=job.planner,
            user_endpoint=job.user_agent,
            assistant_endpoint=job.assistant,
            on_turn=on_turn,
            book=book,
        )
    except LeaseLost:
        return  # the target is another task's now (or settled by the sweep)
    except JobCancelled:
        _settle(target_id, token, state=TargetState.CANCELLED)
    except DialogueExistsError as exc:
        _settle(target_id, token, state=TargetState.DONE, dialogue_id=exc.dialogue_id)
    except CurationError as exc:
        # A verdict on the dialogue: replaying its cached answers would fail the same way, so
        # the next try (a resume) draws a fresh sample.
        _settle(
            target_id,
            token,
            state=TargetState.FAILED,
            error=str(exc)[:5000],
            sample=F("sample") + 1,
        )
    except ProviderError as exc:
        # E.g. a missing key or an outage beyond the retries: a resume once it is mended replays
        # the turns already paid for.
        _settle(target_id, token, state=TargetState.FAILED, error=str(exc)[:5000])
    else:
        _settle(target_id, token, state=TargetState.DONE, dialogue_id=dialogue.id)
    curation_job_finish_if_settled(job_id=job.pk)


@dataclass(frozen=True)
class CurationSweepOutcome:
    redispatched: int
    given_up: int
    cancelled: int


def curation_jobs_sweep(*, now: datetime | None = None) -> CurationSweepOutcome:
    """Dispatch again the targets of running jobs that nothing else would run, so that a job
    finishes without a resume whatever its workers died of (Celery beat calls this beside the
    run sweep, every ``EVAL_SWEEP_INTERVAL_S``; docs/curation.md). A target is *lapsed* when

    - it is running with a heartbeat older than the lease (its worker died);
    - it is pending and the whole job is quiet: no heartbeat, outcome or dispatch within the
      lease (its queued message was lost, e.g. prefetched by a worker that was killed).

    A lapsed target claimed ``TARGET_MAX_CLAIMS`` times is given up (failed, with the reason).
    A target whose lease is live is never touched, and even a target dispatched twice is run
    once (``target_claim``). Safe when two sweeps overlap: each moves lapsed targets with one
    conditional UPDATE stamped with its own token (and ``dispatched_at``, which makes them no
    longer lapsed) and enqueues only the targets carrying it. Dead and pending targets of a
    cancelling job are cancelled. Every swept job whose targets are all settled is closed;
    re-dispatches and give-ups are written to the audit log (via "sweep")."""
    now = now or timezone.now()
    cutoff = now - lease()
    redispatched = given_up = cancelled = 0
    for job in CurationJob.objects.filter(status__in=[RunStatus.RUNNING, RunStatus.CANCELLING]):
        targets = CurationTarget.objects.filter(job_id=job.pk)
        if job.status == RunStatus.CANCELLING:
            cancelled += targets.filter(Q(state=TargetState.PENDING) | _dead(cutoff)).update(
                state=TargetState.CANCELLED, claim_token="", heartbeat_at=now
            )
        else:
            lapsed = _dead(cutoff)
            recent = Q(heartbeat_at__gte=cutoff) | Q(dispatched_at__gte=cutoff)
            if not targets.filter(recent).exists():
                lapsed |= Q(state=TargetState.PENDING) & (
                    Q(dispatched_at__lt=cutoff) | Q(dispatched_at__isnull=True)
                )
            gave_up = targets.filter(lapsed, claims__gte=TARGET_MAX_CLAIMS).update(
                state=TargetState.FAILED,
                error=(
                    f"given up after {TARGET_MAX_CLAIMS} claims: every worker that curated this "
                    "dialogue died (the worker logs say why); resume the job to try again"
                ),
                claim_token="",
                heartbeat_at=now,
            )
            token = f"sweep-{uuid.uuid4().hex[:26]}"
            ids: list[int] = []
            if targets.filter(lapsed).update(
                state=TargetState.PENDING, claim_token=token, dispatched_at=now
            ):
                ids = list(
                    targets.filter(state=TargetState.PENDING, claim_token=token)
                    .order_by("id")
                    .values_list("id", flat=True)
                )
                _enqueue(ids)
            for action, count, note in (
                (AuditAction.RESUME, len(ids), "dispatched again: worker dead or message lost"),
                (AuditAction.GIVE_UP, gave_up, f"failed after {TARGET_MAX_CLAIMS} claims"),
            ):
                if count:
                    curation_job_audit(
                        job=job,
                        action=action,
                        via=AuditVia.SWEEP,
                        actor_name="sweep",
                        note=f"{count} target(s) {note}",
                    )
            redispatched += len(ids)
            given_up += gave_up
        curation_job_finish_if_settled(job_id=job.pk)
    return CurationSweepOutcome(redispatched=redispatched, given_up=given_up, cancelled=cancelled)


@dataclass(frozen=True)
class CurationSpend:
    """A job's calls that reached a provider, and what they cost (cache hits are not calls)."""

    calls: int
    failed_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal


def curation_job_call_counts(*, job: CurationJob) -> dict[int, CallCounts]:
    """The job's calls counted per endpoint id (``activity.call_counts``): one query."""
    return call_counts(ProviderCall.objects.filter(curation_job=job))


def curation_job_spend(
    *, job: CurationJob, counts: dict[int, CallCounts] | None = None
) -> CurationSpend:
    """``counts``: ``curation_job_call_counts``, when read already."""
    if counts is None:
        counts = curation_job_call_counts(job=job)
    return CurationSpend(
        calls=sum(c.calls for c in counts.values()),
        failed_calls=sum(c.failed for c in counts.values()),
        input_tokens=sum(c.input_tokens for c in counts.values()),
        output_tokens=sum(c.output_tokens for c in counts.values()),
        cost_usd=sum((c.cost_usd for c in counts.values()), Decimal(0)),
    )


def curation_job_endpoint_activity(
    *, job: CurationJob, counts: dict[int, CallCounts] | None = None
) -> Activity:
    """The job's three agents' endpoints with their calls so far and the limits in force
    (``benchmark.providers.activity``). ``counts``: as for ``curation_job_spend``."""
    if counts is None:
        counts = curation_job_call_counts(job=job)
    return endpoint_activity(
        counts,
        ModelEndpoint.objects.filter(pk__in={job.planner_id, job.user_agent_id, job.assistant_id}),
    )


@shared_task(
    acks_late=True,
    name="benchmark.curate_target",
    soft_time_limit=3600,
    time_limit=3660,
)
def curate_target_task(target_id: int) -> None:
    target_curate(target_id=target_id)
