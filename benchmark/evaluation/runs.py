"""Run lifecycle: create, launch (fan out to units), cancel, resume, retry errors, progress.

State machine: queued → running → done | cancelling → cancelled; failed when the launch itself
fails. Every transition is a conditional UPDATE, so two admins pressing a button at once, or a
worker finishing while someone cancels, cannot leave a run in a mixed state.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from benchmark.evaluation.tasks import run_units
from benchmark.models import (
    AuditAction,
    AuditVia,
    Condition,
    Dialogue,
    DialogueStatus,
    EvaluationRun,
    EvaluationUnit,
    FailureModeClassification,
    Judgment,
    JudgmentState,
    ModelEndpoint,
    PairOrder,
    PairwiseJudgment,
    ProviderCall,
    RunAuditEvent,
    RunStatus,
    Trigger,
    UnitState,
)
from benchmark.providers.activity import Activity, CallCounts, call_counts, endpoint_activity


class RunActionError(Exception):
    """A run action that does not apply to the run's current state."""


CANCELLABLE = (RunStatus.QUEUED, RunStatus.RUNNING)
FINISHED = (UnitState.DONE, UnitState.ERROR)
"""The unit states a run's progress counts as finished."""
RESUMABLE = (
    RunStatus.CANCELLING,
    RunStatus.CANCELLED,
    RunStatus.DONE,
    RunStatus.FAILED,
    RunStatus.RUNNING,
)
"""The states ``run_cancel`` and ``run_resume`` move a run from (a queued run is resumed by
launching it)."""

NO_ACCEPTED_DIALOGUES = "No accepted dialogues: accept some in Dialogues, or choose dialogues"
"""The start of the refusal when a run's default dialogues are none; each interface says how to
choose them."""


def dialogues_default():
    """The dialogues a run evaluates when none are chosen: the accepted ones."""
    return Dialogue.objects.filter(status=DialogueStatus.ACCEPTED)


@transaction.atomic
def run_create(
    *,
    name: str,
    endpoints: Iterable[ModelEndpoint],
    judges: Iterable[ModelEndpoint],
    dialogues: Iterable[Dialogue] | None = None,
    conditions: Iterable[str] = (Condition.VANILLA,),
    samples: int = 1,
    use_cache: bool = True,
    primary_judge: ModelEndpoint | None = None,
    created_by=None,
) -> EvaluationRun:
    """A queued run. Default dialogues: the accepted ones (``dialogues_default``)."""
    conditions = list(dict.fromkeys(conditions))
    unknown = set(conditions) - set(Condition.values)
    if unknown or not conditions:
        raise RunActionError(f"unknown condition(s): {', '.join(sorted(unknown)) or 'none given'}")
    judges = list(judges)
    run = EvaluationRun.objects.create(
        name=name,
        conditions=conditions,
        samples=samples,
        use_cache=use_cache,
        primary_judge=primary_judge or (judges[0] if judges else None),
        created_by=created_by,
    )
    run.endpoints.set(list(endpoints))
    run.judges.set(judges)
    if dialogues is None:
        dialogues = dialogues_default()
    run.dialogues.set(list(dialogues))
    return run


def run_check_launchable(*, run: EvaluationRun) -> None:
    """Raise ``RunActionError`` saying why launching ``run`` would evaluate nothing, and what to
    choose instead. A launch that makes no unit ends at once as "done, 0 / 0 units", which looks
    like success; every interface (admin, command) asks this before it enqueues the launch."""
    if run.status != RunStatus.QUEUED:
        raise RunActionError(f"only a queued run can be launched; this one is {run.status}")
    if not run.endpoints.exists():
        raise RunActionError("the run has no models under test: choose some on the run")
    if not run.dialogues.exists():
        raise RunActionError(
            "the run has no dialogues, so there is nothing to evaluate: choose some on the run"
        )
    if not Trigger.objects.filter(turn__dialogue__in=run.dialogues.all()).exists():
        raise RunActionError(
            "the run's dialogues have no trigger turns, so there is nothing to evaluate: "
            "choose dialogues that have triggers"
        )


