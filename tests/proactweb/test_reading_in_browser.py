"""Reading comfort in a real browser (issue #19): Debian's headless Chromium through Playwright
against pytest-django's live server, on the demo data (``load_demo``, its logins included).

- Markdown from models and the corpus is rendered and stays inert on every page that shows it
  (every workspace kind, the dialogue page, a turn's whole text, the sample viewer, the study
  page): no script runs, no handler is set, no ``javascript:`` link, no raw HTML element, and
  no image is requested (a tracking pixel would tell who reads the reply).
- The "show raw" switch, by its key in the workspace.
- The conversation box opens on the trigger turn's message; the audit's checklist stays in view
  beside the dialogue on a wide screen and follows it on a phone.
- The annotator home and a workspace at 390 px: nothing wider than the screen.
- Dark mode follows ``prefers-color-scheme``.
- axe-core (axe-playwright-python, its script shipped in the wheel): no serious or critical
  violation on any workspace kind, the annotator home, the staff home and the dashboard, in
  both colour schemes.
"""

import io
import re
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from annotation.kinds.registry import all_kinds
from annotation.models import Study, StudyItem
from benchmark.evaluation.demo_run import DEMO_RUN_NAME
from benchmark.models import Dialogue, EvaluationRun, EvaluationUnit, Judgment, Trigger, Turn
from tests.browser import BROWSER_TESTS

pytestmark = BROWSER_TESTS
ARTIFACTS = Path(settings.BASE_DIR) / "test-artifacts"
TRACKER = "tracker.invalid"

# Markdown that would run, load or link something if any layer let it through.
HOSTILE_MARKDOWN = (
    "**Plan** for `Monday`:\n\n"
    "<script>window.__xss='script'</script>\n\n"
    "<img src=x onerror=\"window.__xss='img'\"> and <b onmouseover=\"window.__xss='b'\">raw</b>\n\n"
    "- [run me](javascript:window.__xss='link')\n"
    "- ![pixel](https://" + TRACKER + "/p.gif)\n"
    "- <https://example.test/ok>\n\n"
    "```html\n<script>window.__xss='code'</script>\n```\n"
)


@pytest.fixture
def demo(monkeypatch):
    # Playwright's sync API runs an event loop in this thread; the ORM calls here are safe.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    call_command("load_demo", stdout=io.StringIO())
    yield
    connection.close()  # the ORM's connection from this thread (PostgreSQL must drop the db)


def new_page(browser, width: int = 1280, scheme: str = "light"):
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    page.requested = []
    page.on("request", lambda request: page.requested.append(request.url))
    page.dialogs = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    return page


def login(page, live_server, username: str) -> None:
    page.context.clear_cookies()
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", f"demo-{username}")
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")


def open_item(page, live_server, study: Study) -> None:
    """The study's workspace with its next item on screen."""
    page.goto(f"{live_server.url}{reverse('annotation:workspace', args=[study.pk])}")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('workspace')?.dataset.item")
    page.wait_for_load_state("networkidle")


def demo_studies() -> list[Study]:
    """One open demo study of each kind, for annotator1 (load_demo makes one of each)."""
    studies = {}
    for study in Study.objects.filter(status="open", raters__user__username="annotator1").order_by(
        "pk"
    ):
        studies.setdefault(study.kind, study)
    return list(studies.values())


def assert_inert(page, where: str) -> None:
    assert page.evaluate("window.__xss") is None, f"the payload ran on {where}"
    assert page.locator("main img, main iframe, main script:not([src])").count() == 0, where
    assert page.locator("main [onerror], main [onmouseover], main b").count() == 0, where
    hrefs = page.eval_on_selector_all(".md a[href]", "links => links.map(a => a.href)")
    assert all(h.startswith(("http://", "https://", "mailto:")) for h in hrefs), (where, hrefs)
    assert not [url for url in page.requested if TRACKER in url], f"{where} loaded the image"


