"""Curation targets under a lease: the claim and the heartbeat, a redelivered task taking over a
target whose worker died, the sweep (re-dispatch, give-up, a cancelling job whose worker died,
a quiet job's lost message, two sweeps at once), and the response cache that makes a takeover
pay only from the call the dead worker was in. On the demo's replay endpoints, in-process; the
real worker killed with SIGKILL is ``test_job_worker_crash.py``. Runs on SQLite and on
PostgreSQL (both halves of CI): the lease is plain database work."""

import io
from collections import Counter
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from benchmark.curation import jobs
from benchmark.curation.loop import CurationError
from benchmark.models import (
    AuditAction,
    AuditVia,
    CallPurpose,
    CommunicationStyle,
    CurationJob,
    CurationTarget,
    Dialogue,
    ModelEndpoint,
    ProviderCall,
    ResponseCacheEntry,
    RunAuditEvent,
    RunStatus,
    Scenario,
    TargetState,
)
from tests.benchmark.curation.test_offline_curation import (
    COMMAND,
    NEW_ID,
    assert_curated_from_the_recordings,
)

pytestmark = pytest.mark.django_db

LEASE_S = 60
CALLS = 24  # the demo's recorded dialogue: 8 turns × 3 agents, every answer accepted at once


class WorkerDied(BaseException):
    """Stands for the worker's SIGKILL: it passes every ``except Exception`` and nothing after
    it runs, so the target is left as a dead worker leaves it (running, its lease ticking)."""


@pytest.fixture(autouse=True)
def _lease(settings):
    settings.CURATION_LEASE_S = LEASE_S


def _later(seconds: float = 1):
    """A moment at which every heartbeat written now has lapsed."""
    return timezone.now() + timedelta(seconds=LEASE_S + seconds)


def _launch(django_capture_on_commit_callbacks, *styles: int) -> CurationJob:
    """A job whose queued tasks never arrive (the test runs them itself)."""
    endpoints = {e.name: e for e in ModelEndpoint.objects.all()}
    scenario = Scenario.objects.get(key="DEMO_TRAVEL_01")
    with django_capture_on_commit_callbacks(execute=False):
        return jobs.curation_job_launch(
            name="lease",
            planner=endpoints["demo-atlas-large"],
            user_agent=endpoints["demo-birch-medium"],
            assistant=endpoints["demo-cedar-small"],
            targets=[(scenario, CommunicationStyle.objects.get(index=i)) for i in styles],
            via=AuditVia.COMMAND,
            actor_name="tester",
        )


def _dies_at_turn(monkeypatch, turn: int) -> None:
    """The next ``target_curate`` dies as its loop reaches ``turn`` (after its heartbeat)."""
    real = jobs.dialogue_curate

    def curate(*, on_turn, **kwargs):
        def hook(n):
            on_turn(n)
            if n == turn:
                monkeypatch.setattr(jobs, "dialogue_curate", real)  # the next worker lives
                raise WorkerDied

        return real(on_turn=hook, **kwargs)

    monkeypatch.setattr(jobs, "dialogue_curate", curate)


def _die_at_turn(monkeypatch, target: CurationTarget, turn: int) -> None:
    _dies_at_turn(monkeypatch, turn)
    with pytest.raises(WorkerDied):
        jobs.target_curate(target_id=target.pk)
    target.refresh_from_db()
    assert (target.state, target.turn, target.claims) == (TargetState.RUNNING, turn, 1)


def _paid(job) -> Counter:
    calls = ProviderCall.objects.filter(curation_job=job, ok=True)
    assert set(calls.values_list("purpose", flat=True)) <= {CallPurpose.CURATION}
    return Counter(calls.values_list("cache_key", flat=True))


def _assert_done_once(job: CurationJob) -> CurationTarget:
    job.refresh_from_db()
    target = job.targets.get()
    assert (job.status, target.state, target.claim_token) == (RunStatus.DONE, TargetState.DONE, "")
    assert Dialogue.objects.filter(unique_id_eval=NEW_ID).count() == 1
    assert_curated_from_the_recordings(target.dialogue)
    paid = _paid(job)
    assert sum(paid.values()) == CALLS and max(paid.values()) == 1  # nothing paid for twice
    return target


