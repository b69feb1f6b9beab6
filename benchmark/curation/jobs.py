"""Curation jobs: launch, cancel and resume a set of (scenario, style) dialogues, one Celery
task per target, with the same audit log as runs (``run_audit_record``'s table)."""

from __future__ import annotations

from celery import shared_task
from django.db import transaction
from django.utils import timezone

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
    RunAuditEvent,
    RunStatus,
    Scenario,
    TargetState,
)
from benchmark.providers.base import ProviderError

UNSETTLED = (TargetState.PENDING, TargetState.RUNNING)


class JobCancelled(Exception):
    """Raised from the loop's ``on_turn`` hook when the job was cancelled: the loop stops before
    the next turn and nothing is saved."""


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


def _enqueue_on_commit(target_ids: list[int]) -> None:
    def send() -> None:
        for target_id in target_ids:
            curate_target_task.delay(target_id)

    transaction.on_commit(send)


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
            CurationTarget(job=job, scenario=scenario, style=style)
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
    """Stop the job: pending targets are cancelled now; a running target stops before its next
    turn (its task sees the job's status) and saves nothing."""
    with transaction.atomic():
        moved = CurationJob.objects.filter(
            pk=job_id, status__in=(RunStatus.QUEUED, RunStatus.RUNNING)
        ).update(status=RunStatus.CANCELLING)
        if not moved:
            raise RunActionError("only a queued or running curation job can be cancelled")
        CurationTarget.objects.filter(job_id=job_id, state=TargetState.PENDING).update(
            state=TargetState.CANCELLED
        )
        job = CurationJob.objects.get(pk=job_id)
        curation_job_audit(
            job=job, action=AuditAction.CANCEL, via=via, actor=actor, actor_name=actor_name
        )
    curation_job_finish_if_settled(job_id=job_id)


def curation_job_resume(*, job_id: int, via: AuditVia, actor=None, actor_name: str = "") -> int:
    """Re-enqueue every target that is not done (a target still running elsewhere is not
    claimed twice: its task's claim only takes a pending target). Returns how many."""
    with transaction.atomic():
        job = CurationJob.objects.select_for_update().get(pk=job_id)
        if job.status not in (
            RunStatus.CANCELLING,
            RunStatus.CANCELLED,
            RunStatus.FAILED,
            RunStatus.DONE,
        ):
            raise RunActionError("this curation job cannot be resumed")
        CurationTarget.objects.filter(
            job_id=job_id, state__in=(TargetState.CANCELLED, TargetState.FAILED)
        ).update(state=TargetState.PENDING, error="", turn=0)
        ids = list(
            CurationTarget.objects.filter(job_id=job_id, state=TargetState.PENDING).values_list(
                "id", flat=True
            )
        )
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


def target_claim(*, target_id: int) -> bool:
    """Pending → running, atomically: a redelivered or duplicated task finds the target no
    longer pending and does nothing."""
    return bool(
        CurationTarget.objects.filter(
            pk=target_id, state=TargetState.PENDING, job__status=RunStatus.RUNNING
        ).update(state=TargetState.RUNNING, turn=0, error="")
    )


def _settle(target_id: int, **fields) -> None:
    CurationTarget.objects.filter(pk=target_id).update(**fields)


def target_curate(*, target_id: int) -> None:
    """Claim the target, run the loop with a per-turn hook (progress, and a stop when the job
    is cancelled), and settle the target. Only a whole dialogue is ever saved."""
    if not target_claim(target_id=target_id):
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
        if CurationJob.objects.filter(pk=job.pk).values_list("status", flat=True)[0] != (
            RunStatus.RUNNING
        ):
            raise JobCancelled
        CurationTarget.objects.filter(pk=target_id).update(turn=turn)

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
        )
    except JobCancelled:
        _settle(target_id, state=TargetState.CANCELLED)
    except DialogueExistsError as exc:
        _settle(target_id, state=TargetState.DONE, dialogue_id=exc.dialogue_id)
    except (CurationError, ProviderError) as exc:
        _settle(target_id, state=TargetState.FAILED, error=str(exc)[:5000])
    else:
        _settle(target_id, state=TargetState.DONE, dialogue_id=dialogue.id)
    curation_job_finish_if_settled(job_id=job.pk)


@shared_task(
    acks_late=True,
    name="benchmark.curate_target",
    soft_time_limit=3600,
    time_limit=3660,
)
def curate_target_task(target_id: int) -> None:
    target_curate(target_id=target_id)
