"""The HALO diagnosis workspace in a real browser (Debian's headless Chromium, keyboard only):
timing, intensity and other issues appear when a reply is rejected as an intervention and
disappear when it is accepted; what disappeared is not sent, and the server stores nothing of
it; a rejected or accepted L0 shows its derived diagnosis; an issue's key opens its note box.
Screenshots under test-artifacts/."""

import pytest

from annotation.models import Answer
from benchmark.models import Condition
from tests.annotation.test_browser import current_item, login, press_until_new_item, screenshot
from tests.browser import BROWSER_TESTS

pytestmark = BROWSER_TESTS


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    yield page
    context.close()


def row(page, n: int, question: str):
    """Reply n's row of a question (its first option's input names it)."""
    return page.locator(f"#reply-{n} tr:has(input[name='{question}_{n}'])")


def test_halo_by_keyboard_conditional_questions_appear_disappear_and_are_not_stored(
    page, live_server, make_study, make_annotators
):
    user = make_annotators(1)[0]
    study = make_study(
        "halo", annotators=[user], overlap=1, condition=Condition.VANILLA, max_items=2
    )
    login(page, live_server, user)
    page.goto(f"{live_server.url}/annotate/{study.pk}/")
    first = press_until_new_item(page, "Enter", "")
    page.keyboard.press("?")
    assert "timing: premature / belated / appropriate" in page.inner_text("#shortcuts")
    page.keyboard.press("Escape")
    # Nothing rejected yet: no timing, intensity or other issues anywhere.
    for n in (1, 2):
        assert not row(page, n, "timing").is_visible()
        assert not row(page, n, "intensity").is_visible()
        assert not row(page, n, "issue_unsupported").is_visible()
    # Reply 1: L1, rejected → timing and intensity appear, answered p, e; then an issue.
    for key in "1n":
        page.keyboard.press(key)
    assert row(page, 1, "timing").is_visible() and row(page, 1, "intensity").is_visible()
    assert "current" in row(page, 1, "timing").get_attribute("class")
    page.keyboard.press("p")
    page.keyboard.press("e")
    assert "current" in row(page, 1, "issue_unsupported").get_attribute("class")
    page.keyboard.press("e")  # unsupported by evidence: ticked, its note box takes the focus
    assert page.is_checked("input[name=issue_unsupported_1]")
    assert page.evaluate("document.activeElement.name") == "issue_unsupported_note_1"
    page.keyboard.type("No message mentions a van.")
    page.keyboard.press("Escape")
    screenshot(page, "halo-rejected")
    # Reply 2: L0 (the pre-fill: j confirms it), accepted → justified restraint shown.
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("y")
    restraint = page.locator("#reply-2 tr.derived:has-text('Justified restraint')")
    assert restraint.is_visible()
    assert not page.locator("#reply-2 tr.derived:has-text('Inaction')").is_visible()
    assert not row(page, 2, "timing").is_visible()
    # Back to reply 1 (past reply 2's level, reply 1's issues, intensity, timing): accepted
    # after all → its timing, intensity and issues disappear.
    for _ in range(5):
        page.keyboard.press("k")
    assert "current" in row(page, 1, "acceptable").get_attribute("class")
    page.keyboard.press("y")
    assert not row(page, 1, "timing").is_visible()
    assert not row(page, 1, "issue_unsupported").is_visible()
    assert page.is_disabled("input[name=timing_1][value=premature]")
    assert page.is_checked("input[name=timing_1][value=premature]")  # kept on screen, not sent
    second = press_until_new_item(page, "Enter", first)
    answer = Answer.objects.get(assignment__item__token=first)
    by_position = {r["position"]: r for r in answer.details["replies"]}
    assert by_position[1] == {
        "response": by_position[1]["response"],
        "position": 1,
        "level": "L1",
        "suggested": "L0",
        "level_changed": True,
        "acceptable": True,
    }
    assert by_position[2]["acceptable"] and by_position[2]["level_changed"] is False
    assert "No message mentions a van" not in str(answer.details)
    # The second checkpoint: both rejected, every conditional question answered by key.
    for key in "2nbi":
        page.keyboard.press(key)
    page.keyboard.press("j")  # no other issue
    for key in "3npa":
        page.keyboard.press(key)
    page.keyboard.press("c")
    page.keyboard.type("It says the play is on Thursday.")
    page.keyboard.press("Escape")
    screenshot(page, "halo")
    assert current_item(page) == second
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Nothing is left for you")
    replies = {
        r["position"]: r
        for r in Answer.objects.get(assignment__item__token=second).details["replies"]
    }
    assert (replies[1]["timing"], replies[1]["intensity"], replies[1]["issues"]) == (
        "belated",
        "insufficient",
        {},
    )
    assert (replies[2]["level"], replies[2]["timing"], replies[2]["intensity"]) == (
        "L3",
        "premature",
        "appropriate",
    )
    assert replies[2]["issues"] == {"contradiction": "It says the play is on Thursday."}