def test_the_claim_and_every_turn_refresh_the_heartbeat(
    demo, django_capture_on_commit_callbacks, monkeypatch
):
    job = _launch(django_capture_on_commit_callbacks, 1)
    target = job.targets.get()
    assert (target.state, target.claims, target.heartbeat_at) == (TargetState.PENDING, 0, None)
    assert target.dispatched_at == job.started_at
    seen = []
    real = jobs.dialogue_curate

    def curate(*, on_turn, **kwargs):
        def hook(n):
            before = timezone.now()
            on_turn(n)
            row = CurationTarget.objects.get(pk=target.pk)
            assert row.turn == n and row.heartbeat_at >= before  # stamped now, not by auto_now
            seen.append((row.state, row.claims, row.claim_token))

        return real(on_turn=hook, **kwargs)

    monkeypatch.setattr(jobs, "dialogue_curate", curate)
    jobs.target_curate(target_id=target.pk)
    assert len(seen) == 8
    (state, claims, token), *_ = seen
    assert (state, claims) == (TargetState.RUNNING, 1) and len(token) == 32
    assert set(seen) == {seen[0]}  # one claim held throughout
    target = _assert_done_once(job)
    assert target.claims == 1 and target.heartbeat_at is not None


def test_a_redelivered_task_takes_over_a_target_whose_worker_died_and_not_a_live_one(
    demo, django_capture_on_commit_callbacks, monkeypatch
):
    job = _launch(django_capture_on_commit_callbacks, 1)
    target = job.targets.get()
    _die_at_turn(monkeypatch, target, 4)
    assert sum(_paid(job).values()) == 9  # turns 1-3, paid and cached
    # Delivered again while the lease is live: it might be running elsewhere, so hands off.
    jobs.target_curate(target_id=target.pk)
    target.refresh_from_db()
    assert (target.state, target.claims, target.turn) == (TargetState.RUNNING, 1, 4)
    assert sum(_paid(job).values()) == 9
    # Once the lease has lapsed, the delivery takes it over, replays turns 1-3 from the cache
    # and pays only for turns 4-8.
    CurationTarget.objects.filter(pk=target.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=LEASE_S + 1)
    )
    jobs.target_curate(target_id=target.pk)
    assert _assert_done_once(job).claims == 2


def test_a_worker_that_lost_its_lease_stops_and_cannot_overwrite_the_new_owner(
    demo, django_capture_on_commit_callbacks
):
    job = _launch(django_capture_on_commit_callbacks, 1)
    target = job.targets.get()
    first = jobs.target_claim(target_id=target.pk)
    assert first is not None and jobs.target_claim(target_id=target.pk) is None
    CurationTarget.objects.filter(pk=target.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=LEASE_S + 1)
    )
    second = jobs.target_claim(target_id=target.pk)  # a slow worker's target, taken over
    assert second not in (None, first)
    with pytest.raises(jobs.LeaseLost):
        jobs.target_heartbeat(target_id=target.pk, token=first, turn=5)
    jobs._settle(target.pk, first, state=TargetState.FAILED, error="stale")  # a no-op
    jobs.target_heartbeat(target_id=target.pk, token=second, turn=2)
    target.refresh_from_db()
    assert (target.state, target.turn, target.claims, target.error) == (
        TargetState.RUNNING, 2, 2, "",
    )  # fmt: skip
    jobs.curation_job_cancel(job_id=job.pk, via=AuditVia.COMMAND, actor_name="t")
    with pytest.raises(jobs.JobCancelled):
        jobs.target_heartbeat(target_id=target.pk, token=second)


def test_the_sweep_dispatches_a_dead_workers_target_again_and_the_job_finishes(
    demo, django_capture_on_commit_callbacks, monkeypatch, eager_celery
):
    job = _launch(django_capture_on_commit_callbacks, 1)
    target = job.targets.get()
    _die_at_turn(monkeypatch, target, 6)
    assert jobs.curation_jobs_sweep().redispatched == 0  # its lease is live
    swept = jobs.curation_jobs_sweep(now=_later())
    assert (swept.redispatched, swept.given_up) == (1, 0)  # and run at once (eager)
    assert _assert_done_once(job).claims == 2
    assert jobs.curation_jobs_sweep(now=_later()).redispatched == 0
    events = RunAuditEvent.objects.filter(curation_job=job).order_by("id")
    assert [(e.action, e.via, e.actor_name, e.note) for e in events] == [
        (AuditAction.LAUNCH, AuditVia.COMMAND, "tester", "1 target(s)"),
        (
            AuditAction.RESUME, AuditVia.SWEEP, "sweep",
            "1 target(s) dispatched again: worker dead or message lost",
        ),
    ]  # fmt: skip


