"""Proposal review in a real browser (Debian's Chromium, Playwright, the live server), keyboard
only: j / k move between proposals, y / n accept or reject the current one (and move on), Enter
submits; 0 rejects all at once and submits — what the rows held is not kept; a missing decision
is named and nothing is stored; undo refills the rows. A screenshot of the workspace is saved
under test-artifacts/ (docs/annotation.md shows it)."""

import pytest

from annotation.kinds.proposal_review import ReviewLabel
from annotation.models import Answer, Assignment, StudyItem
from tests.annotation.test_browser import current_item, login, press_until_new_item, screenshot
from tests.browser import BROWSER_TESTS
from tests.proposal_review import SOURCES, context, import_contexts

pytestmark = BROWSER_TESTS


@pytest.fixture
def page(browser):
    context_ = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context_.new_page()
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.dialogs = dialogs
    yield page
    context_.close()


def _decisions_by_position(item_token: str) -> list[str]:
    answer = Answer.objects.filter(assignment__item__token=item_token).latest("id")
    order = Assignment.objects.get(item__token=item_token).display["order"]
    return [answer.details["decisions"][pid] for pid in order]


def test_proposals_are_accepted_rejected_and_all_rejected_by_keyboard(
    page, live_server, make_annotators
):
    user = make_annotators(1)[0]
    study = import_contexts(
        [
            context(f"ctx-{n}", [("a", SOURCES[0]), ("b", SOURCES[1]), ("c", SOURCES[2])])
            for n in range(4)
        ],
        [user],
        overlap=1,
        name="Would you welcome these suggestions?",
    )
    for position, key in enumerate(("ctx-0", "ctx-1", "ctx-2", "ctx-3")):
        StudyItem.objects.filter(study=study, key=key).update(position=position)
    login(page, live_server, user)
    page.goto(f"{live_server.url}/annotate/{study.pk}/")
    first = press_until_new_item(page, "Enter", "")  # Start
    page.keyboard.press("?")
    overlay = page.inner_text("#shortcuts")
    assert "accept / reject the current proposal" in overlay and "reject all" in overlay
    page.keyboard.press("Escape")
    screenshot(page, "proposal-review")
    # Row 1 current: y accepts it and moves to row 2; n rejects row 2; k goes back to row 2,
    # y changes it to accept; j to row 3, n rejects it.
    for key in ("y", "n", "k", "y", "n"):
        page.keyboard.press(key)
    second = press_until_new_item(page, "Enter", first)
    assert _decisions_by_position(first) == ["accept", "accept", "reject"]
    # A decision missing: the form comes back naming it, nothing is stored.
    page.keyboard.press("y")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Proposal 2: accept or reject it")
    assert current_item(page) == second
    assert not Answer.objects.filter(assignment__item__token=second).exists()
    # 0: reject all, at once, whatever the rows held.
    third = press_until_new_item(page, "0", second)
    answer = Answer.objects.get(assignment__item__token=second)
    assert answer.label == ReviewLabel.REJECT_ALL and answer.details["reject_all"] is True
    assert _decisions_by_position(second) == ["reject", "reject", "reject"]
    # Each rejected one by one is not "reject all".
    for key in ("n", "n", "n"):
        page.keyboard.press(key)
    fourth = press_until_new_item(page, "Enter", third)
    assert Answer.objects.get(assignment__item__token=third).label == ReviewLabel.NONE_ACCEPTED
    # Undo: the last answer's context comes back with its rows as they were answered.
    assert press_until_new_item(page, "u", fourth) == third
    for position in (1, 2, 3):
        assert page.is_checked(f'input[name="proposal_{position}"][value="reject"]')
    page.keyboard.press("y")  # row 1 current again: accept it this time
    assert press_until_new_item(page, "Enter", third) == fourth
    assert _decisions_by_position(third) == ["accept", "reject", "reject"]
    assert page.dialogs == []