def run_actions(*, run: EvaluationRun, progress: RunProgress) -> frozenset[str]:
    """The run-page buttons that would do something now (the others are shown disabled): the
    page polls the progress and redraws them with it, so they follow the run's live state."""
    actions = set()
    if run.status == RunStatus.QUEUED:
        actions.add("launch")
    if run.status in CANCELLABLE:
        actions.add("cancel")
    unfinished = progress.by_state.get(UnitState.PENDING, 0) + progress.by_state.get(
        UnitState.RUNNING, 0
    )
    # A failed launch may have made no unit: resuming it makes them.
    if run.status in RESUMABLE and (unfinished or run.status == RunStatus.FAILED):
        actions.add("resume")
    if progress.by_state.get(UnitState.ERROR, 0):
        actions.add("retry")
    if run.status in REJUDGEABLE:
        actions.update(("rejudge", "pairwise"))
    return frozenset(actions)


def run_audit_record(
    *,
    run: EvaluationRun,
    action: AuditAction,
    via: AuditVia,
    actor=None,
    actor_name: str = "",
    note: str = "",
) -> RunAuditEvent:
    """Record who launched, resumed, retried, re-judged or cancelled a run: the actions that
    spend money, or stop it being spent (a cancelled run's results are partial, and the log says
    who made them so)."""
    return audit_event_create(
        subject={"run": run},
        name=run.name,
        action=action,
        via=via,
        actor=actor,
        actor_name=actor_name,
        note=note,
    )


def audit_event_create(
    *,
    subject: dict,
    name: str,
    action: AuditAction,
    via: AuditVia,
    actor=None,
    actor_name: str = "",
    note: str = "",
) -> RunAuditEvent:
    """One audit event about ``subject`` (``{"run": …}`` or ``{"curation_job": …}``), the
    actor's name kept even after the account is gone."""
    return RunAuditEvent.objects.create(
        **subject,
        run_name=name,
        action=action,
        via=via,
        actor=actor if actor is not None and actor.is_authenticated else None,
        actor_name=(actor_name or (actor.get_username() if actor is not None else ""))[:200],
        note=note[:500],
    )


def run_units_create(*, run: EvaluationRun) -> int:
    """One unit per trigger × model × condition × sample (idempotent: existing units stay)."""
    triggers = list(
        Trigger.objects.filter(turn__dialogue__in=run.dialogues.all()).values_list("id", flat=True)
    )
    endpoints = list(run.endpoints.values_list("id", flat=True))
    units = [
        EvaluationUnit(
            run=run,
            trigger_id=trigger_id,
            endpoint_id=endpoint_id,
            condition=condition,
            sample_index=sample,
        )
        for trigger_id in triggers
        for endpoint_id in endpoints
        for condition in run.conditions
        for sample in range(run.samples)
    ]
    EvaluationUnit.objects.bulk_create(units, batch_size=2000, ignore_conflicts=True)
    return len(units)


def _enqueue(unit_ids: list[int]) -> None:
    """One task per batch of ``settings.EVAL_BATCH_SIZE`` units, published through a single
    broker connection and producer (a fresh one per message costs milliseconds each)."""
    size = settings.EVAL_BATCH_SIZE
    with run_units.app.producer_or_acquire() as producer:
        for start in range(0, len(unit_ids), size):
            run_units.apply_async((unit_ids[start : start + size],), producer=producer)


def run_launch(*, run_id: int) -> int:
    """Queued → running: create the units and enqueue them. Returns how many were enqueued.
    Called from a task, so an admin's click never waits for the fan-out."""
    run = EvaluationRun.objects.get(pk=run_id)
    if run.status != RunStatus.QUEUED:
        return 0
    try:
        run_units_create(run=run)
    except Exception as exc:
        EvaluationRun.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
            status=RunStatus.FAILED, notes=f"launch failed: {exc}"[:2000]
        )
        raise
    moved = EvaluationRun.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, started_at=timezone.now()
    )
    if moved != 1:
        return 0
    pending = list(
        EvaluationUnit.objects.filter(run_id=run_id, state=UnitState.PENDING)
        .order_by("id")
        .values_list("id", flat=True)
    )
    _enqueue(pending)
    if not pending:
        from benchmark.evaluation.engine import run_finish_if_complete

        run_finish_if_complete(run_id=run_id)
    return len(pending)


