"""Curation jobs offline: after ``load_demo``, a job of (scenario, style) targets curated with
the demo's replay endpoints through the per-target task (eager), with per-turn progress, claim,
cancel between turns, resume and the shared audit log."""

import contextlib
import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from benchmark.curation import jobs
from benchmark.evaluation.runs import RunActionError
from benchmark.models import (
    AuditAction,
    AuditVia,
    CommunicationStyle,
    CurationJob,
    CurationTarget,
    Dialogue,
    ModelEndpoint,
    RunAuditEvent,
    RunStatus,
    Scenario,
    TargetState,
)
from proactweb.celery import app as celery_app
from tests.benchmark.curation.test_offline_curation import (
    COMMAND,
    NEW_ID,
    assert_curated_from_the_recordings,
)

pytestmark = pytest.mark.django_db


@contextlib.contextmanager
def celery_eager():
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = False


def _launch(*styles: int, name: str = "job"):
    endpoints = {e.name: e for e in ModelEndpoint.objects.all()}
    scenario = Scenario.objects.get(key="DEMO_TRAVEL_01")
    return jobs.curation_job_launch(
        name=name,
        planner=endpoints["demo-atlas-large"],
        user_agent=endpoints["demo-birch-medium"],
        assistant=endpoints["demo-cedar-small"],
        targets=[(scenario, CommunicationStyle.objects.get(index=i)) for i in styles],
        via=AuditVia.COMMAND,
        actor_name="tester",
    )


