"""The annotators' pages through the real stack: home, workspace, next / answer / undo (htmx
and plain), permissions (others' items are 404), CSRF, and bounded query counts."""

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.kinds.dialogue_audit import AUDIT_CHECK_KEYS
from annotation.models import Answer, Assignment, AssignmentState
from annotation.services.assignments import assignment_next
from tests.annotation.conftest import rater

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


def token_of(response) -> str:
    match = re.search(r'data-item="([^"]*)"', response.content.decode())
    assert match, "no workspace in the response"
    return match.group(1)


def key_of(response) -> str:
    return re.search(r'name="idempotency_key" value="([^"]+)"', response.content.decode()).group(1)


def pairwise_answer(response, **fields):
    return {"idempotency_key": key_of(response), "choice": "1", "confidence": "4", **fields}


@pytest.fixture
def pair(make_study, make_annotators, client):
    users = make_annotators(2)
    study = make_study(annotators=users, overlap=2)
    client.force_login(users[0])
    return study, users, client


def test_home_lists_the_annotators_studies_with_progress(pair, make_study):
    study, users, client = pair
    make_study(annotators=[users[1]], name="Someone else's study", overlap=1)
    html = client.get(reverse("annotation:home")).content.decode()
    assert study.name in html and "Someone else's study" not in html
    assert reverse("annotation:workspace", args=[study.pk]) in html
    assert 'id="shortcuts"' in html  # the ? overlay


def test_workspace_flow_next_answer_undo_with_htmx(pair):
    study, users, client = pair
    url = reverse("annotation:workspace", args=[study.pk])
    page = client.get(url)
    assert page.status_code == 200 and token_of(page) == ""  # nothing held yet: a Start button
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    body = first.content.decode()
    assert body.lstrip().startswith('<section id="workspace"') and "<html" not in body
    token = token_of(first)
    assert 'id="response-1"' in body and 'id="response-2"' in body
    # A reload resumes the same item.
    assert token_of(client.get(url)) == token
    answered = client.post(
        reverse("annotation:answer", args=[study.pk, token]),
        pairwise_answer(first, note="Concrete next step."),
        headers=HTMX,
    )
    assert answered.status_code == 200
    assert token_of(answered) not in ("", token)  # the next item, in the same swap
    answer = Answer.objects.get()
    assert answer.details == {"choice": "1"} and answer.confidence == 4
    assert answer.label == Assignment.objects.get(item__token=token).display["order"][0]
    undone = client.post(reverse("annotation:undo", args=[study.pk]), headers=HTMX)
    assert token_of(undone) == token
    assert "Undone" in undone.content.decode()
    # The undone answer comes back filled in as it was.
    assert re.search(r'value="1"[^>]*checked', undone.content.decode())


def test_an_invalid_answer_names_the_missing_fields_and_stores_nothing(pair):
    study, users, client = pair
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    response = client.post(
        reverse("annotation:answer", args=[study.pk, token_of(first)]),
        {"idempotency_key": key_of(first)},
        headers=HTMX,
    )
    html = response.content.decode()
    assert "Choose Response 1, Response 2 or Tie" in html
    assert "Confidence: choose 1 to 5" in html
    assert token_of(response) == token_of(first)
    assert not Answer.objects.exists()


def test_a_required_reason_is_enforced(make_study, make_annotators, client):
    users = make_annotators(2)
    study = make_study(annotators=users, reason_required=True)
    client.force_login(users[0])
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    response = client.post(
        reverse("annotation:answer", args=[study.pk, token_of(first)]),
        pairwise_answer(first, note="  "),
        headers=HTMX,
    )
    assert "Reason: this study asks for one" in response.content.decode()
    assert not Answer.objects.exists()


def test_without_htmx_every_action_redirects_back_to_the_workspace(pair):
    study, users, client = pair
    url = reverse("annotation:workspace", args=[study.pk])
    response = client.post(reverse("annotation:next", args=[study.pk]))
    assert response.status_code == 302 and response.url == url
    page = client.get(url)
    response = client.post(
        reverse("annotation:answer", args=[study.pk, token_of(page)]), pairwise_answer(page)
    )
    assert response.status_code == 302 and response.url == url
    assert Answer.objects.count() == 1


def test_double_submit_is_one_answer(pair):
    study, users, client = pair
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    url = reverse("annotation:answer", args=[study.pk, token_of(first)])
    data = pairwise_answer(first)
    one = client.post(url, data, headers=HTMX)
    two = client.post(url, data, headers=HTMX)
    assert token_of(one) == token_of(two)
    assert Answer.objects.count() == 1


