"""The workspaces in a real browser: Debian's headless Chromium driven by Playwright against
pytest-django's live server. Keyboard only: an annotator works through pairs, reloads mid-study
and resumes at the same item, undoes an answer; an audit split brings in the third auditor; a
reply carrying a script stays text; every way of submitting, in every workspace, opens the next
item empty with focus outside the text boxes. A screenshot of each workspace is saved under
test-artifacts/ (kept by CI as an artifact)."""

import re
from pathlib import Path

import pytest
from django.conf import settings

from annotation.kinds.arena import SCREEN_TIES, SIDE_WINS
from annotation.models import Answer, AssignmentRole
from benchmark.models import Dialogue, DialogueStatus, EvaluationUnit, Judgment
from tests.annotation.conftest import MODELS
from tests.browser import BROWSER_TESTS

ARTIFACTS = Path(settings.BASE_DIR) / "test-artifacts"

pytestmark = BROWSER_TESTS


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.dialogs = dialogs
    yield page
    context.close()


def login(page, live_server, user) -> None:
    page.context.clear_cookies()
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", f"pw-{user.username}")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/annotate/$"))


def current_item(page) -> str:
    return page.get_attribute("#workspace", "data-item")


def press_until_new_item(page, key: str, previous: str) -> str:
    page.keyboard.press(key)
    page.wait_for_function(
        "prev => { const ws = document.getElementById('workspace');"
        " return ws && ws.dataset.item && ws.dataset.item !== prev; }",
        arg=previous,
    )
    return current_item(page)


def screenshot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"workspace-{name}.png"), full_page=True)


def test_pairwise_by_keyboard_alone_with_reload_resume_and_undo(
    page, live_server, make_study, make_annotators
):
    user = make_annotators(1)[0]
    study = make_study(annotators=[user], overlap=1, max_items=5)
    login(page, live_server, user)
    page.goto(f"{live_server.url}/annotate/{study.pk}/")
    first = press_until_new_item(page, "Enter", "")  # Start
    page.keyboard.press("?")
    assert page.is_visible("#shortcuts") and "Response 1 is better" in page.inner_text("#shortcuts")
    page.keyboard.press("Escape")
    screenshot(page, "pairwise")
    page.keyboard.press("1")
    page.keyboard.press("Shift+Digit4")
    second = press_until_new_item(page, "Enter", first)
    page.keyboard.press("2")
    page.keyboard.press("Shift+Digit2")
    page.keyboard.press("r")
    page.keyboard.type("Response 2 reuses the earlier details.")
    page.keyboard.press("Escape")
    third = press_until_new_item(page, "Enter", second)
    page.keyboard.press("0")
    page.keyboard.press("Shift+Digit3")
    # Reload mid-item: the same item comes back, with what was already chosen.
    page.reload()
    assert current_item(page) == third
    assert page.is_checked('input[name="choice"][value="tie"]')
    fourth = press_until_new_item(page, "Enter", third)
    # Undo: the last answer's item is back, filled in as it was answered.
    back = press_until_new_item(page, "u", fourth)
    assert back == third
    assert page.is_checked('input[name="choice"][value="tie"]')
    assert page.is_checked('input[name="confidence"][value="3"]')
    page.keyboard.press("t")
    page.keyboard.press("Shift+Digit5")
    assert press_until_new_item(page, "Enter", third) == fourth  # back to where we were
    answers = Answer.objects.filter(assignment__rater__user=user).order_by("id")
    choices = [(a.details["choice"], a.confidence, bool(a.retracted_at)) for a in answers]
    assert choices == [("1", 4, False), ("2", 2, False), ("tie", 3, True), ("tie", 5, False)]
    assert answers[1].note == "Response 2 reuses the earlier details."
    assert all(a.time_on_item_s > 0 for a in answers)
    assert page.dialogs == []