def test_a_job_curates_its_targets_and_records_the_launch(
    demo, eager_celery, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as sent:
        job = _launch(1, 2)
    assert len(sent) == 1  # the tasks are sent only once the launch is committed
    job.refresh_from_db()
    done, failed = job.targets.order_by("style__index")
    assert done.state == TargetState.DONE and done.turn == 8 and done.error == ""
    assert done.dialogue == Dialogue.objects.get(unique_id_eval=NEW_ID)
    assert_curated_from_the_recordings(done.dialogue)
    # Style 2 has no recordings: the target fails with the reason and saves nothing.
    assert failed.state == TargetState.FAILED and failed.dialogue is None
    assert "nothing recorded for curation agent=planner" in failed.error
    assert not Dialogue.objects.filter(unique_id_eval__contains="__style2__").exists()
    assert job.status == RunStatus.FAILED and job.finished_at is not None
    (event,) = RunAuditEvent.objects.filter(curation_job=job)
    assert (event.action, event.via, event.actor_name, event.run, event.note) == (
        AuditAction.LAUNCH, AuditVia.COMMAND, "tester", None, "2 target(s)",
    )  # fmt: skip


def test_a_redelivered_or_duplicated_task_never_curates_twice(
    demo, eager_celery, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        job = _launch(1)
    target = job.targets.get()
    calls = []
    real = jobs.dialogue_curate
    jobs.dialogue_curate = lambda **kw: calls.append(kw) or real(**kw)
    try:
        jobs.curate_target_task.apply(args=(target.id,)).get()
    finally:
        jobs.dialogue_curate = real
    assert calls == []  # the claim failed: the target is no longer pending
    target.refresh_from_db()
    assert target.state == TargetState.DONE
    assert Dialogue.objects.filter(unique_id_eval=NEW_ID).count() == 1


def test_cancel_stops_at_the_next_turn_and_resume_finishes(
    demo, eager_celery, django_capture_on_commit_callbacks, monkeypatch
):
    real = jobs.dialogue_curate

    def cancel_after_turn_3(*, on_turn, **kwargs):
        def hook(turn):
            if turn == 4:  # turn 3 is complete: the admin clicks Cancel now
                jobs.curation_job_cancel(job_id=job_id[0], via=AuditVia.ADMIN, actor_name="a")
            on_turn(turn)

        return real(on_turn=hook, **kwargs)

    job_id = []
    with django_capture_on_commit_callbacks(execute=False) as sent:
        job = _launch(1)
    job_id.append(job.id)
    monkeypatch.setattr(jobs, "dialogue_curate", cancel_after_turn_3)
    sent[0]()
    job.refresh_from_db()
    target = job.targets.get()
    assert job.status == RunStatus.CANCELLED
    assert (target.state, target.turn, target.dialogue) == (TargetState.CANCELLED, 3, None)
    assert not Dialogue.objects.filter(unique_id_eval=NEW_ID).exists()  # nothing half-written
    with pytest.raises(RunActionError):
        jobs.curation_job_cancel(job_id=job.id, via=AuditVia.ADMIN)

    monkeypatch.setattr(jobs, "dialogue_curate", real)
    with django_capture_on_commit_callbacks(execute=True):
        assert jobs.curation_job_resume(job_id=job.id, via=AuditVia.ADMIN, actor_name="b") == 1
    job.refresh_from_db()
    target.refresh_from_db()
    assert job.status == RunStatus.DONE
    assert (target.state, target.turn) == (TargetState.DONE, 8)
    assert_curated_from_the_recordings(target.dialogue)
    actions = list(
        RunAuditEvent.objects.filter(curation_job=job)
        .order_by("id")
        .values_list("action", "actor_name")
    )
    assert actions == [
        (AuditAction.LAUNCH, "tester"), (AuditAction.CANCEL, "a"), (AuditAction.RESUME, "b"),
    ]  # fmt: skip
    with pytest.raises(RunActionError):
        jobs.curation_job_cancel(job_id=job.id, via=AuditVia.ADMIN)  # a done job


def test_cancelling_a_job_before_its_tasks_run_cancels_every_pending_target(
    demo, eager_celery, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as sent:
        job = _launch(1, 2)
    jobs.curation_job_cancel(job_id=job.id, via=AuditVia.COMMAND, actor_name="t")
    sent[0]()  # the tasks arrive after the cancel: their claims fail
    job.refresh_from_db()
    assert job.status == RunStatus.CANCELLED
    assert set(job.targets.values_list("state", flat=True)) == {TargetState.CANCELLED}
    assert not CurationTarget.objects.filter(dialogue__isnull=False).exists()


def test_a_job_without_targets_is_refused(demo):
    with pytest.raises(RunActionError, match="at least one"):
        _launch()


def test_the_commands_launch_show_cancel_and_resume_a_job(demo, django_capture_on_commit_callbacks):
    out = io.StringIO()
    with django_capture_on_commit_callbacks(execute=False) as sent:
        call_command("curate", *COMMAND, "--job", "from the shell", stdout=out)
    assert len(sent) == 1
    job = CurationJob.objects.get(name="from the shell")
    assert f"Launched curation job {job.id} (1 dialogue(s))." in out.getvalue()
    out = io.StringIO()
    call_command("curation_job", str(job.id), "--cancel", stdout=out)
    assert "'from the shell': cancelled" in out.getvalue()
    assert "DEMO_TRAVEL_01 style 1: cancelled, turn 0 of 10, claimed 0 time(s)" in out.getvalue()
    assert "  0 call(s) made (0 failed), tokens in 0 / out 0, cost $0.0000" in out.getvalue()
    with pytest.raises(CommandError, match="only a queued or running"):
        call_command("curation_job", str(job.id), "--cancel", stdout=io.StringIO())
    out = io.StringIO()
    with celery_eager(), django_capture_on_commit_callbacks(execute=True):
        call_command("curation_job", str(job.id), "--resume", stdout=out)
    assert "Re-enqueued 1 dialogue(s)." in out.getvalue()
    out = io.StringIO()
    call_command("curation_job", str(job.id), stdout=out)
    assert f"style 1: done, turn 8 of 10, claimed 1 time(s), dialogue {NEW_ID}" in out.getvalue()
    assert "  24 call(s) made (0 failed), tokens in " in out.getvalue()
    # The Planner's endpoint: 8 turns, one call each, on the demo's replay provider.
    assert "  demo-atlas-large: 8 answered, 0 failed, 0 retried, 8 in the last minute" in (
        out.getvalue()
    )
    assert "offline: no limits apply" in out.getvalue()
    events = RunAuditEvent.objects.filter(curation_job=job).order_by("id")
    assert [(e.action, e.via, e.actor_name.split(" ")[-1]) for e in events] == [
        (AuditAction.LAUNCH, AuditVia.COMMAND, "(curate)"),
        (AuditAction.CANCEL, AuditVia.COMMAND, "(curation_job)"),
        (AuditAction.RESUME, AuditVia.COMMAND, "(curation_job)"),
    ]
