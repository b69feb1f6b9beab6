"""A second tab's answer to an item already answered (issue #14, F8): the first answer is kept,
nothing else is stored, and the second tab says so, naming the answer kept."""

import pytest
from django.urls import reverse

from annotation.models import Answer
from tests.annotation.test_workspace_pages import HTMX, key_of, pairwise_answer, token_of

pytestmark = pytest.mark.django_db

KEPT = "answer is kept: Response 1, confidence 4"


@pytest.fixture
def two_tabs(make_study, make_annotators, client):
    """One annotator's item, open in two tabs (two renders: two idempotency keys)."""
    user = make_annotators(1)[0]
    study = make_study(annotators=[user], overlap=1)
    client.force_login(user)
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    second = client.get(reverse("annotation:workspace", args=[study.pk]), headers=HTMX)
    assert token_of(second) == token_of(first) and key_of(second) != key_of(first)
    url = reverse("annotation:answer", args=[study.pk, token_of(first)])
    return client, url, first, second


def test_a_second_tabs_different_answer_is_refused_aloud_and_the_first_kept(two_tabs):
    client, url, first, second = two_tabs
    answered = client.post(url, pairwise_answer(first), headers=HTMX)
    assert "already answered" not in answered.content.decode()
    late = client.post(url, pairwise_answer(second, choice="tie", note="changed"), headers=HTMX)
    assert late.status_code == 200
    body = late.content.decode()
    assert "Not saved: you had already answered that item" in body and KEPT in body
    assert token_of(late) == token_of(answered)  # on to the item the first tab is on
    kept = Answer.objects.get()
    assert (kept.details, kept.confidence, kept.note) == ({"choice": "1"}, 4, "")


def test_the_same_form_sent_again_changed_is_refused_aloud_too(two_tabs):
    """A duplicated tab carries the same idempotency key."""
    client, url, first, _ = two_tabs
    client.post(url, pairwise_answer(first), headers=HTMX)
    again = client.post(url, pairwise_answer(first, choice="2"), headers=HTMX)
    assert KEPT in again.content.decode()
    assert Answer.objects.get().details == {"choice": "1"}


def test_the_same_answer_again_is_a_quiet_replay(two_tabs):
    client, url, first, second = two_tabs
    client.post(url, pairwise_answer(first), headers=HTMX)
    for form in (first, second):  # a double submit; the same answer from the other tab
        again = client.post(url, pairwise_answer(form), headers=HTMX)
        assert "Not saved" not in again.content.decode()
    assert Answer.objects.count() == 1


def test_without_htmx_the_notice_follows_the_redirect(two_tabs):
    client, url, first, second = two_tabs
    client.post(url, pairwise_answer(first))
    response = client.post(url, pairwise_answer(second, choice="2"), follow=True)
    assert KEPT in response.content.decode()