def test_others_items_and_studies_are_404(pair, make_annotators):
    study, users, client = pair
    other = rater(study, users[1])
    theirs = assignment_next(rater=other)
    for response in (
        client.get(reverse("annotation:item", args=[study.pk, theirs.item.token])),
        client.post(
            reverse("annotation:answer", args=[study.pk, theirs.item.token]),
            {"idempotency_key": "x" * 22, "choice": "1", "confidence": "3"},
        ),
        client.get(reverse("annotation:item", args=[study.pk, "no-such-token"])),
    ):
        assert response.status_code == 404
    outsider = make_annotators(1, prefix="outsider")[0]
    client.force_login(outsider)
    for name in ("workspace",):
        assert client.get(reverse(f"annotation:{name}", args=[study.pk])).status_code == 404
    for name in ("next", "undo"):
        assert client.post(reverse(f"annotation:{name}", args=[study.pk])).status_code == 404
    assert client.get(reverse("annotation:workspace", args=[987654])).status_code == 404
    assert not Assignment.objects.filter(rater__user=outsider).exists()


def test_own_done_item_shows_the_answer_read_only(pair):
    study, users, client = pair
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    token = token_of(first)
    client.post(reverse("annotation:answer", args=[study.pk, token]), pairwise_answer(first))
    page = client.get(reverse("annotation:item", args=[study.pk, token])).content.decode()
    assert "Your answer" in page and "Response 1" in page and "data-answer" not in page


def test_anonymous_visitors_are_sent_to_login(pair):
    study, users, client = pair
    client.logout()
    response = client.get(reverse("annotation:workspace", args=[study.pk]))
    assert response.status_code == 302 and "login" in response.url
    assert client.post(reverse("annotation:next", args=[study.pk])).status_code == 302


def test_every_form_needs_its_csrf_token(pair):
    study, users, _ = pair
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(users[0])
    assert strict.post(reverse("annotation:next", args=[study.pk])).status_code == 403
    assert strict.post(reverse("annotation:undo", args=[study.pk])).status_code == 403
    page = strict.get(reverse("annotation:workspace", args=[study.pk]))
    assert "csrfmiddlewaretoken" in page.content.decode()
    assert 'hx-headers=\'{"X-CSRFToken"' in page.content.decode()
    assert not Assignment.objects.exists()


@pytest.mark.parametrize(
    "kind",
    [
        "pairwise",
        "direct_rating",
        "adjudication",
        "failure_mode",
        "dialogue_audit",
    ],
)
def test_each_workspace_renders_and_takes_an_answer(kind, make_study, make_annotators, client):
    users = make_annotators(3)
    extra = {"condition": ""} if kind == "failure_mode" else {}
    if kind == "direct_rating":
        extra["reveal_judge_verdict"] = True
    study = make_study(kind, annotators=users, **extra)
    client.force_login(users[0])
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    html = first.content.decode()
    assert first.status_code == 200 and "data-answer" in html
    data = {"idempotency_key": key_of(first), "note": "Because."}
    if kind == "pairwise":
        data.update(choice="tie", confidence="2")
    elif kind in ("direct_rating", "adjudication"):
        data.update(verdict="PARTIAL", confidence="5")
        assert "Judge A" in html if kind == "adjudication" else "Known information" in html
    elif kind == "failure_mode":
        suggested = re.search(r'value="(\w+)"[^>]*checked', html).group(1)
        data.update(label="other" if suggested != "other" else "generic_closing")
    else:
        data.update({f"check_{key}": "yes" for key in AUDIT_CHECK_KEYS}, decision="pass")
    response = client.post(
        reverse("annotation:answer", args=[study.pk, token_of(first)]), data, headers=HTMX
    )
    assert response.status_code == 200
    answer = Answer.objects.get()
    if kind == "failure_mode":
        assert answer.details["changed"] is True and answer.details["suggested"] == suggested
    if kind == "dialogue_audit":
        assert answer.label == "pass" and set(answer.details["checks"]) == set(AUDIT_CHECK_KEYS)
    if kind == "direct_rating":
        assert "the judge's verdict" in response.content.decode()  # revealed only now
        assert "the judge's verdict" not in html


def test_the_direct_rating_verdict_is_hidden_until_answered(make_study, make_annotators, client):
    users = make_annotators(2)
    study = make_study(
        "direct_rating", annotators=users, overlap=1, max_items=2, reveal_judge_verdict=True
    )
    client.force_login(users[0])
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    assignment = Assignment.objects.get(rater__user=users[0])
    judged = {"Rationale 0: the reply books the van.", "Rationale 1: the reply books the van."}
    assert not any(text in first.content.decode() for text in judged)
    response = client.post(
        reverse("annotation:answer", args=[study.pk, assignment.item.token]),
        {"idempotency_key": key_of(first), "verdict": "PASS", "confidence": "3", "note": "ok"},
        headers=HTMX,
    )
    assert "Rationale 0: the reply books the van." in response.content.decode()