def run_cancel(*, run_id: int) -> None:
    """Stop making calls: units check the run's status before every call, and pending units
    are never started. The run is cancelled once no unit is running any more."""
    moved = EvaluationRun.objects.filter(pk=run_id, status__in=CANCELLABLE).update(
        status=RunStatus.CANCELLING
    )
    if not moved:
        raise RunActionError("only a queued or running run can be cancelled")
    from benchmark.evaluation.engine import run_finish_if_complete

    run_finish_if_complete(run_id=run_id)


def run_resume(*, run_id: int) -> int:
    """Re-enqueue every unit that is not done (pending, and running ones whose worker may have
    died: a unit still legitimately running keeps its lease and is not run twice)."""
    run = EvaluationRun.objects.get(pk=run_id)
    if run.status == RunStatus.QUEUED:
        return run_launch(run_id=run_id)
    moved = EvaluationRun.objects.filter(pk=run_id, status__in=RESUMABLE).update(
        status=RunStatus.RUNNING, finished_at=None
    )
    if not moved:
        raise RunActionError("this run cannot be resumed")
    units = EvaluationUnit.objects.filter(
        run_id=run_id, state__in=[UnitState.PENDING, UnitState.RUNNING]
    )
    if run.judging_only:
        units = units.exclude(reply="")  # a re-judge: no unit is made, no reply generated
    else:
        run_units_create(run=run)
    unit_ids = list(units.values_list("id", flat=True))
    _enqueue(unit_ids)
    if not unit_ids:
        from benchmark.evaluation.engine import run_finish_if_complete

        run_finish_if_complete(run_id=run_id)
    return len(unit_ids)


def run_retry_errors(*, run_id: int) -> int:
    """Errored units back to pending, and enqueued again."""
    with transaction.atomic():
        ids = list(
            EvaluationUnit.objects.select_for_update()
            .filter(run_id=run_id, state=UnitState.ERROR)
            .values_list("id", flat=True)
        )
        EvaluationUnit.objects.filter(id__in=ids).update(
            state=UnitState.PENDING, error="", claim_token="", claimed_at=None
        )
        EvaluationRun.objects.filter(pk=run_id).exclude(status=RunStatus.RUNNING).update(
            status=RunStatus.RUNNING, finished_at=None
        )
    transaction.on_commit(lambda: _enqueue(ids))
    return len(ids)


@transaction.atomic
def run_pin(*, run_id: int | None) -> None:
    """Make the run ``run_id`` the one the dashboard opens on (``None``: no run; the newest
    finished one then). Idempotent. Any other pinned run is unpinned first, in the same
    transaction; of two pins at once, the second to commit fails on the run_one_pinned
    constraint rather than leaving two runs pinned."""
    pinned = EvaluationRun.objects.filter(pinned=True)
    if run_id is None:
        pinned.update(pinned=False)
        return
    pinned.exclude(pk=run_id).update(pinned=False)
    EvaluationRun.objects.filter(pk=run_id).update(pinned=True)


REJUDGEABLE = (RunStatus.DONE, RunStatus.CANCELLED, RunStatus.FAILED)
"""The states a run may be re-judged from: whatever replies it has are final."""


@dataclass(frozen=True)
class Rejudge:
    """What a re-judge asked for; ``units``: the units with a reply that were enqueued."""

    judges_added: tuple[str, ...]
    epochs: int
    classifier: str
    units: int


