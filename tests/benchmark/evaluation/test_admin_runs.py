"""Runs from the Django admin: create, launch (after commit, never in the request), watch the
live progress fragment, cancel, resume, retry errors; endpoints' Test connection."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from benchmark.corpus.importer import corpus_import
from benchmark.models import Dialogue, EvaluationRun, EvaluationUnit, ModelEndpoint
from proactweb.celery import app as celery_app
from tests.factories import jsonl_bytes, records_for, stream
from tests.fakes.vendor_server import FakeVendorServer

pytestmark = pytest.mark.django_db

JUDGE = '{"verdict": "FAIL", "rationale": "Generic.", "evidence": "Noted"}'


@pytest.fixture
def eager():
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


@pytest.fixture
def server():
    reply = lambda body: JUDGE if body["model"] == "j" else "Noted. Anything else?"  # noqa: E731
    with FakeVendorServer(reply=reply) as fake:
        yield fake


@pytest.fixture
def endpoints(server):
    corpus_import(stream=stream(jsonl_bytes(records_for(2))))
    return [
        ModelEndpoint.objects.create(
            name=name,
            display_name=name.upper(),
            provider="openai-compatible",
            model_name=name,
            base_url=server.openai_base_url,
        )
        for name in ("m", "j")
    ]


def _launched_run(client, endpoints, capture_on_commit) -> EvaluationRun:
    """A run created and launched from the admin, run to the end (eager Celery)."""
    run = _create_run(client, endpoints)
    with capture_on_commit(execute=True):
        client.post(reverse("admin:benchmark_evaluationrun_action", args=[run.pk, "launch"]))
    return run


def _create_run(client, endpoints):
    model, judge = endpoints
    response = client.post(
        reverse("admin:benchmark_evaluationrun_add"),
        {
            "name": "admin run",
            "dialogues": [d.pk for d in Dialogue.objects.all()],
            "endpoints": [model.pk],
            "judges": [judge.pk],
            "primary_judge": judge.pk,
            "conditions": ["vanilla", "rubric_injected"],
            "samples": 1,
            "use_cache": "on",
            "lease_seconds": 900,
            "notes": "",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    return EvaluationRun.objects.get(name="admin run")


def test_launch_from_the_admin_runs_after_commit_and_progress_shows_it(
    client_for, admin_user, endpoints, eager, django_capture_on_commit_callbacks
):
    client = client_for(admin_user)
    run = _create_run(client, endpoints)
    assert run.status == "queued" and run.created_by == admin_user
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(
            reverse("admin:benchmark_evaluationrun_action", args=[run.pk, "launch"])
        )
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == "queued"  # the request itself did no work
    for callback in callbacks:
        callback()
    run.refresh_from_db()
    assert run.status == "done"
    assert EvaluationUnit.objects.filter(run=run, state="done").count() == 2 * 3 * 2
    page = client.get(reverse("admin:benchmark_evaluationrun_progress", args=[run.pk]))
    html = page.content.decode()
    # 12 replies; the judge saw 6 distinct requests (the fake model answers both conditions
    # alike), the other 6 came from the cache: 18 paid calls.
    assert "12 / 12 units" in html and "Calls: 18" in html
    change = client.get(reverse("admin:benchmark_evaluationrun_change", args=[run.pk]))
    assert b'hx-trigger="load, every 2s"' in change.content


def test_cancel_and_resume_buttons(
    client_for, admin_user, endpoints, eager, django_capture_on_commit_callbacks
):
    client = client_for(admin_user)
    run = _create_run(client, endpoints)
    client.post(reverse("admin:benchmark_evaluationrun_action", args=[run.pk, "cancel"]))
    run.refresh_from_db()
    assert run.status == "cancelled"
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("admin:benchmark_evaluationrun_action", args=[run.pk, "resume"]))
    run.refresh_from_db()
    assert run.status == "done"


def test_a_started_run_cannot_be_redefined(
    client_for, admin_user, endpoints, eager, django_capture_on_commit_callbacks
):
    client = client_for(admin_user)
    run = _launched_run(client, endpoints, django_capture_on_commit_callbacks)
    page = client.get(reverse("admin:benchmark_evaluationrun_change", args=[run.pk])).content
    assert b'name="conditions"' not in page and b'name="endpoints"' not in page


def test_test_connection_action_reports_success_and_failure(
    client_for, admin_user, endpoints, server
):
    client = client_for(admin_user)
    broken = ModelEndpoint.objects.create(
        name="broken",
        display_name="Broken",
        provider="openai",
        model_name="x",
        api_key_env="PROACTBENCH_TEST_UNSET_API_KEY",
    )
    response = client.post(
        reverse("admin:benchmark_modelendpoint_changelist"),
        {"action": "test_connection", "_selected_action": [endpoints[0].pk, broken.pk]},
        follow=True,
    )
    html = response.content.decode()
    assert "M: answered" in html
    assert "PROACTBENCH_TEST_UNSET_API_KEY" in html and "is not set" in html


def test_annotators_and_researchers_cannot_touch_runs(client_for, annotator, researcher, endpoints):
    for user in (annotator, researcher):
        response = client_for(user).get(reverse("admin:benchmark_evaluationrun_changelist"))
        assert response.status_code == 302 and "login" in response.url


def test_pin_and_unpin_actions_choose_the_run_the_dashboard_opens_on(client_for, admin_user):
    first, second = (EvaluationRun.objects.create(name=n, status="done") for n in ("a", "b"))
    client = client_for(admin_user)
    changelist = reverse("admin:benchmark_evaluationrun_changelist")

    def act(action: str, *runs: EvaluationRun) -> str:
        response = client.post(
            changelist, {"action": action, "_selected_action": [r.pk for r in runs]}, follow=True
        )
        return response.content.decode()

    assert "a: pinned; the dashboard opens on it" in act("pin_run", first).lower()
    assert "b: pinned" in act("pin_run", second).lower()  # the pin moves
    assert list(EvaluationRun.objects.filter(pinned=True)) == [second]
    assert "Select one run" in act("pin_run", first, second)
    assert list(EvaluationRun.objects.filter(pinned=True)) == [second]
    act("unpin_runs", first)  # not the pinned one: nothing changes
    assert list(EvaluationRun.objects.filter(pinned=True)) == [second]
    act("unpin_runs", first, second)
    assert not EvaluationRun.objects.filter(pinned=True).exists()
    # Shown on the run's page, set only by the actions.
    page = client.get(reverse("admin:benchmark_evaluationrun_change", args=[first.pk]))
    assert b"Pinned" in page.content and b'name="pinned"' not in page.content


def test_the_run_list_draws_every_progress_bar_without_a_query_per_run(
    client_for, admin_user, endpoints, eager, django_capture_on_commit_callbacks
):
    client = client_for(admin_user)
    run = _launched_run(client, endpoints, django_capture_on_commit_callbacks)
    units = list(EvaluationUnit.objects.filter(run=run).order_by("pk").values_list("pk", flat=True))
    EvaluationUnit.objects.filter(pk__in=units[:2]).update(state="pending")
    EvaluationUnit.objects.filter(pk=units[2]).update(state="error")  # finished, too
    changelist = reverse("admin:benchmark_evaluationrun_changelist")

    def statements() -> int:
        with CaptureQueriesContext(connection) as captured:
            html = client.get(changelist).content.decode()
        assert '<progress max="12" value="10"></progress> 10 / 12' in html
        return len(captured.captured_queries)

    EvaluationRun.objects.create(name="empty")
    few = statements()
    for i in range(5):
        EvaluationRun.objects.create(name=f"empty {i}")
    assert statements() == few
    assert client.get(changelist).content.decode().count("0 / 0") == 6
