"""Onboarding and crowd participation in a real browser (issue #19), by keyboard: the consent
screen, practice items with their feedback, failing the qualification and a staff override,
passing it; a participant coming by the study's link and leaving by the completion URL. axe-core
finds nothing serious or critical on any of those screens."""

import re

import pytest

from annotation.models import Assignment, QualificationOverride, StudyItem
from annotation.services.onboarding import OnboardingSpec, study_onboarding_set
from tests.annotation.test_blinding import forbidden_strings
from tests.annotation.test_browser import current_item, login, press_until_new_item, screenshot
from tests.browser import BROWSER_TESTS
from tests.proactweb.test_reading_in_browser import serious_violations

pytestmark = BROWSER_TESTS

COMPLETE = "https://app.prolific.com/submissions/complete?cc=C1AB2CD3"


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    yield page
    context.close()


def with_practice(study, n: int, **spec):
    keys = list(study.items.order_by("key").values_list("key", flat=True))[:n]
    practice = "\n".join(f"{key} A | The first reply **asks** before acting." for key in keys)
    study_onboarding_set(study=study, spec=OnboardingSpec(practice=practice, **spec))
    study.refresh_from_db()
    return study


def case_a_position(token: str) -> str:
    """The screen position ("1" or "2") this item's only rater sees Case A at."""
    order = Assignment.objects.get(item__token=token).display["order"]
    return str(order.index("A") + 1)


def answer_by_keys(page, position: str) -> str:
    item = current_item(page)
    page.keyboard.press(position)
    page.keyboard.press("Shift+Digit3")
    page.keyboard.press("Enter")
    page.wait_for_function(
        "prev => { const ws = document.getElementById('workspace');"
        " return ws && ws.dataset.item !== prev; }",
        arg=item,
    )
    return current_item(page)


def assert_blind_page(page, run) -> None:
    html = page.content().lower()
    leaked = [s for s in forbidden_strings(run) if s.lower() in html]
    assert not leaked, leaked


def test_consent_practice_feedback_failing_then_a_staff_override(
    page, browser, live_server, make_study, make_annotators, admin_user, run
):
    user = make_annotators(1)[0]
    study = make_study(
        annotators=[user], overlap=1, max_items=4, instructions="Read **carefully**, then agree."
    )
    with_practice(study, 2, consent_required=True, qualification_percent=100)
    login(page, live_server, user)
    page.goto(f"{live_server.url}/annotate/{study.pk}/")
    assert page.is_visible("#consent") and "carefully" in page.inner_text("#consent")
    screenshot(page, "consent")
    assert_blind_page(page, run)
    violations = {"consent": serious_violations(page)}
    # Keyboard: to the box, tick it, Enter.
    page.focus("#consent-agree")
    page.keyboard.press("Space")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('workspace').dataset.item")
    first = current_item(page)
    assert StudyItem.objects.get(token=first).is_practice
    assert page.is_visible(".practice-badge")
    wrong = "2" if case_a_position(first) == "1" else "1"
    second = answer_by_keys(page, wrong)
    assert page.is_visible("#practice-feedback")
    feedback = page.inner_text("#practice-feedback")
    assert f"expected answer: Response {case_a_position(first)}" in feedback
    assert "asks" in page.inner_html("#practice-feedback")
    screenshot(page, "practice-feedback")
    assert_blind_page(page, run)
    violations["practice feedback"] = serious_violations(page)
    assert StudyItem.objects.get(token=second).is_practice
    wrong = "2" if case_a_position(second) == "1" else "1"
    answer_by_keys(page, wrong)
    assert page.is_visible("#not-qualified")
    screenshot(page, "not-qualified")
    assert_blind_page(page, run)
    violations["not qualified"] = serious_violations(page)
    assert {where: found for where, found in violations.items() if found} == {}

    # Staff let them through, from the study page.
    staff = browser.new_context().new_page()
    staff.goto(f"{live_server.url}/admin/login/")
    staff.fill("#id_username", admin_user.username)
    staff.fill("#id_password", f"pw-{admin_user.username}")
    staff.click("input[type=submit]")
    staff.goto(f"{live_server.url}/annotate/studies/{study.pk}/")
    assert "below the threshold" in staff.inner_text("#onboarding")
    staff.fill("#onboarding input[name=reason]", "trained in person")
    staff.click("#onboarding button:has-text('Let through')")
    staff.wait_for_url(re.compile(r".*#onboarding$"))
    assert "let through by staff" in staff.inner_text("#onboarding")
    staff.context.close()
    assert QualificationOverride.objects.get().reason == "trained in person"

    page.reload()
    real = press_until_new_item(page, "Enter", "")
    assert not StudyItem.objects.get(token=real).is_practice
    assert not page.is_visible(".practice-badge")


def test_a_participant_comes_by_the_link_passes_the_practice_and_leaves_by_the_completion_url(
    page, live_server, make_study, run
):
    study = make_study(annotators=[], overlap=1, max_items=3, participation_enabled=True)
    with_practice(
        study,
        1,
        qualification_percent=100,
        participation_enabled=True,
        completion_code="C1AB2CD3",
        completion_url=COMPLETE,
    )
    page.goto(
        f"{live_server.url}/participate/{study.participation_token}/"
        "?PROLIFIC_PID=5f1e2d3c4b5a69788796a5b4&STUDY_ID=abc&SESSION_ID=xyz"
    )
    assert page.url.endswith(f"/annotate/{study.pk}/")
    practice = press_until_new_item(page, "Enter", "")
    assert StudyItem.objects.get(token=practice).is_practice
    item = answer_by_keys(page, case_a_position(practice))
    assert "well done" in page.inner_text("#practice-feedback")
    while item:
        assert not StudyItem.objects.get(token=item).is_practice
        assert_blind_page(page, run)
        item = answer_by_keys(page, "1")
    assert page.inner_text("#completion-code") == "C1AB2CD3"
    screenshot(page, "completion")
    assert_blind_page(page, run)
    assert serious_violations(page) == []
    # Enter follows the finish link, which sends the browser on to the platform (not reachable
    # from a test: the request the browser makes is what is checked).
    with page.expect_request(COMPLETE) as sent:
        page.keyboard.press("Enter")
    assert sent.value.is_navigation_request()