def run_rejudge(
    *,
    run_id: int,
    judges: Iterable[ModelEndpoint] = (),
    epochs: int | None = None,
    classifier: ModelEndpoint | None = None,
    via: AuditVia,
    actor=None,
    actor_name: str = "",
) -> Rejudge:
    """Add judges, repeats (``epochs``: verdicts per judge per reply) and/or a failure-mode
    classifier to a finished, cancelled, failed or imported run, and ask them about every reply
    it has — without generating a single reply: the run becomes ``judging_only`` (the engine
    never claims a unit of it that has no reply). Only answers missing are asked for: a judge
    the run already has, or an epoch already given, costs nothing. Every unit with a reply goes
    back to pending; the run is running again (``started_at`` is stamped afresh: the engine's
    per-run judge list follows it), and cancel, resume and the sweep work as for any run.
    Audited as REJUDGE (judges or epochs) or CLASSIFY (a classifier only)."""
    judges = list(judges)
    if epochs is not None and not 1 <= epochs <= 20:
        raise RunActionError(f"epochs must be between 1 and 20 (got {epochs})")
    if not judges and epochs is None and classifier is None:
        raise RunActionError("nothing to do: name a judge, a number of epochs or a classifier")
    with transaction.atomic():
        run = EvaluationRun.objects.select_for_update().get(pk=run_id)
        if run.status not in REJUDGEABLE:
            raise RunActionError(
                f"only a done, cancelled or failed run can be re-judged; this one is {run.status}"
            )
        existing = set(run.judges.values_list("pk", flat=True))
        added = [judge for judge in judges if judge.pk not in existing]
        run.judges.add(*added)
        if run.primary_judge_id is None and (judges or existing):
            run.primary_judge = judges[0] if judges else run.judges.order_by("id").first()
        if epochs is not None:
            run.judge_epochs = epochs
        if classifier is not None:
            run.failure_mode_classifier = classifier
        run.judging_only = True
        run.status = RunStatus.RUNNING
        run.started_at = timezone.now()
        run.finished_at = None
        run.save(
            update_fields=[
                "primary_judge",
                "judge_epochs",
                "failure_mode_classifier",
                "judging_only",
                "status",
                "started_at",
                "finished_at",
            ]
        )
        units = EvaluationUnit.objects.filter(run_id=run_id, state=UnitState.DONE).exclude(reply="")
        unit_ids = list(units.order_by("id").values_list("id", flat=True))
        units.update(state=UnitState.PENDING, claim_token="", claimed_at=None, dispatched_at=None)
        outcome = Rejudge(
            judges_added=tuple(judge.name for judge in added),
            epochs=run.judge_epochs,
            classifier=classifier.name if classifier else "",
            units=len(unit_ids),
        )
        parts = [f"{outcome.units} replies"]
        if judges:
            parts.append("judges " + ", ".join(judge.name for judge in judges))
        if epochs is not None:
            parts.append(f"{epochs} epochs")
        if classifier is not None:
            parts.append(f"classifier {classifier.name}")
        run_audit_record(
            run=run,
            action=AuditAction.CLASSIFY
            if classifier is not None and not judges and epochs is None
            else AuditAction.REJUDGE,
            via=via,
            actor=actor,
            actor_name=actor_name,
            note="; ".join(parts),
        )
    transaction.on_commit(lambda: _enqueue(unit_ids))
    if not unit_ids:
        from benchmark.evaluation.engine import run_finish_if_complete

        transaction.on_commit(lambda: run_finish_if_complete(run_id=run_id))
    return outcome


UNIT_MAX_CLAIMS = 8
"""A unit claimed this many times whose lease lapses once more is given up (state error): every
batch that ran it failed or died, and one more would most likely fail the same way."""


@dataclass(frozen=True)
class SweepOutcome:
    redispatched: int
    given_up: int


