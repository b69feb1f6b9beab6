"""What an annotator is told is left for them (issue #14, bug 6): the home page's "Left for you"
counts the item they hold, and the end of a study is one clear finished state."""

import re

import pytest
from django.urls import reverse

from annotation.kinds.dialogue_audit import AUDIT_CHECK_KEYS
from annotation.services.assignments import assignment_next
from tests.annotation.conftest import rater
from tests.annotation.test_workspace_pages import HTMX, pairwise_answer, token_of

pytestmark = pytest.mark.django_db

FINISHED = "Nothing is left for you in this study: you have finished it. Thank you!"


def left_for_you(client) -> int:
    row = re.search(
        r"<tbody>\s*<tr>(.*?)</tr>", client.get(reverse("annotation:home")).content.decode(), re.S
    )
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    return int(cells[3])  # Study, Kind, Done, Left for you, …


def test_left_for_you_counts_the_item_you_hold(make_study, make_annotators, client):
    user = make_annotators(1)[0]
    study = make_study(annotators=[user], overlap=1, max_items=3)
    client.force_login(user)
    assert left_for_you(client) == 3
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    assert left_for_you(client) == 3  # one of them in hand
    url = reverse("annotation:answer", args=[study.pk, token_of(first)])
    client.post(url, pairwise_answer(first), headers=HTMX)  # and the next one handed out
    assert left_for_you(client) == 2


def assert_finished(response, message: str = FINISHED) -> None:
    body = response.content.decode()
    assert body.count(message) == 1, body
    assert "Nothing is" not in body.replace(message, "")  # no second "nothing left"
    assert not re.search(r"about \d+ left", body)
    assert (
        reverse("annotation:next", args=[response.wsgi_request.resolver_match.kwargs["study_id"]])
        not in body
    )


def test_the_end_of_a_study_is_one_finished_state(make_study, make_annotators, client):
    user = make_annotators(1)[0]
    study = make_study(annotators=[user], overlap=1, max_items=1)
    client.force_login(user)
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    url = reverse("annotation:answer", args=[study.pk, token_of(first)])
    last = client.post(url, pairwise_answer(first), headers=HTMX)
    assert_finished(last)
    assert 'data-keys="u"' in last.content.decode()  # Undo stays
    assert_finished(client.get(reverse("annotation:workspace", args=[study.pk])))
    assert_finished(client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX))
    # Without htmx: the same, after the redirect, and no flash message saying it again.
    assert_finished(client.post(reverse("annotation:next", args=[study.pk]), follow=True))


def test_items_held_by_others_are_not_the_end(make_study, make_annotators, client):
    """The last places are others' for now: Next may find one later, so it stays, with why."""
    one, two = make_annotators(2)
    study = make_study(annotators=[one, two], overlap=1, max_items=1)
    assignment_next(rater=rater(study, two))
    client.force_login(one)
    response = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    body = response.content.decode()
    assert "Nothing is free for you right now" in body and FINISHED not in body
    assert reverse("annotation:next", args=[study.pk]) in body


def test_an_audit_split_waiting_for_its_adjudicator_is_not_left_for_an_auditor(
    make_study, make_annotators, client
):
    """Its third place is an adjudicator's: not for the auditor who never held the dialogue."""
    one, two, idle, third = make_annotators(4)
    study = make_study(
        "dialogue_audit", annotators=[one, two, idle], adjudicators=[third], max_items=1
    )
    for user, decision in ((one, "pass"), (two, "fail")):
        client.force_login(user)
        first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
        data = {"idempotency_key": f"audit-key-{user.pk}", "decision": decision}
        data.update({f"check_{key}": "yes" for key in AUDIT_CHECK_KEYS})
        url = reverse("annotation:answer", args=[study.pk, token_of(first)])
        client.post(url, data, headers=HTMX)
    for auditor, message in ((two, FINISHED), (idle, "Nothing is left for you in this study.")):
        client.force_login(auditor)
        assert left_for_you(client) == 0
        assert_finished(client.get(reverse("annotation:workspace", args=[study.pk])), message)
    client.force_login(third)
    assert left_for_you(client) == 1
