"""Model outputs and user texts are untrusted: a reply, a judge's rationale, a dialogue turn, a
model's display name or a benchmark name carrying ``<script>``, an ``onerror=`` attribute or an
attribute-breaking quote stays inert text — checked in a real browser (headless Chromium through
Playwright) on the pages that show them: the dialogue page, the corpus list, the statistics
dashboard (server-side SVG charts included), the scores page and the admin's run, unit and
judgment pages (with the run's live progress fragment loaded by htmx)."""

import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from benchmark.evaluation.demo_run import DEMO_RUN_NAME
from benchmark.models import (
    Dialogue,
    EvaluationRun,
    EvaluationUnit,
    Judgment,
    ModelEndpoint,
    Turn,
)
from stats.models import ExternalBenchmarkScore
from tests.browser import BROWSER_TESTS

pytestmark = BROWSER_TESTS

# Each piece would set window.__xss if it ran: a script, an event handler, an attribute broken
# out of, an SVG onload.
PAYLOAD = (
    "<script>window.__xss='script'</script>"
    "<img src=x onerror=\"window.__xss='img'\">"
    '"><svg onload="window.__xss=\'svg\'"></svg>'
    "' onmouseover='window.__xss=1"
)


@pytest.fixture
def poisoned(monkeypatch):
    """The demo data with the payload in every text a model or a user wrote."""
    # Playwright's sync API runs an event loop in this thread; the ORM calls below are safe.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    call_command("load_demo", "--no-users", stdout=io.StringIO())
    run = EvaluationRun.objects.get(name=DEMO_RUN_NAME)
    ModelEndpoint.objects.filter(pk=run.endpoints.first().pk).update(
        display_name=("Evil " + PAYLOAD)[:120]  # the column's length
    )
    dialogue = Dialogue.objects.first()
    Turn.objects.filter(dialogue=dialogue, index=1).update(
        user_message=PAYLOAD, assistant_response=PAYLOAD
    )
    unit = EvaluationUnit.objects.filter(run=run, state="done").first()
    EvaluationUnit.objects.filter(pk=unit.pk).update(reply=PAYLOAD)
    Judgment.objects.filter(unit=unit).update(rationale=PAYLOAD, evidence=PAYLOAD)
    errored = EvaluationUnit.objects.filter(run=run).exclude(pk=unit.pk).first()
    EvaluationUnit.objects.filter(pk=errored.pk).update(
        state="error", error=PAYLOAD, finished_at=timezone.now()
    )
    ExternalBenchmarkScore.objects.create(
        endpoint=run.endpoints.first(), benchmark="B" + PAYLOAD[:70], score=1.0,
        uploaded_at=timezone.now(),
    )  # fmt: skip
    return {"run": run, "dialogue": dialogue, "unit": unit}


def test_untrusted_text_stays_inert_on_every_page_that_shows_it(
    poisoned, browser, live_server, client, admin_user
):
    client.force_login(admin_user)
    context = browser.new_context()
    context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    run, unit = poisoned["run"], poisoned["unit"]
    pages = {
        "dialogue": reverse("benchmark:dialogue_detail", args=[poisoned["dialogue"].pk]),
        "corpus list": reverse("benchmark:dialogue_list"),
        "dashboard": reverse("stats:dashboard") + f"?run={run.pk}",
        "scores": reverse("stats:benchmark_scores"),
        "run (admin, with live progress)": reverse(
            "admin:benchmark_evaluationrun_change", args=[run.pk]
        ),
        "unit (admin)": reverse("admin:benchmark_evaluationunit_change", args=[unit.pk]),
        "judgments (admin)": reverse("admin:benchmark_judgment_changelist") + "?q=script",
        "endpoints (admin)": reverse("admin:benchmark_modelendpoint_changelist"),
    }
    shown = {}
    for name, path in pages.items():
        response = page.goto(live_server.url + path)
        assert response.status == 200, name
        page.wait_for_load_state("networkidle")  # htmx fragments (the run's progress) included
        page.mouse.move(200, 200)
        page.wait_for_timeout(100)
        assert page.evaluate("window.__xss") is None, f"the payload ran on the {name} page"
        # No element the payload would have created exists: it is text, not markup.
        assert page.locator("img[src='x']").count() == 0, name
        assert page.locator("[onmouseover], svg[onload]").count() == 0, name
        shown[name] = page.content()
    assert not dialogs
    # And the text is really there, as text, where people read it.
    dialogue_text = page.goto(live_server.url + pages["dialogue"]) and page.inner_text("main")
    assert "<script>window.__xss='script'</script>" in dialogue_text
    assert "Latest errors" in shown["run (admin, with live progress)"]
    assert "&lt;script&gt;" in shown["run (admin, with live progress)"]
    assert "Evil &lt;script&gt;" in shown["dashboard"]
    context.close()
    # Under Playwright's sync API the ORM opened a connection of its own here; close it, or
    # PostgreSQL cannot drop the test database at the end of the session.
    connection.close()
