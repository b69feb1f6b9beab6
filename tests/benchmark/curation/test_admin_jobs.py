"""Curation jobs from the Django admin: the launch form (scenarios × styles), the live progress
fragment per dialogue and turn, Cancel and Resume, and staff only."""

from decimal import Decimal

import pytest
from django.urls import reverse

from benchmark.evaluation import engine
from benchmark.models import (
    AuditAction,
    AuditVia,
    CommunicationStyle,
    CurationJob,
    ModelEndpoint,
    ModelPrice,
    ProviderCall,
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


def test_the_job_page_shows_its_calls_and_their_cost(
    client_for, admin_user, demo, eager_celery, django_capture_on_commit_callbacks, monkeypatch
):
    """Every call the job's dialogues made is a ProviderCall booked to the job, priced from
    ModelPrice (only the Planner's model has a price here)."""
    monkeypatch.setattr(engine, "_prices", {})  # no price remembered from an earlier test
    ModelPrice.objects.create(
        model_name="demo-atlas-large",
        input_usd_per_mtok=Decimal("2.5"),
        output_usd_per_mtok=Decimal("10"),
    )
    client = client_for(admin_user)
    with django_capture_on_commit_callbacks(execute=True):
        _launch(client, 1)
    job = CurationJob.objects.get()
    calls = ProviderCall.objects.filter(curation_job=job)
    assert calls.count() == 24 and set(calls.values_list("purpose", flat=True)) == {"curation"}
    planner = calls.filter(endpoint__name="demo-atlas-large")
    assert planner.count() == 8
    for tokens_in, tokens_out, cost_usd in planner.values_list(
        "input_tokens", "output_tokens", "cost_usd"
    ):
        assert tokens_in > 0 and tokens_out > 0
        cost = (tokens_in * Decimal("2.5") + tokens_out * Decimal("10")) / 1_000_000
        # The column keeps 6 places (each database rounds a half its own way).
        assert abs(cost_usd - cost) <= Decimal("0.0000005")
    assert not calls.exclude(endpoint__name="demo-atlas-large").exclude(cost_usd=0).exists()
    text = client.get(reverse("admin:benchmark_curationjob_progress", args=[job.pk])).content
    total_in = sum(calls.values_list("input_tokens", flat=True))
    total = sum(calls.values_list("cost_usd", flat=True))
    assert total > 0
    assert f"Calls: 24 · tokens in {total_in} /".encode() in text
    assert f"cost ${total:.4f}".encode() in text
    # Each agent's endpoint in the endpoints' table: the Planner's 8 calls and their cost.
    planner_row = text.decode().split('data-endpoint="demo-atlas-large"')[1].split("</tr>")[0]
    planner_cost = sum(planner.values_list("cost_usd", flat=True))
    assert "<td>8</td><td>0</td><td>0</td><td>8</td>" in planner_row
    assert f"${planner_cost:.4f}" in planner_row and "offline: no limits apply" in planner_row
    assert text.count(b"data-endpoint=") == 3


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
