"""No API key value ever lands in the database, the logs or a page.

A key is set in an environment variable; endpoints name that variable (OpenAI-compatible model,
Anthropic judge); an evaluation runs against the fake vendor server, whose 401 — like the real
APIs' — quotes the key it was sent, and the admin's "Test connection" meets the same 401. Then
the whole database (every model, through ``dumpdata``), everything logged at DEBUG and every
admin list and change page, the run's progress, the dialogue page, the dashboard and the raw
export are searched for the key."""

import io
import logging
import secrets

import pytest
from django.contrib import admin
from django.core.management import call_command
from django.urls import NoReverseMatch, reverse

from benchmark.corpus.importer import corpus_import
from benchmark.evaluation import runs
from benchmark.models import Dialogue, EvaluationRun, ModelEndpoint, ProviderCall
from proactweb.celery import app as celery_app
from tests.factories import jsonl_bytes, records_for, stream
from tests.fakes.vendor_server import BENCH_QUOTE, FakeVendorServer, Fault, bench_reply

pytestmark = pytest.mark.django_db

KEY_ENV = "SECRETS_TEST_API_KEY"


@pytest.fixture
def key(monkeypatch):
    value = "sk-secret-" + secrets.token_hex(16)
    monkeypatch.setenv(KEY_ENV, value)
    return value


@pytest.fixture
def eager():
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


def _pages(client, run: EvaluationRun) -> dict[str, str]:
    """Every admin list page, each model's first change page, and the run's own pages."""
    urls = [
        reverse("admin:index"),
        reverse("admin:benchmark_evaluationrun_progress", args=[run.pk]),
        reverse("benchmark:dialogue_detail", args=[Dialogue.objects.first().pk]),
        reverse("stats:dashboard") + f"?run={run.pk}",
        reverse("stats_api:raw-export", args=["judgments", "csv"]),
    ]
    for model in admin.site._registry:
        opts = model._meta
        try:
            urls.append(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
        except NoReverseMatch:
            continue
        first = model._default_manager.order_by("pk").first()
        if first is not None:
            urls.append(
                reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[first.pk])
            )
    pages = {}
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        body = b"".join(response.streaming_content) if response.streaming else response.content
        pages[url] = body.decode()
    return pages


def test_an_api_key_never_reaches_the_database_logs_or_pages(
    key, eager, caplog, client_for, admin_user
):
    caplog.set_level(logging.DEBUG)
    corpus_import(stream=stream(jsonl_bytes(records_for(2))))
    with FakeVendorServer(reply=bench_reply) as server:
        model = ModelEndpoint.objects.create(
            name="secret-model",
            display_name="secret-model",
            provider="openai-compatible",
            model_name="secret-model",
            base_url=server.openai_base_url,
            api_key_env=KEY_ENV,
        )
        judge = ModelEndpoint.objects.create(
            name="secret-judge",
            display_name="secret-judge",
            provider="anthropic",
            model_name="secret-judge",
            base_url=server.anthropic_base_url,
            api_key_env=KEY_ENV,
        )
        # The first call is refused with a message quoting the key, as the real APIs do.
        server.script(Fault.unauthorized())
        run = runs.run_create(
            name="secrets", endpoints=[model], judges=[judge], dialogues=Dialogue.objects.all()
        )
        runs.run_launch(run_id=run.pk)
        client = client_for(admin_user)
        server.script(Fault.unauthorized())
        tested = client.post(
            reverse("admin:benchmark_modelendpoint_changelist"),
            {"action": "test_connection", "_selected_action": [model.pk, judge.pk]},
            follow=True,
        )
        sent = server.requests()
    run.refresh_from_db()

    # The key really was used, and the refusal really quoted it.
    assert any(key in str(r.headers) for r in sent)
    assert run.units.filter(state="error").count() == 1
    assert run.units.filter(state="done").count() == 5
    assert ProviderCall.objects.filter(ok=False, error__contains="401").exists()
    assert BENCH_QUOTE in run.units.filter(state="done").first().reply

    database = io.StringIO()
    call_command("dumpdata", stdout=database)
    assert key not in database.getvalue(), "an API key was written to the database"
    assert KEY_ENV in database.getvalue()  # the variable's *name* is stored, as designed

    assert caplog.records, "nothing was logged: the log check would prove nothing"
    assert key not in caplog.text, "an API key was logged"

    pages = {"test connection messages": tested.content.decode(), **_pages(client, run)}
    assert "401" in pages["test connection messages"]
    leaks = [url for url, body in pages.items() if key in body]
    assert not leaks, f"an API key appears on {leaks}"
    assert len(pages) > 20