def runs_sweep(*, now: datetime | None = None) -> SweepOutcome:
    """Dispatch again the units of running runs that nothing else would run, so that a run
    finishes without a resume whatever its batches died of (Celery beat calls this every
    ``EVAL_SWEEP_INTERVAL_S``; docs/reliability.md). A unit is *lapsed* when

    - it is running under a claim older than the run's lease (its worker died, or its batch
      failed and could not hand it back);
    - it is pending with a ``dispatched_at`` older than the lease (a failed batch handed it
      back, or an earlier sweep dispatched it, and no task has claimed it since);
    - it is pending and the whole run is quiet: nothing claimed, finished or dispatched within
      the lease, nor the run launched or re-judged (its queued message was lost, e.g. prefetched
      by a worker that was killed).

    A unit whose lease is live is never touched, so a unit being run is not dispatched twice;
    and even a unit dispatched twice is run once (``engine.units_claim`` is a conditional
    UPDATE). Safe to run concurrently: each sweep moves lapsed units with one conditional UPDATE
    stamped with its own token and enqueues only the units carrying it. Units of a cancelling
    run whose worker died are handed back (not run), so that the run reaches cancelled; every
    swept run whose units are all finished is closed."""
    from benchmark.evaluation.engine import run_finish_if_complete

    now = now or timezone.now()
    redispatched = given_up = 0
    runs = EvaluationRun.objects.filter(status__in=[RunStatus.RUNNING, RunStatus.CANCELLING])
    for run_id, lease_s, status, judging_only, started_at in runs.values_list(
        "pk", "lease_seconds", "status", "judging_only", "started_at"
    ):
        cutoff = now - timedelta(seconds=lease_s)
        units = EvaluationUnit.objects.filter(run_id=run_id)
        if judging_only:
            units = units.exclude(reply="")  # never claimed in a re-judge: nothing to sweep
        dead = Q(state=UnitState.RUNNING, claimed_at__lt=cutoff)
        if status == RunStatus.CANCELLING:
            units.filter(dead).update(state=UnitState.PENDING, claim_token="", claimed_at=None)
        else:
            lapsed = dead | Q(state=UnitState.PENDING, dispatched_at__lt=cutoff)
            recent = Q(claimed_at__gte=cutoff) | Q(finished_at__gte=cutoff)
            # A run launched within the lease has its messages queued: not quiet, even before
            # its first claim (a short lease would otherwise dispatch every unit twice).
            launched = started_at is not None and started_at >= cutoff
            if not launched and not units.filter(recent | Q(dispatched_at__gte=cutoff)).exists():
                lapsed |= Q(state=UnitState.PENDING, dispatched_at=None)
            given_up += units.filter(lapsed, attempts__gte=UNIT_MAX_CLAIMS).update(
                state=UnitState.ERROR,
                error=(
                    f"given up after {UNIT_MAX_CLAIMS} claims: every batch that ran this unit "
                    "failed or its worker died (the worker logs say why)"
                ),
                claim_token="",
                claimed_at=None,
                finished_at=now,
            )
            token = f"sweep-{uuid.uuid4().hex[:26]}"
            if units.filter(lapsed).update(
                state=UnitState.PENDING, claim_token=token, claimed_at=None, dispatched_at=now
            ):
                ids = list(
                    units.filter(state=UnitState.PENDING, claim_token=token)
                    .order_by("id")
                    .values_list("id", flat=True)
                )
                _enqueue(ids)
                redispatched += len(ids)
        run_finish_if_complete(run_id=run_id)
    return SweepOutcome(redispatched=redispatched, given_up=given_up)


@dataclass(frozen=True)
class RunProgress:
    total: int
    by_state: dict[str, int]
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal
    eta_s: float | None
    latest_errors: list[tuple[int, str]]
    judged: dict[str, int] = field(default_factory=dict)
    """Verdicts so far (epoch 0) per judge name."""
    classified: int = 0
    """Failure-mode labels so far (errors included)."""
    pairwise: dict[str, int] = field(default_factory=dict)
    """Pairwise verdicts so far (both orders, errors included) per pairwise judge name."""
    pairwise_expected: int = 0
    """Pairwise verdicts each pairwise judge gives in all: the run's comparisons × 2 orders."""
    call_counts: dict[int, CallCounts] = field(default_factory=dict)
    """The calls so far per endpoint id (``run_endpoint_activity`` takes them from here)."""

    @property
    def finished(self) -> int:
        return sum(self.by_state.get(s, 0) for s in FINISHED)

    @property
    def percent(self) -> float:
        return 100.0 * self.finished / self.total if self.total else 0.0