def test_two_sweeps_at_once_dispatch_a_dead_target_once(
    demo, django_capture_on_commit_callbacks, monkeypatch
):
    job = _launch(django_capture_on_commit_callbacks, 1, 2)
    dead, other = job.targets.order_by("style__index")
    _die_at_turn(monkeypatch, dead, 2)
    CurationTarget.objects.filter(pk=other.pk).update(state=TargetState.DONE)
    sent: list[list[int]] = []
    monkeypatch.setattr(jobs, "_enqueue", sent.append)  # what each sweep queues, not run
    now = _later()
    first, second = jobs.curation_jobs_sweep(now=now), jobs.curation_jobs_sweep(now=now)
    assert (first.redispatched, second.redispatched) == (1, 0)
    assert sent == [[dead.pk]]
    dead.refresh_from_db()
    assert dead.state == TargetState.PENDING and dead.claim_token.startswith("sweep-")


def test_a_quiet_jobs_pending_target_whose_message_was_lost_is_dispatched_again(
    demo, django_capture_on_commit_callbacks, eager_celery
):
    job = _launch(django_capture_on_commit_callbacks, 1)  # its message never arrives
    assert jobs.curation_jobs_sweep().redispatched == 0  # it may be waiting in the queue
    assert jobs.curation_jobs_sweep(now=_later()).redispatched == 1
    assert _assert_done_once(job).claims == 1


def test_a_target_whose_every_worker_died_is_given_up_and_the_job_closes(
    demo, django_capture_on_commit_callbacks, monkeypatch
):
    job = _launch(django_capture_on_commit_callbacks, 1)
    target = job.targets.get()
    CurationTarget.objects.filter(pk=target.pk).update(claims=jobs.TARGET_MAX_CLAIMS - 1)
    _dies_at_turn(monkeypatch, 3)
    with pytest.raises(WorkerDied):
        jobs.target_curate(target_id=target.pk)  # its last claim, and its worker dies too
    CurationTarget.objects.filter(pk=target.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=LEASE_S + 1)
    )
    assert jobs.target_claim(target_id=target.pk) is None  # no sixth claim, even lapsed
    swept = jobs.curation_jobs_sweep(now=_later())
    assert (swept.redispatched, swept.given_up) == (0, 1)
    target.refresh_from_db()
    job.refresh_from_db()
    assert target.state == TargetState.FAILED
    assert target.error.startswith(f"given up after {jobs.TARGET_MAX_CLAIMS} claims")
    assert job.status == RunStatus.FAILED and job.finished_at is not None
    event = RunAuditEvent.objects.filter(curation_job=job).latest("id")
    assert (event.action, event.via, event.note) == (
        AuditAction.GIVE_UP, AuditVia.SWEEP, "1 target(s) failed after 5 claims",
    )  # fmt: skip
    # A resume counts the claims afresh.
    with django_capture_on_commit_callbacks(execute=False):
        assert jobs.curation_job_resume(job_id=job.pk, via=AuditVia.COMMAND) == 1
    target.refresh_from_db()
    assert (target.state, target.claims) == (TargetState.PENDING, 0)


def test_a_cancel_while_the_worker_is_dead_settles_at_once(
    demo, django_capture_on_commit_callbacks, monkeypatch
):
    job = _launch(django_capture_on_commit_callbacks, 1)
    target = job.targets.get()
    _die_at_turn(monkeypatch, target, 3)
    CurationTarget.objects.filter(pk=target.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=LEASE_S + 1)
    )
    jobs.curation_job_cancel(job_id=job.pk, via=AuditVia.ADMIN, actor_name="a")
    job.refresh_from_db()
    target.refresh_from_db()
    assert (job.status, target.state) == (RunStatus.CANCELLED, TargetState.CANCELLED)