def test_an_answer_is_one_request_and_brings_the_next_item(
    page, live_server, make_study, make_annotators
):
    """What the annotation benchmark simulates (bench/annotation_next.py, issue #20 part 5): Start
    is one POST; after it each answer is one POST whose response is the next item, swapped in
    with no Next and nothing else fetched."""
    user = make_annotators(1)[0]
    study = make_study(annotators=[user], overlap=1, max_items=5)
    login(page, live_server, user)
    page.goto(f"{live_server.url}/annotate/{study.pk}/")
    page.wait_for_load_state("networkidle")
    sent: list[str] = []
    page.on("request", lambda request: sent.append(f"{request.method} {request.url}"))
    item = press_until_new_item(page, "Enter", "")  # Start
    page.wait_for_load_state("networkidle")
    assert sent == [f"POST {live_server.url}/annotate/{study.pk}/next"]
    for _ in range(3):
        sent.clear()
        page.keyboard.press("1")  # at once: the swap handed the new form to htmx
        page.keyboard.press("Shift+Digit3")
        answered, item = item, press_until_new_item(page, "Enter", item)
        page.wait_for_load_state("networkidle")
        assert sent == [f"POST {live_server.url}/annotate/{study.pk}/items/{answered}/answer"]
    assert Answer.objects.filter(assignment__rater__user=user).count() == 3


# Run in the page: once, on the next item swapped in, the keys of an answer (1, Shift+3,
# Enter) in a task of their own queued by htmx:afterSwap, so before htmx's settle (a timer of
# 20 ms after it) — when htmx itself takes a swapped-in form in. Whether the settle was still
# to come when they were pressed is kept in window.keyedBeforeSettle.
KEYS_BEFORE_SETTLE = """() => {
  window.keyedBeforeSettle = null;
  document.addEventListener("htmx:afterSwap", () => {
    if (window.keyedBeforeSettle !== null) return;
    window.keyedBeforeSettle = false;
    setTimeout(() => {
      const ws = document.getElementById("workspace");
      window.keyedBeforeSettle = ws.classList.contains("htmx-settling");
      for (const [key, code, shiftKey] of [["1", "Digit1", false], ["#", "Digit3", true],
                                           ["Enter", "Enter", false]]) {
        ws.dispatchEvent(new KeyboardEvent("keydown", {key, code, shiftKey, bubbles: true}));
      }
    }, 0);
  });
}"""


def test_keys_pressed_before_htmx_settles_a_new_item_still_answer_through_htmx(
    page, live_server, make_study, make_annotators
):
    """Twice a browser test saw an answer go as a plain form POST (a redirect, a full page)
    when its keys came between the swap of the new item and htmx's settle, a timer later, where
    htmx used to take the new form in: the workspace now hands the form to htmx at the swap."""
    user = make_annotators(1)[0]
    study = make_study(annotators=[user], overlap=1, max_items=5)
    login(page, live_server, user)
    page.goto(f"{live_server.url}/annotate/{study.pk}/")
    page.wait_for_load_state("networkidle")
    page.evaluate(KEYS_BEFORE_SETTLE)
    sent: list[tuple[str, str, bool, str | None]] = []
    page.on(
        "request",
        lambda r: sent.append(
            (r.method, r.url, r.is_navigation_request(), r.headers.get("hx-request"))
        ),
    )
    with page.expect_request(re.compile(r".*/answer$")) as answer:
        page.keyboard.press("Enter")  # Start; the keys answer the item it brings
    answered = answer.value.url.rsplit("/", 2)[1]  # the item's token
    page.wait_for_function(
        "prev => { const ws = document.getElementById('workspace');"
        " return ws && ws.dataset.item && ws.dataset.item !== prev; }",
        arg=answered,
    )
    assert sent == [
        ("POST", f"{live_server.url}/annotate/{study.pk}/next", False, "true"),
        ("POST", f"{live_server.url}/annotate/{study.pk}/items/{answered}/answer", False, "true"),
    ]
    # Still the same page (a native POST would have loaded a new one, without the flag).
    assert page.evaluate("window.keyedBeforeSettle") is True
    answers = Answer.objects.filter(assignment__rater__user=user)
    assert [(a.details["choice"], a.confidence) for a in answers] == [("1", 3)]