def test_markdown_is_rendered_and_inert_on_every_page_that_shows_it(demo, browser, live_server):
    EvaluationUnit.objects.update(reply=HOSTILE_MARKDOWN)
    Judgment.objects.update(rationale=HOSTILE_MARKDOWN, evidence="**Plan** for `Monday`")
    Turn.objects.update(user_message=HOSTILE_MARKDOWN, assistant_response=HOSTILE_MARKDOWN)
    Trigger.objects.update(pass_criteria=HOSTILE_MARKDOWN)
    Study.objects.update(instructions=HOSTILE_MARKDOWN)
    # Proposal review's texts are its items' own (imported contexts): its proposals too.
    for item in StudyItem.objects.filter(study__kind="proposal_review"):
        for proposal in item.payload["proposals"]:
            proposal["text"] = HOSTILE_MARKDOWN
        item.save(update_fields=["payload"])
    page = new_page(browser)
    login(page, live_server, "annotator1")
    studies = demo_studies()
    assert {s.kind for s in studies} == {kind.key for kind in all_kinds()}
    for study in studies:
        open_item(page, live_server, study)
        assert_inert(page, f"the {study.kind} workspace")
        rendered = page.locator("#workspace .md strong", has_text="Plan")
        assert rendered.count() >= 1, study.kind  # Markdown rendered, not shown as **Plan**
        assert page.locator("#workspace .md pre code").first.inner_text().startswith("<script>")
        assert page.locator("#workspace .md a.md-image").count() >= 1, study.kind
        if study.kind == "adjudication":  # the evidence is marked on the rendered text
            assert page.locator(".md mark.evidence strong, .md strong mark.evidence").count()
    login(page, live_server, "researcher")
    dialogue = Dialogue.objects.first()
    run = EvaluationRun.objects.get(name=DEMO_RUN_NAME)
    trigger = Trigger.objects.filter(units__run=run).first()
    for where, path in {
        "the dialogue page": reverse("benchmark:dialogue_detail", args=[dialogue.pk]),
        "a turn's whole text": reverse("benchmark:turn_text", args=[dialogue.pk, 1, "user"]),
        "the sample viewer": reverse("stats:trigger_detail", args=[run.pk, trigger.pk]),
        "the study page": reverse("annotation:study_detail", args=[studies[0].pk]),
    }.items():
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
        assert_inert(page, where)
        assert page.locator("main .md strong", has_text="Plan").count() >= 1, where
    assert page.dialogs == []
    page.context.close()


def test_the_raw_switch_shows_every_text_as_written_by_its_key(demo, browser, live_server):
    EvaluationUnit.objects.update(reply="**Pack** the stand last.")
    page = new_page(browser)
    login(page, live_server, "annotator1")
    study = next(s for s in demo_studies() if s.kind == "direct_rating")
    open_item(page, live_server, study)
    reply = page.locator("article.response")
    assert reply.inner_text().strip() == "Pack the stand last."
    page.keyboard.press("m")
    assert page.is_checked("#show-raw")
    assert reply.inner_text().strip() == "**Pack** the stand last."
    # It outlives the item: the next one opens raw too, and m turns it back.
    page.keyboard.press("p")
    page.keyboard.press("Shift+Digit3")
    page.keyboard.press("r")
    page.keyboard.type("Fine.")
    first = page.get_attribute("#workspace", "data-item")
    page.keyboard.press("Control+Enter")
    page.wait_for_function(
        "prev => document.getElementById('workspace').dataset.item !== prev", arg=first
    )
    assert page.locator("article.response").inner_text().strip() == "**Pack** the stand last."
    page.keyboard.press("m")
    assert page.locator("article.response").inner_text().strip() == "Pack the stand last."
    page.context.close()


def test_the_conversation_opens_on_the_trigger_turns_message(demo, browser, live_server):
    page = new_page(browser)
    login(page, live_server, "annotator1")
    study = next(s for s in demo_studies() if s.kind == "pairwise")
    open_item(page, live_server, study)
    box = page.locator("#workspace .chat").bounding_box()
    current = page.locator("#workspace .chat .is-current").bounding_box()
    assert (
        box["y"] - 1 <= current["y"]
        and current["y"] + current["height"] <= box["y"] + box["height"] + 1
    )
    # Earlier messages fold, open, without JavaScript's help.
    earlier = page.locator("#workspace .chat details.earlier")
    if earlier.count():
        earlier.locator("summary").click()
        assert earlier.get_attribute("open") is None
    page.context.close()


