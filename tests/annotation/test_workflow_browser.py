"""Working through a study in a real browser (issue #19), by keyboard: "Item N of M" and the
saved line, the next item scrolled to its top, s to skip with a reason, g to flag through its
dialog (which takes every key while open: the item behind it is not answered), h to My answers
and back, the time limit's timer handing over to the next item; the staff page's live panel
polling. axe-core finds nothing serious or critical on the new pages and dialogs."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import Answer, Assignment, ItemFlag, ItemSkip, SkipCause
from tests.annotation.test_browser import current_item, login, press_until_new_item
from tests.browser import BROWSER_TESTS
from tests.proactweb.test_reading_in_browser import serious_violations

pytestmark = BROWSER_TESTS


@pytest.fixture
def page(browser):
    # A short window: an item is taller than it, so the page is scrolled to reach Submit.
    context = browser.new_context(viewport={"width": 1100, "height": 600})
    page = context.new_page()
    yield page
    context.close()


def test_progress_saved_skip_flag_and_my_answers_by_keyboard(
    page, live_server, make_study, make_annotators
):
    user = make_annotators(1)[0]
    study = make_study(annotators=[user], overlap=1, max_items=4)
    login(page, live_server, user)
    page.goto(f"{live_server.url}/annotate/{study.pk}/")
    first = press_until_new_item(page, "Enter", "")
    assert re.search(r"Item 1\s+of 4", page.inner_text(".ws-progress"))
    assert page.get_attribute("#ws-progress-bar", "value") == "0"
    # Answer from the bottom of the page: the next item starts at its top, and says "Saved".
    page.keyboard.press("1")
    page.keyboard.press("Shift+Digit3")
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    assert page.evaluate("window.scrollY") > 100
    second = press_until_new_item(page, "Enter", first)
    assert page.inner_text("#ws-saved").startswith("Saved.")
    assert page.evaluate(
        "document.getElementById('workspace').getBoundingClientRect().top >= -1"
        " && window.scrollY <= document.getElementById('workspace').offsetTop"
    )
    assert re.search(r"Item 2\s+of 4", page.inner_text(".ws-progress"))

    # g: the flag dialog; while it is open, keys belong to it (1 does not answer the item).
    page.keyboard.press("g")
    page.wait_for_selector("#flag-dialog[open]")
    assert serious_violations(page) == []
    page.keyboard.press("1")
    page.keyboard.press("ArrowDown")  # from the first category (focused) to the second
    page.keyboard.press("Tab")
    page.keyboard.type("Which flight is meant?")
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("#flag-dialog:not([open])", state="attached")
    page.wait_for_function("document.getElementById('flag-status').textContent.includes('Flagged')")
    flag = ItemFlag.objects.get()
    assert (flag.category, flag.note) == ("offensive", "Which flight is meant?")
    assert current_item(page) == second  # still on the item, nothing answered
    assert not page.is_checked('input[name="choice"][value="1"]')
    assert Answer.objects.count() == 1

    # s: the skip dialog; a reason, Enter: the next item.
    page.keyboard.press("s")
    page.wait_for_selector("#skip-dialog[open]")
    page.keyboard.type("Not my field")
    third = press_until_new_item(page, "Enter", second)
    skip = ItemSkip.objects.get()
    assert (skip.assignment.item.token, skip.reason) == (second, "Not my field")
    assert "went back to the pool" in page.inner_text("#workspace")
    assert re.search(r"Item 2\s+of 3", page.inner_text(".ws-progress"))  # M lost the skip
    # Esc closes a dialog without sending it.
    page.keyboard.press("s")
    page.wait_for_selector("#skip-dialog[open]")
    page.keyboard.press("Escape")
    page.wait_for_selector("#skip-dialog:not([open])", state="attached")
    assert current_item(page) == third and ItemSkip.objects.count() == 1

    # h: My answers, its rows, back to the item.
    page.keyboard.press("h")
    page.wait_for_url(re.compile(rf".*/annotate/{study.pk}/mine$"))
    rows = page.locator("#my-answers tbody tr")
    assert rows.count() == 2
    assert "skipped" in rows.nth(1).inner_text() and "Not my field" in rows.nth(1).inner_text()
    assert page.locator("#my-answers button", has_text="Undo and change").count() == 1
    assert serious_violations(page) == []
    page.click("text=Back to the study")
    page.wait_for_selector("#workspace")
    assert current_item(page) == third


def test_the_timer_hands_over_to_the_next_item_when_time_runs_out(
    page, live_server, make_study, make_annotators
):
    user = make_annotators(1)[0]
    study = make_study(annotators=[user], overlap=1, max_items=3, item_time_limit_s=600)
    login(page, live_server, user)
    page.goto(f"{live_server.url}/annotate/{study.pk}/")
    first = press_until_new_item(page, "Enter", "")
    assert "10 min" in page.inner_text(".timer") or "9 min" in page.inner_text(".timer")
    # Two seconds left (as if the annotator had been on it for nearly ten minutes).
    ends = timezone.now() + timedelta(seconds=2)
    Assignment.objects.filter(item__token=first).update(
        time_limit_ends_at=ends, lease_expires_at=ends + timedelta(seconds=5)
    )
    page.reload()
    assert current_item(page) == first
    page.keyboard.press("1")  # chosen, not sent: the time runs out first
    page.wait_for_function(
        "prev => { const ws = document.getElementById('workspace');"
        " return ws && ws.dataset.item && ws.dataset.item !== prev; }",
        arg=first,
        timeout=10_000,
    )
    skip = ItemSkip.objects.get()
    assert (skip.assignment.item.token, skip.cause) == (first, SkipCause.TIME_LIMIT)
    assert not Answer.objects.exists()


def test_the_staff_page_polls_its_live_panel(
    page, live_server, make_study, make_annotators, researcher
):
    from annotation.services.assignments import AnswerInput, answer_submit, assignment_next
    from tests.annotation.conftest import rater

    users = make_annotators(1)
    study = make_study(annotators=users, overlap=1, max_items=3)
    researcher.set_password("pw-rita-researcher")
    researcher.save()
    login_url = f"{live_server.url}/accounts/login/"
    page.goto(login_url)
    page.fill("#id_username", researcher.username)
    page.fill("#id_password", "pw-rita-researcher")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    page.goto(f"{live_server.url}/annotate/studies/{study.pk}/")
    assert page.inner_text('[data-live="answers"]') == "0"
    assert serious_violations(page) == []
    me = rater(study, users[0])
    held = assignment_next(rater=me)
    answer_submit(
        rater=me,
        item_token=held.item.token,
        answer=AnswerInput(label="A", confidence=2),
        idempotency_key="live-1",
    )
    page.wait_for_function(
        "document.querySelector('[data-live=\"answers\"]').textContent === '1'", timeout=12_000
    )