def test_arena_pairs_by_keyboard_alone_deswapped_with_undo(
    page, live_server, make_study, make_annotators
):
    """An arena of four sources (two models, two conditions): 1, 2, t, b and 0 with Shift+N for
    confidence, Enter to submit, u to undo; each answer is stored as the winner of side A or B
    from the order this annotator saw, and no page names a source."""
    user = make_annotators(1)[0]
    study = make_study("arena", annotators=[user], overlap=1, per_pair=1)
    login(page, live_server, user)
    page.goto(f"{live_server.url}/annotate/{study.pk}/")
    item = press_until_new_item(page, "Enter", "")  # Start
    page.keyboard.press("?")
    assert "both bad" in page.inner_text("#shortcuts")
    page.keyboard.press("Escape")
    screenshot(page, "arena")
    secrets = [name for name, _, _ in MODELS] + ["vanilla", "injected", "Test run"]
    for keys in (("1", "Shift+Digit4"), ("2", "Shift+Digit2"), ("t", "Shift+Digit3")):
        assert not [s for s in secrets if s.lower() in page.content().lower()]
        for key in keys:
            page.keyboard.press(key)
        item = press_until_new_item(page, "Enter", item)
    page.keyboard.press("b")
    page.keyboard.press("Shift+Digit5")
    fifth = press_until_new_item(page, "Enter", item)
    back = press_until_new_item(page, "u", fifth)  # the both-bad answer's item, as answered
    assert back == item and page.is_checked('input[name="choice"][value="bothbad"]')
    page.keyboard.press("0")
    page.keyboard.press("Shift+Digit1")
    assert press_until_new_item(page, "Enter", item) == fifth
    answers = Answer.objects.filter(assignment__rater__user=user).order_by("id")
    answers = list(answers.select_related("assignment"))
    assert [(a.details["choice"], a.confidence, bool(a.retracted_at)) for a in answers] == [
        ("1", 4, False),
        ("2", 2, False),
        ("tie", 3, False),
        ("bothbad", 5, True),
        ("tie", 1, False),
    ]
    for answer in answers:
        choice, order = answer.details["choice"], answer.assignment.display["order"]
        assert answer.label == (SCREEN_TIES.get(choice) or SIDE_WINS[order[int(choice) - 1]])
    assert answers[3].label == "tie (bothbad)"
    assert page.dialogs == []


def test_an_audit_split_brings_in_the_third_auditor(page, live_server, make_study, make_annotators):
    one, two, third = make_annotators(3)
    study = make_study(
        "dialogue_audit",
        annotators=[one, two],
        adjudicators=[third],
        max_items=1,
        name="Audit",
    )
    dialogue = Dialogue.objects.get(pk=study.items.get().dialogue_id)

    def audit(user, rows: str, decision: str, shot: str = "") -> None:
        login(page, live_server, user)
        page.goto(f"{live_server.url}/annotate/{study.pk}/")
        item = press_until_new_item(page, "Enter", "")
        if shot:
            screenshot(page, shot)
        for key in rows:
            page.keyboard.press(key)
        page.keyboard.press(decision)
        page.keyboard.press("Enter")
        page.wait_for_function(
            "prev => document.getElementById('workspace').dataset.item !== prev", arg=item
        )

    audit(one, "yyyyyy", "p", shot="dialogue-audit")
    audit(two, "yyyyyn", "f")
    assert Dialogue.objects.get(pk=dialogue.pk).status == DialogueStatus.IN_AUDIT
    login(page, live_server, third)
    page.goto(f"{live_server.url}/annotate/{study.pk}/")
    press_until_new_item(page, "Enter", "")
    assert "The two audits disagree" in page.inner_text("#workspace")
    screenshot(page, "dialogue-audit-adjudicator")
    page.keyboard.press("k")  # rows: the first is current; k stays on it
    for key in "yyyyyn":
        page.keyboard.press(key)
    page.keyboard.press("f")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Nothing is left for you")
    answers = Answer.objects.filter(assignment__item__study=study)
    third_answer = answers.get(assignment__rater__user=third)
    assert third_answer.assignment.role == AssignmentRole.ADJUDICATE
    assert third_answer.details["checks"]["assistant_cold"]["ok"] is False
    assert Dialogue.objects.get(pk=dialogue.pk).status == DialogueStatus.REJECTED