def test_the_audit_checklist_stays_beside_the_dialogue_and_follows_it_on_a_phone(
    demo, browser, live_server
):
    study = next(s for s in Study.objects.filter(kind="dialogue_audit", status="open"))
    for width in (1280, 390):
        page = new_page(browser, width)
        login(page, live_server, "annotator1")
        open_item(page, live_server, study)
        panel = page.locator(".audit-panel")
        dialogue = page.locator(".audit-dialogue")
        if width == 1280:
            assert panel.bounding_box()["x"] > dialogue.bounding_box()["x"] + 300  # beside it
            page.mouse.wheel(0, 3000)
            page.wait_for_timeout(200)
            box = panel.bounding_box()
            assert 0 <= box["y"] < 900, box  # still in view after scrolling the dialogue
        else:
            below = dialogue.bounding_box()
            assert panel.bounding_box()["y"] >= below["y"] + below["height"] - 1  # after it
        page.context.close()


@pytest.mark.parametrize("where", ["home", "workspace"])
def test_nothing_is_wider_than_a_390_px_phone(where, demo, browser, live_server):
    page = new_page(browser, 390)
    login(page, live_server, "annotator1")
    if where == "workspace":
        open_item(page, live_server, next(s for s in demo_studies() if s.kind == "pairwise"))
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the {where} page is {width} px wide"
    page.screenshot(path=str(ARTIFACTS / f"phone-{where}.png"), full_page=True)
    page.context.close()


def test_dark_mode_follows_the_system_setting(demo, browser, live_server):
    colours = {}
    for scheme in ("light", "dark"):
        page = new_page(browser, scheme=scheme)
        login(page, live_server, "annotator1")
        colours[scheme] = page.evaluate(
            "() => [getComputedStyle(document.body).backgroundColor,"
            " getComputedStyle(document.body).color,"
            " getComputedStyle(document.querySelector('.card')).backgroundColor]"
        )
        page.context.close()
    assert colours["light"][0] == "rgb(247, 247, 245)"
    assert colours["dark"][0] == "rgb(18, 20, 23)"
    assert all(light != dark for light, dark in zip(*colours.values(), strict=True))


SERIOUS = ("serious", "critical")


def serious_violations(page) -> list[str]:
    response = Axe().run(page).response
    return [
        f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes'][:3]]}"
        for v in response["violations"]
        if v["impact"] in SERIOUS
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_serious_accessibility_violation_on_the_workspaces_and_home_pages(
    scheme, demo, browser, live_server
):
    page = new_page(browser, scheme=scheme)
    found = {}
    login(page, live_server, "annotator1")
    found["annotator home"] = serious_violations(page)
    studies = demo_studies()
    assert {s.kind for s in studies} == {kind.key for kind in all_kinds()}
    for study in studies:
        open_item(page, live_server, study)
        found[f"{study.kind} workspace"] = serious_violations(page)
    login(page, live_server, "researcher")
    page.goto(f"{live_server.url}/")  # the staff home
    found["staff home"] = serious_violations(page)
    page.goto(f"{live_server.url}{reverse('stats:dashboard')}")
    page.wait_for_load_state("networkidle")
    found["dashboard"] = serious_violations(page)
    assert {where: v for where, v in found.items() if v} == {}
    assert len(found) == len(studies) + 3
    page.context.close()


def test_the_page_links_an_svg_favicon(client):
    html = client.get(reverse("login")).content.decode()
    href = re.search(r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', html).group(1)
    assert href.endswith("favicon.svg")
    svg = (Path(settings.BASE_DIR) / "static" / "favicon.svg").read_text()
    assert svg.startswith("<svg") and "script" not in svg
