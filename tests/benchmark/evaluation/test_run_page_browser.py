"""The run's page in a real browser (Debian's headless Chromium, Playwright, pytest-django's
live server): its buttons change with the run's state as the page polls, without a reload."""

import pytest

from benchmark.corpus.importer import corpus_import
from benchmark.evaluation import runs
from benchmark.models import Dialogue, ModelEndpoint
from tests.browser import BROWSER_TESTS
from tests.factories import jsonl_bytes, records_for, stream

pytestmark = BROWSER_TESTS


@pytest.fixture
def page(browser):
    page = browser.new_page()
    yield page
    page.close()


def test_the_buttons_follow_the_run_s_state_without_a_reload(page, live_server, admin_user):
    corpus_import(stream=stream(jsonl_bytes(records_for(1))))
    model, judge = (
        ModelEndpoint.objects.create(
            name=name, display_name=name.upper(), provider="replay", model_name=name
        )
        for name in ("m", "j")
    )
    run = runs.run_create(
        name="watched", endpoints=[model], judges=[judge], dialogues=Dialogue.objects.all()
    )
    runs.run_units_create(run=run)

    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", admin_user.username)
    page.fill("#id_password", f"pw-{admin_user.username}")
    page.click("input[type=submit]")
    page.goto(f"{live_server.url}/admin/benchmark/evaluationrun/{run.pk}/change/")
    launch = page.locator("#run-actions button[data-action=launch]")
    cancel = page.locator("#run-actions button[data-action=cancel]")
    resume = page.locator("#run-actions button[data-action=resume]")
    page.wait_for_selector("#run-status")  # the first poll has answered
    assert launch.is_enabled() and cancel.is_enabled() and resume.is_disabled()
    navigations = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))

    runs.run_cancel(run_id=run.pk)  # as another admin's click, or a worker, would

    # The next poll (every 2 s) redraws them.
    page.wait_for_function(
        "document.querySelector('#run-actions button[data-action=launch]').disabled",
        timeout=10_000,
    )
    assert cancel.is_disabled() and resume.is_enabled()
    assert page.text_content("#run-status") == "Cancelled"
    assert navigations == [], "the page was reloaded"