def test_a_reply_with_a_script_stays_inert(page, live_server, make_study, make_annotators):
    evil = (
        "Sure!<script>window.__pwned = 'script'</script>"
        '<img src="x" onerror="window.__pwned = \'img\'"> Pack the stand last.'
    )
    EvaluationUnit.objects.update(reply=evil)
    Judgment.objects.update(evidence="<script>window.__pwned = 'script'</script>")
    user = make_annotators(1)[0]
    for kind in ("pairwise", "adjudication"):
        study = make_study(kind, annotators=[user], overlap=1, name=f"Evil {kind}")
        login(page, live_server, user)
        page.goto(f"{live_server.url}/annotate/{study.pk}/")
        press_until_new_item(page, "Enter", "")
        assert page.evaluate("window.__pwned") is None
        assert "<script>window.__pwned" in page.inner_text("#workspace")  # shown as text
        assert page.locator("#workspace script").count() == 0
        assert page.locator("#workspace img").count() == 0
    assert page.locator("mark.evidence").count() >= 1
    assert page.dialogs == []


@pytest.mark.parametrize("kind", ["direct_rating", "adjudication", "failure_mode"])
def test_the_other_workspaces_answer_by_keyboard(
    kind, page, live_server, make_study, make_annotators
):
    user = make_annotators(1)[0]
    study = make_study(
        kind,
        annotators=[user],
        overlap=1,
        condition="",
        reason_required=False,
        reveal_judge_verdict=kind == "direct_rating",
    )
    login(page, live_server, user)
    page.goto(f"{live_server.url}/annotate/{study.pk}/")
    first = press_until_new_item(page, "Enter", "")
    screenshot(page, kind.replace("_", "-"))
    if kind == "failure_mode":
        page.keyboard.press("2")
    else:
        page.keyboard.press("a")
        page.keyboard.press("Shift+Digit2")
    if kind == "direct_rating":  # a rationale is always required here
        page.keyboard.press("r")
        page.keyboard.type("Right direction, no anchor.")
        page.keyboard.press("Control+Enter")
    else:
        page.keyboard.press("Enter")
    page.wait_for_function(
        "prev => document.getElementById('workspace').dataset.item !== prev", arg=first
    )
    answer = Answer.objects.get(assignment__rater__user=user)
    expected = "deliverable_repetition" if kind == "failure_mode" else "PARTIAL"
    assert answer.label == expected
    if kind == "direct_rating":
        assert "the judge's verdict" in page.inner_text("#workspace")


# --- Submitting: every way, every workspace ----------------------------------------------------
# What each workspace's answer needs, by keys: the keys before the note, and what the saved answer
# then holds (its label, and its confidence where the kind asks for one).
ANSWER_BY_KEYS = {
    "pairwise": (("t", "Shift+Digit3"), "tie", 3),
    "arena": (("b", "Shift+Digit3"), "tie (bothbad)", 3),
    "direct_rating": (("p", "Shift+Digit3"), "PASS", 3),
    "adjudication": (("a",), "PARTIAL", None),
    "failure_mode": (("2",), "deliverable_repetition", None),
    "dialogue_audit": (("y",) * 6 + ("p",), "pass", None),
}
SUBMIT_PATHS = ("Control+Enter", "Enter", "button")