def with_unit_counts(runs: QuerySet[EvaluationRun]) -> QuerySet[EvaluationRun]:
    """``runs`` with ``units_total`` and ``units_finished`` (done or in error) on each, read by
    correlated subqueries in the same statement: a list of runs draws every progress bar
    without a query per run."""
    units = EvaluationUnit.objects.filter(run=OuterRef("pk")).order_by()

    def count(of: QuerySet[EvaluationUnit]) -> Coalesce:
        return Coalesce(Subquery(of.values("run").annotate(n=Count("id")).values("n")), 0)

    return runs.annotate(
        units_total=count(units), units_finished=count(units.filter(state__in=FINISHED))
    )


def run_endpoint_activity(
    *, run: EvaluationRun, counts: dict[int, CallCounts] | None = None
) -> Activity:
    """Each endpoint the run calls — models under test, judges, pairwise judges, the
    failure-mode classifier — with its calls so far and the limits in force
    (``benchmark.providers.activity``). ``counts``: the run's ``RunProgress.call_counts``, when
    read already."""
    single = [pk for pk in (run.primary_judge_id, run.failure_mode_classifier_id) if pk]
    called = ModelEndpoint.objects.filter(  # one statement, the many-to-many reads inside it
        Q(pk__in=run.endpoints.values("pk"))
        | Q(pk__in=run.judges.values("pk"))
        | Q(pk__in=run.pairwise_judges.values("pk"))
        | Q(pk__in=single)
    )
    if counts is None:
        counts = call_counts(ProviderCall.objects.filter(run=run))
    return endpoint_activity(counts, called)


def run_progress(*, run: EvaluationRun) -> RunProgress:
    """Units by state, tokens and cost so far, an ETA from the pace so far (a few queries)."""
    by_state = dict(
        run.units.values_list("state").annotate(n=Count("id")).values_list("state", "n")
    )
    total = sum(by_state.values())
    per_endpoint = call_counts(ProviderCall.objects.filter(run=run))
    finished = sum(by_state.get(s, 0) for s in FINISHED)
    eta = None
    remaining = by_state.get(UnitState.PENDING, 0) + by_state.get(UnitState.RUNNING, 0)
    if run.status == RunStatus.RUNNING and run.started_at and finished and remaining:
        last = run.units.filter(~Q(finished_at=None)).aggregate(t=Max("finished_at"))["t"]
        elapsed = ((last or timezone.now()) - run.started_at) / timedelta(seconds=1)
        eta = elapsed / finished * remaining
    errors = list(
        run.units.filter(state=UnitState.ERROR)
        .order_by("-finished_at")
        .values_list("id", "error")[:5]
    )
    judged = dict(
        Judgment.objects.filter(unit__run=run, state=JudgmentState.DONE)
        .values_list("judge_name")
        .annotate(n=Count("id"))
        .values_list("judge_name", "n")
    )
    classified = FailureModeClassification.objects.filter(unit__run=run).count()
    pairwise: dict[str, int] = {}
    comparisons = 0
    if run.pairwise_judges.exists():
        pairwise = dict.fromkeys(run.pairwise_judges.values_list("name", flat=True), 0)
        pairwise.update(
            PairwiseJudgment.objects.filter(comparison__run=run)
            .values_list("judge_name")
            .annotate(n=Count("id"))
            .values_list("judge_name", "n")
        )
        comparisons = run.pairwise_comparisons.count()
    return RunProgress(
        judged=dict(sorted(judged.items())),
        classified=classified,
        pairwise=dict(sorted(pairwise.items())),
        pairwise_expected=len(PairOrder.values) * comparisons,
        total=total,
        by_state=by_state,
        calls=sum(c.calls for c in per_endpoint.values()),
        input_tokens=sum(c.input_tokens for c in per_endpoint.values()),
        output_tokens=sum(c.output_tokens for c in per_endpoint.values()),
        cost_usd=sum((c.cost_usd for c in per_endpoint.values()), Decimal(0)),
        call_counts=per_endpoint,
        eta_s=eta,
        latest_errors=errors,
    )
