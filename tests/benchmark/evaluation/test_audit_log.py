"""The audit log of actions that spend money or stop it being spent: launch, resume, retry
errors, cancel — from the admin's actions and buttons and from ``run_eval`` — with who and when;
read-only in the admin."""

import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from benchmark.models import EvaluationRun, EvaluationUnit, RunAuditEvent
from tests.benchmark.evaluation.test_admin_runs import _create_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager():
    from proactweb.celery import app as celery_app

    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


@pytest.fixture
def server():
    from tests.fakes.vendor_server import FakeVendorServer

    judge = '{"verdict": "FAIL", "rationale": "Generic.", "evidence": "Noted"}'
    with FakeVendorServer(reply=lambda body: judge if body["model"] == "j" else "Noted.") as fake:
        yield fake


@pytest.fixture
def endpoints(server):
    from benchmark.corpus.importer import corpus_import
    from benchmark.models import ModelEndpoint
    from tests.factories import jsonl_bytes, records_for, stream

    corpus_import(stream=stream(jsonl_bytes(records_for(1))))
    return [
        ModelEndpoint.objects.create(
            name=name,
            display_name=name,
            provider="openai-compatible",
            model_name=name,
            base_url=server.openai_base_url,
        )
        for name in ("m", "j")
    ]


def _events(run):
    return list(
        RunAuditEvent.objects.filter(run=run)
        .order_by("created_at", "id")
        .values_list("action", "actor_name", "via")
    )


def test_admin_launch_resume_and_retry_are_recorded_with_who_and_when(
    client_for, admin_user, endpoints, eager, django_capture_on_commit_callbacks
):
    client = client_for(admin_user)
    run = _create_run(client, endpoints)
    for action in ("launch", "resume"):
        with django_capture_on_commit_callbacks(execute=True):
            client.post(reverse("admin:benchmark_evaluationrun_action", args=[run.pk, action]))
    EvaluationUnit.objects.filter(run=run).update(state="error", error="HTTP 500")
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("admin:benchmark_evaluationrun_action", args=[run.pk, "retry"]))
    with django_capture_on_commit_callbacks(execute=True):
        client.post(  # the changelist action: the same record
            reverse("admin:benchmark_evaluationrun_changelist"),
            {"action": "resume_runs", "_selected_action": [run.pk]},
        )
    name = admin_user.username
    assert _events(run) == [
        ("launch", name, "admin"),
        ("resume", name, "admin"),
        ("retry_errors", name, "admin"),
        ("resume", name, "admin"),
    ]
    event = RunAuditEvent.objects.get(run=run, action="retry_errors")
    assert event.actor == admin_user and event.note == "6 errored unit(s)"
    assert event.created_at is not None and event.run_name == "admin run"
    # An action that does nothing is not recorded: a launch of a run no longer queued, a
    # cancel of a run that has ended.
    client.post(reverse("admin:benchmark_evaluationrun_action", args=[run.pk, "launch"]))
    client.post(reverse("admin:benchmark_evaluationrun_action", args=[run.pk, "cancel"]))
    assert len(_events(run)) == 4


def test_cancelling_a_run_is_recorded_from_the_button_the_action_and_the_command(
    client_for, admin_user, endpoints
):
    client = client_for(admin_user)
    runs = []
    for n in range(3):
        run = _create_run(client, endpoints)
        EvaluationRun.objects.filter(pk=run.pk).update(status="running", name=f"run {n}")
        runs.append(run)
    button, action, command = runs
    client.post(reverse("admin:benchmark_evaluationrun_action", args=[button.pk, "cancel"]))
    client.post(
        reverse("admin:benchmark_evaluationrun_changelist"),
        {"action": "cancel_runs", "_selected_action": [action.pk]},
    )
    out = io.StringIO()
    call_command("run_eval", "--cancel", str(command.pk), stdout=out, stderr=io.StringIO())
    assert "cancelling" in out.getvalue()
    name = admin_user.username
    assert _events(button) == [("cancel", name, "admin")]
    assert RunAuditEvent.objects.get(run=button).run_name == "run 0"
    assert _events(action) == [("cancel", name, "admin")]
    ((what, who, via),) = _events(command)
    assert (what, via) == ("cancel", "command") and who.endswith("(run_eval)")
    for run in runs:
        run.refresh_from_db()
        assert run.status == "cancelled"  # no unit was running: cancelled at once
    # A second cancel is refused, names why, and is not recorded.
    with pytest.raises(CommandError, match="Not cancelled: only a queued or running run"):
        call_command("run_eval", "--cancel", str(command.pk), stdout=out, stderr=io.StringIO())
    with pytest.raises(CommandError, match="cannot be given together"):
        call_command("run_eval", "--cancel", "1", "--resume", "1", stdout=out)
    assert len(_events(command)) == 1


def test_run_eval_records_launch_and_resume_as_the_system_user(endpoints, eager):
    out = io.StringIO()
    call_command(
        "run_eval", "--name", "cli", "--models", "m", "--judges", "j", "--dialogues", "all",
        stdout=out, stderr=io.StringIO(),
    )  # fmt: skip
    run = EvaluationRun.objects.get(name="cli")
    call_command("run_eval", "--resume", str(run.pk), stdout=out, stderr=io.StringIO())
    events = _events(run)
    assert [action for action, _, _ in events] == ["launch", "resume"]
    assert all(via == "command" and who.endswith("(run_eval)") for _, who, via in events)


def test_the_audit_log_is_read_only_in_the_admin_and_survives_the_run(
    client_for, admin_user, endpoints, eager, django_capture_on_commit_callbacks
):
    client = client_for(admin_user)
    run = _create_run(client, endpoints)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("admin:benchmark_evaluationrun_action", args=[run.pk, "launch"]))
    event = RunAuditEvent.objects.get()
    listing = client.get(reverse("admin:benchmark_runauditevent_changelist"))
    assert listing.status_code == 200 and b"admin run" in listing.content
    assert client.get(reverse("admin:benchmark_runauditevent_add")).status_code == 403
    delete = reverse("admin:benchmark_runauditevent_delete", args=[event.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 403
    change = client.post(
        reverse("admin:benchmark_runauditevent_change", args=[event.pk]),
        {"actor_name": "someone else"},
    )
    assert change.status_code in (403, 200)
    event.refresh_from_db()
    assert event.actor_name == admin_user.username
    run.delete()
    event.refresh_from_db()
    assert event.run is None and event.run_name == "admin run"