# The answer form as the server sent it: no choice, confidence or text carried over from
# elsewhere (defaultChecked / defaultValue are the markup's own values).
FORM_AS_SENT = """() => {
  const form = document.querySelector('#workspace form[data-answer]');
  return Array.from(form.elements).filter(el =>
    (el.type === 'radio' || el.type === 'checkbox') ? el.checked !== el.defaultChecked
      : (el.tagName === 'TEXTAREA' || el.type === 'text') && el.value !== el.defaultValue
  ).map(el => el.name);
}"""
DRAFTS = "() => Object.keys(localStorage).filter(k => k.startsWith('proactbench-draft'))"


def wait_for_item(page, previous: str) -> str:
    """The next item, once workspace.js has taken it in (focus moved, draft restored)."""
    page.wait_for_function(
        "prev => { const ws = document.getElementById('workspace');"
        " return ws && ws.dataset.item && ws.dataset.item !== prev && ws.dataset.shown === '1'; }",
        arg=previous,
    )
    return current_item(page)


def focused(page) -> str:
    return page.evaluate("document.activeElement.tagName + '#' + document.activeElement.id")


@pytest.mark.parametrize("kind", list(ANSWER_BY_KEYS))
def test_every_way_of_submitting_opens_the_next_item_empty_and_ready_for_keys(
    kind, page, live_server, make_study, make_annotators
):
    """Issue #14, bug 1: Ctrl+Enter from the note box carried the answer into the next item (the
    box's "change", fired as htmx swapped it out, saved it as the next item's draft) and left
    focus in the box, so the next keys were typed into it."""
    keys, label, confidence = ANSWER_BY_KEYS[kind]
    user, *others = make_annotators(3)
    if kind == "dialogue_audit":  # two auditors a dialogue, and someone to decide a split
        people = {"annotators": [user, others[0]], "adjudicators": [others[1]]}
    else:
        people = {"annotators": [user], "overlap": 1, "condition": ""}
    study = make_study(kind, max_items=5, reason_required=False, **people)
    login(page, live_server, user)
    page.goto(f"{live_server.url}/annotate/{study.pk}/")
    item = press_until_new_item(page, "Enter", "")
    for n, path in enumerate(SUBMIT_PATHS):
        for key in keys:
            page.keyboard.press(key)
        page.keyboard.press("r")
        page.keyboard.type(f"note {n}")
        if path == "button":
            page.click("#workspace form[data-answer] button[type=submit]")
        elif path == "Enter":
            page.keyboard.press("Escape")
            page.keyboard.press("Enter")
        else:
            page.keyboard.press("Control+Enter")
        item = wait_for_item(page, item)
        assert page.evaluate(FORM_AS_SENT) == [], path
        assert page.input_value("#workspace textarea[name=note]") == "", path
        assert page.evaluate(DRAFTS) == [], path
        assert focused(page) == "SECTION#workspace", path
    answers = Answer.objects.filter(assignment__rater__user=user).order_by("id")
    assert [(a.label, a.confidence, a.note) for a in answers] == [
        (label, confidence, f"note {n}") for n in range(len(SUBMIT_PATHS))
    ]
    assert page.dialogs == []


def test_typing_the_moment_the_next_item_appears_stays_in_the_box(
    page, live_server, make_study, make_annotators
):
    """The item is taken in (focus, draft) as it is swapped in, not at htmx's settle a timer
    later: that moved focus out of a box the annotator was already typing in."""
    user = make_annotators(1)[0]
    study = make_study(annotators=[user], overlap=1, max_items=3)
    login(page, live_server, user)
    page.goto(f"{live_server.url}/annotate/{study.pk}/")
    page.evaluate("htmx.config.defaultSettleDelay = 400")  # a slow machine's settle
    item = press_until_new_item(page, "Enter", "")
    page.wait_for_timeout(500)
    page.keyboard.press("1")
    page.keyboard.press("Shift+Digit4")
    item = press_until_new_item(page, "Enter", item)
    page.keyboard.press("r")
    page.keyboard.type("Typed at once")
    page.wait_for_timeout(500)  # the settle has come and gone
    page.keyboard.type(", and later.")
    assert page.input_value("#workspace textarea[name=note]") == "Typed at once, and later."


