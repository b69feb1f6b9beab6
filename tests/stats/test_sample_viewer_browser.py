"""The sample viewer in a real browser (Debian's headless Chromium, Playwright, pytest-django's
live server): from a leaderboard row of the dashboard to its triggers, then j / k through the
filtered list, the filters kept. A screenshot is saved
under test-artifacts/ (kept by CI as an artifact)."""

import io
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings
from django.core.management import call_command

from benchmark.evaluation.demo_run import DEMO_RUN_NAME
from benchmark.models import EvaluationRun
from stats import viewer
from tests.browser import BROWSER_TESTS

pytestmark = BROWSER_TESTS
ARTIFACTS = Path(settings.BASE_DIR) / "test-artifacts"
SHOWN = "id => document.getElementById('trigger')?.dataset.trigger === id"


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    yield page
    context.close()


def shown_trigger(page) -> int:
    return int(page.get_attribute("#trigger", "data-trigger"))


def test_from_a_leaderboard_cell_to_its_triggers_and_through_them_by_j_and_k(
    page, live_server, researcher
):
    call_command("load_demo", "--no-users", stdout=io.StringIO())
    run = EvaluationRun.objects.get(name=DEMO_RUN_NAME)
    page.goto(f"{live_server.url}/accounts/login/?next=/stats/")
    page.fill("#id_username", researcher.username)
    page.fill("#id_password", f"pw-{researcher.username}")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/stats/$"))

    # A phase row of the leaderboard: one model's CRITICAL triggers, vanilla.
    cell = page.locator("#leaderboard a.drill-down", has_text="Critical").first
    cell.click()
    page.wait_for_url(re.compile(r".*/triggers/\?"))
    query = {k: v[0] for k, v in parse_qs(urlsplit(page.url).query).items()}
    assert query["type"] == "CRITICAL" and query["condition"] == "vanilla"
    ids = viewer.trigger_ids(run, query)
    assert len(ids) >= 2
    assert page.locator("#trigger-list tbody a").count() == len(ids)

    page.locator("#trigger-list tbody a").first.click()
    page.wait_for_selector("#trigger")
    assert shown_trigger(page) == ids[0]
    assert page.locator("article.reply").count() == 6  # three models × two conditions
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "sample-viewer.png"), full_page=True)

    page.keyboard.press("j")
    page.wait_for_function(SHOWN, arg=str(ids[1]))
    assert {k: v[0] for k, v in parse_qs(urlsplit(page.url).query).items()} == query
    page.keyboard.press("k")
    page.wait_for_function(SHOWN, arg=str(ids[0]))
    # At the first trigger k has nowhere to go: the page stays.
    at_first = page.url
    page.keyboard.press("k")
    page.wait_for_timeout(300)
    assert page.url == at_first and shown_trigger(page) == ids[0]