def _cycle(client, study) -> dict[str, int]:
    """Query counts of one round of every annotator action."""
    counts = {}

    def measure(name, call):
        with CaptureQueriesContext(connection) as queries:
            response = call()
        assert response.status_code == 200, name
        counts[name] = len(queries)
        return response

    measure("home", lambda: client.get(reverse("annotation:home")))
    first = measure(
        "next", lambda: client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    )
    measure("workspace", lambda: client.get(reverse("annotation:workspace", args=[study.pk])))
    measure(
        "item",
        lambda: client.get(reverse("annotation:item", args=[study.pk, token_of(first)])),
    )
    measure(
        "answer",
        lambda: client.post(
            reverse("annotation:answer", args=[study.pk, token_of(first)]),
            pairwise_answer(first),
            headers=HTMX,
        ),
    )
    measure("undo", lambda: client.post(reverse("annotation:undo", args=[study.pk]), headers=HTMX))
    measure(
        "answer again",
        lambda: client.post(
            reverse("annotation:answer", args=[study.pk, token_of(first)]),
            pairwise_answer(first, idempotency_key="another-key-" + token_of(first)),
            headers=HTMX,
        ),
    )
    return counts


def test_query_counts_are_bounded_and_do_not_grow_with_the_data(
    make_study, make_annotators, client, django_assert_max_num_queries
):
    users = make_annotators(2)
    study = make_study(annotators=users, overlap=1)
    client.force_login(users[0])
    small = _cycle(client, study)
    for n in range(4):  # more studies, more answers, more history
        make_study(annotators=users, overlap=2, name=f"Other study {n}")
    for _ in range(3):
        _cycle(client, study)
    big = _cycle(client, study)
    assert all(big[name] <= small[name] for name in small), (small, big)
    # As measured on 2026-12-02 (both databases); the hot path was cut to these on purpose.
    # The answer's 16 since its hand-out runs in its transaction (2026-12-07).
    limits = {"home": 4, "next": 13, "workspace": 8, "item": 7, "answer": 16, "undo": 16}
    for name, count in small.items():
        assert count <= limits.get(name, 20), (name, count)


def test_lapsed_assignment_is_shown_as_such(pair):
    study, users, client = pair
    a = assignment_next(rater=rater(study, users[0]))
    Assignment.objects.filter(pk=a.pk).update(state=AssignmentState.LAPSED)
    page = client.get(reverse("annotation:item", args=[study.pk, a.item.token]))
    assert page.status_code == 200 and "data-answer" not in page.content.decode()


def test_the_annotation_hot_path_runs_exactly_its_statements(
    make_study, make_annotators, client, django_assert_num_queries
):
    """Issue #20 part 5: the requests of an annotator at work — the answer that hands out the
    next item (one request an item, as the page works: tests/annotation/test_browser.py), and
    Next on the item shown — pinned to their statements, so that an added round trip fails here
    and is not found later as CPU on the annotation benchmark. Counted by Django, BEGIN/COMMIT
    and the session and user reads included."""
    users = make_annotators(2)
    study = make_study(annotators=users, overlap=2)
    client.force_login(users[0])
    shown = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    for _ in range(2):  # the second answer's hand-out runs as every later one does
        # session, user, the assignment (access); one transaction: BEGIN, rater lock, the item
        # locked with the key's earlier answer and whether the rater holds another lease,
        # INSERT answer, UPDATE assignment, UPDATE item, then the hand-out in the same
        # transaction (no lock waited for: SKIP LOCKED): the first candidate, its places,
        # INSERT assignment, COMMIT; then progress and the conversation. (Two transactions, 19
        # statements, until the hand-out joined the answer's; 16 until the answered item's read
        # said whether the rater holds another lease.)
        with django_assert_num_queries(15):
            shown = client.post(
                reverse("annotation:answer", args=[study.pk, token_of(shown)]),
                pairwise_answer(shown),
                headers=HTMX,
            )
        assert shown.status_code == 200 and token_of(shown)
    # Next on the item shown: session, user, the rater with its study, the lease (nothing to
    # write: its lease is fresh), progress, the conversation.
    with django_assert_num_queries(6):
        again = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    assert token_of(again) == token_of(shown)