def test_after_a_failed_required_check_the_keys_it_names_work(
    page, live_server, make_study, make_annotators
):
    """Issue #14, bug 1: the form sent back for a blank rationale ("press r to type it") kept
    focus in the rationale box, so the keys that followed were typed into it."""
    user = make_annotators(1)[0]
    study = make_study("direct_rating", annotators=[user], overlap=1, condition="", max_items=2)
    login(page, live_server, user)
    page.goto(f"{live_server.url}/annotate/{study.pk}/")
    item = press_until_new_item(page, "Enter", "")
    for key in ("p", "Shift+Digit3", "r"):
        page.keyboard.press(key)
    page.keyboard.type("   ")  # passes the browser's check, not the server's
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("#workspace .errorlist")
    page.wait_for_function("document.getElementById('workspace').dataset.shown === '1'")
    assert "press r to type it" in page.inner_text("#workspace .errorlist")
    assert focused(page) == "SECTION#workspace"
    for key in ("a", "r"):  # Partial after all; then the rationale
        page.keyboard.press(key)
    page.keyboard.type("Right direction, no anchor.")
    page.keyboard.press("Control+Enter")
    wait_for_item(page, item)
    answer = Answer.objects.get(assignment__rater__user=user)
    assert (answer.label, answer.confidence, answer.note) == (
        "PARTIAL",
        3,
        "Right direction, no anchor.",
    )


def test_a_draft_is_its_annotators_own_and_logging_out_forgets_it(
    page, live_server, make_study, make_annotators
):
    """A draft belongs to one annotator and one item, and ends with the session: the next
    annotator at a shared browser, holding the same item, finds it empty."""
    one, two = make_annotators(2)
    study = make_study(annotators=[one, two], overlap=2, max_items=2)

    def open_workspace(user) -> None:
        login(page, live_server, user)  # clears the cookies only: storage is the browser's
        page.goto(f"{live_server.url}/annotate/{study.pk}/")

    open_workspace(two)
    item = press_until_new_item(page, "Enter", "")
    open_workspace(one)
    assert press_until_new_item(page, "Enter", "") == item  # both hold the same item
    for key in ("1", "Shift+Digit4", "r"):
        page.keyboard.press(key)
    page.keyboard.type("One's reason")
    page.keyboard.press("Escape")
    assert len(page.evaluate(DRAFTS)) == 1
    # That session ends without a logout (cookies gone); the other annotator resumes the item.
    open_workspace(two)
    assert current_item(page) == item
    assert page.evaluate(FORM_AS_SENT) == []
    assert page.input_value("#workspace textarea[name=note]") == ""
    page.keyboard.press("2")
    assert len(page.evaluate(DRAFTS)) == 1  # theirs; the other annotator's is gone
    page.click("form[data-logout] button[type=submit]")
    page.wait_for_url(re.compile(r".*/accounts/(login|logout)/.*"))
    assert page.evaluate(DRAFTS) == []


def test_a_second_tab_is_told_its_answer_was_not_saved(
    page, live_server, make_study, make_annotators
):
    """A second tab's different answer to an answered item is refused aloud, naming the answer
    kept."""
    user = make_annotators(1)[0]
    study = make_study(annotators=[user], overlap=1, max_items=3)
    login(page, live_server, user)
    url = f"{live_server.url}/annotate/{study.pk}/"
    page.goto(url)
    item = press_until_new_item(page, "Enter", "")
    other = page.context.new_page()
    other.goto(url)
    assert current_item(other) == item
    page.keyboard.press("1")
    page.keyboard.press("Shift+Digit4")
    following = press_until_new_item(page, "Enter", item)
    other.keyboard.press("2")
    other.keyboard.press("Shift+Digit2")
    assert press_until_new_item(other, "Enter", item) == following
    notice = other.inner_text("#workspace .notice")
    assert "Not saved" in notice and "Response 1, confidence 4" in notice
    assert [a.details["choice"] for a in Answer.objects.all()] == ["1"]