def test_a_cancelling_job_whose_worker_then_died_is_swept_to_cancelled_and_resumes_from_cache(
    demo, django_capture_on_commit_callbacks, monkeypatch, eager_celery
):
    job = _launch(django_capture_on_commit_callbacks, 1)
    target = job.targets.get()
    _die_at_turn(monkeypatch, target, 5)
    jobs.curation_job_cancel(job_id=job.pk, via=AuditVia.ADMIN, actor_name="a")
    job.refresh_from_db()
    assert job.status == RunStatus.CANCELLING  # its worker may still be alive
    assert jobs.curation_jobs_sweep().cancelled == 0
    swept = jobs.curation_jobs_sweep(now=_later())
    assert (swept.cancelled, swept.redispatched) == (1, 0)
    job.refresh_from_db()
    target.refresh_from_db()
    assert (job.status, target.state, target.dialogue) == (
        RunStatus.CANCELLED, TargetState.CANCELLED, None,
    )  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        jobs.curation_job_resume(job_id=job.pk, via=AuditVia.ADMIN, actor_name="b")
    _assert_done_once(job)  # turns 1-4 from the cache


def test_a_target_that_fails_its_checks_draws_a_fresh_sample_on_resume(
    demo, django_capture_on_commit_callbacks, monkeypatch, eager_celery
):
    """Replaying a failed dialogue's cached answers would fail it the same way; a provider
    failure keeps the sample, so the turns already paid for are replayed once it is mended."""
    job = _launch(django_capture_on_commit_callbacks, 1)
    target = job.targets.get()
    real = jobs.dialogue_curate

    def fails_its_checks_at_turn_3(*, on_turn, **kwargs):
        def hook(n):
            on_turn(n)
            if n == 3:
                raise CurationError("turn 3: the User Agent gave no acceptable message", turn=3)

        return real(on_turn=hook, **kwargs)

    monkeypatch.setattr(jobs, "dialogue_curate", fails_its_checks_at_turn_3)
    jobs.target_curate(target_id=target.pk)
    target.refresh_from_db()
    assert (target.state, target.sample) == (TargetState.FAILED, 1)
    keys = set(_paid(job))
    assert len(keys) == 6
    monkeypatch.setattr(jobs, "dialogue_curate", real)
    with django_capture_on_commit_callbacks(execute=True):
        jobs.curation_job_resume(job_id=job.pk, via=AuditVia.ADMIN, actor_name="b")
    job.refresh_from_db()
    target = job.targets.get()
    assert (job.status, target.state, target.sample) == (RunStatus.DONE, TargetState.DONE, 1)
    assert_curated_from_the_recordings(target.dialogue)
    paid = _paid(job)
    assert max(paid.values()) == 1
    assert keys < set(paid) and len(set(paid) - keys) == CALLS  # none of the 6 replayed


def test_two_targets_asked_the_same_question_do_not_share_its_cached_answer(
    demo, django_capture_on_commit_callbacks, monkeypatch
):
    """The style-blind Planner's first request for a scenario is the same in every style (while
    the scenario is unchanged: here style 1's worker dies before its dialogue is saved). Each
    target draws its own answer: style 2 has none recorded, so it fails at the Planner's first
    call instead of being served style 1's from the cache."""
    job = _launch(django_capture_on_commit_callbacks, 1, 2)
    first, second = job.targets.order_by("style__index")
    _die_at_turn(monkeypatch, first, 2)
    jobs.target_curate(target_id=second.pk)
    second.refresh_from_db()
    assert second.state == TargetState.FAILED
    assert "nothing recorded for curation agent=planner" in second.error
    assert "turn=1" in second.error
    assert ProviderCall.objects.filter(curation_job=job, ok=False).count() == 1


def test_calls_outside_a_job_are_recorded_but_not_cached(demo):
    cached = ResponseCacheEntry.objects.count()
    call_command("curate", *COMMAND, stdout=io.StringIO())
    calls = ProviderCall.objects.filter(purpose=CallPurpose.CURATION)
    assert calls.count() == CALLS and not calls.exclude(curation_job=None).exists()
    assert ResponseCacheEntry.objects.count() == cached
