"""Curation jobs from the Django admin: the launch form (scenarios × styles), the live progress
fragment per dialogue and turn, Cancel and Resume, and staff only."""

import pytest
from django.urls import reverse

from benchmark.models import (
    AuditAction,
    AuditVia,
    CommunicationStyle,
    CurationJob,
    ModelEndpoint,
    RunAuditEvent,
    RunStatus,
    Scenario,
    TargetState,
)
from tests.benchmark.curation.test_offline_curation import (
    NEW_ID,
)

pytestmark = pytest.mark.django_db


def _launch(client, *styles):
    endpoints = {e.name: e.pk for e in ModelEndpoint.objects.all()}
    return client.post(
        reverse("admin:benchmark_curationjob_add"),
        {
            "name": "admin job",
            "planner": endpoints["demo-atlas-large"],
            "user_agent": endpoints["demo-birch-medium"],
            "assistant": endpoints["demo-cedar-small"],
            "scenarios": [Scenario.objects.get(key="DEMO_TRAVEL_01").pk],
            "styles": [CommunicationStyle.objects.get(index=i).pk for i in styles],
        },
    )


def test_launch_watch_and_link_to_the_dialogue(
    client_for, admin_user, demo, eager_celery, django_capture_on_commit_callbacks
):
    client = client_for(admin_user)
    assert (
        b"Launch a curation job" in client.get(reverse("admin:benchmark_curationjob_add")).content
    )
    with django_capture_on_commit_callbacks(execute=True) as sent:
        response = _launch(client, 1, 2)
    job = CurationJob.objects.get()
    assert response.status_code == 302
    assert response.url == reverse("admin:benchmark_curationjob_change", args=[job.pk])
    assert len(sent) == 1
    assert job.targets.count() == 2
    page = client.get(reverse("admin:benchmark_curationjob_progress", args=[job.pk]))
    text = page.content.decode()
    assert page.status_code == 200
    assert "turn 8 of 10" in text and NEW_ID in text
    assert "nothing recorded for curation agent=planner" in text  # style 2's error
    assert 'data-action="cancel" disabled' in text  # a failed job: resume only
    assert 'data-action="resume" disabled' not in text
    change = client.get(reverse("admin:benchmark_curationjob_change", args=[job.pk]))
    assert b"hx-get" in change.content and b"job-progress" in change.content
    (event,) = RunAuditEvent.objects.filter(curation_job=job)
    assert (event.action, event.via, event.actor) == (
        AuditAction.LAUNCH,
        AuditVia.ADMIN,
        admin_user,
    )


def test_the_launch_form_needs_a_scenario_and_a_style(client_for, admin_user, demo):
    response = _launch(client_for(admin_user))
    assert response.status_code == 200 and b"This field is required" in response.content
    assert not CurationJob.objects.exists()


def test_cancel_and_resume_buttons(
    client_for, admin_user, demo, eager_celery, django_capture_on_commit_callbacks
):
    client = client_for(admin_user)
    with django_capture_on_commit_callbacks(execute=False):  # the tasks never arrive
        _launch(client, 1)
    job = CurationJob.objects.get()
    client.post(reverse("admin:benchmark_curationjob_action", args=[job.pk, "cancel"]))
    job.refresh_from_db()
    assert job.status == RunStatus.CANCELLED
    assert job.targets.get().state == TargetState.CANCELLED
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("admin:benchmark_curationjob_action", args=[job.pk, "resume"]))
    job.refresh_from_db()
    assert job.status == RunStatus.DONE
    assert job.targets.get().dialogue.unique_id_eval == NEW_ID
    actions = RunAuditEvent.objects.filter(curation_job=job).order_by("id")
    assert [e.action for e in actions] == [
        AuditAction.LAUNCH, AuditAction.CANCEL, AuditAction.RESUME,
    ]  # fmt: skip
    # A GET never acts; a second cancel of a done job is refused with a message, not a 500.
    client.get(reverse("admin:benchmark_curationjob_action", args=[job.pk, "cancel"]))
    response = client.post(
        reverse("admin:benchmark_curationjob_action", args=[job.pk, "cancel"]), follow=True
    )
    assert b"only a queued or running curation job can be cancelled" in response.content
    assert RunAuditEvent.objects.filter(curation_job=job).count() == 3


@pytest.mark.parametrize("who", ["annotator", "researcher"])
def test_non_staff_never_reach_a_job(client_for, who, request, admin_user, demo):
    with_staff = client_for(admin_user)
    _launch(with_staff, 1)  # queued tasks are not run: no eager mode, and no commit in the test
    job = CurationJob.objects.get()
    client = client_for(request.getfixturevalue(who))
    for url in (
        reverse("admin:benchmark_curationjob_add"),
        reverse("admin:benchmark_curationjob_progress", args=[job.pk]),
        reverse("admin:benchmark_curationjob_change", args=[job.pk]),
    ):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response.url
    client.post(reverse("admin:benchmark_curationjob_action", args=[job.pk, "cancel"]))
    job.refresh_from_db()
    assert job.status == RunStatus.RUNNING
