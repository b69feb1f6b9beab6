"""Direct rating and the judge's verdict: shown only in a study that asks for it
(``reveal_judge_verdict``, off by default), and once shown, the answer it follows is final —
before, answering PASS, seeing "the judge's verdict: Fail", pressing Undo and answering FAIL
left a live answer that agreed with the judge, and the agreement statistics counted it."""

import threading
import time

import pytest
from django.db import connections, transaction
from django.urls import reverse

from annotation.models import Answer, Assignment, Study
from annotation.services.assignments import (
    UndoRefused,
    answer_undo,
    answer_verdict_reveal,
    assignment_next,
)
from benchmark.models import Judgment
from tests.annotation.conftest import JUDGES, form_data, rater
from tests.annotation.test_workspace_pages import HTMX, key_of, token_of
from tests.stats.conftest import answer

pytestmark = pytest.mark.django_db

VERDICT_SHOWN = "the judge's verdict"


def _rate(client, study, first, verdict: str, key: str = ""):
    return client.post(
        reverse("annotation:answer", args=[study.pk, token_of(first)]),
        {
            "idempotency_key": key or key_of(first),
            "verdict": verdict,
            "confidence": "3",
            "note": "Because.",
        },
        headers=HTMX,
    )


def _judge_says_fail(study: Study) -> None:
    units = study.items.values("unit_id")
    Judgment.objects.filter(unit_id__in=units, judge__name=JUDGES[0][0]).update(verdict="FAIL")


@pytest.fixture
def direct(make_study, make_annotators, client):
    def make(**fields):
        users = make_annotators(1)
        study = make_study("direct_rating", annotators=users, overlap=1, max_items=2, **fields)
        _judge_says_fail(study)
        client.force_login(users[0])
        return study, users[0]

    return make


def test_by_default_the_verdict_is_not_shown_and_undo_works(direct, client):
    study, user = direct()
    assert study.reveal_judge_verdict is False
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    response = _rate(client, study, first, "PASS")
    assert VERDICT_SHOWN not in response.content.decode()
    assert Answer.objects.get().verdict_revealed_at is None
    undone = client.post(reverse("annotation:undo", args=[study.pk]), headers=HTMX)
    assert "Undone: the item is back" in undone.content.decode()
    assert Answer.objects.get().retraction_reason == "undo"


def test_once_the_verdict_is_shown_the_answer_is_final(direct, client):
    study, user = direct(reveal_judge_verdict=True)
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    response = _rate(client, study, first, "PASS")
    html = response.content.decode()
    assert VERDICT_SHOWN in html and "<strong>Fail</strong>" in html
    answer = Answer.objects.get()
    assert answer.verdict_revealed_at is not None
    undone = client.post(reverse("annotation:undo", args=[study.pk]), headers=HTMX)
    assert "Not undone: you have seen the judge&#x27;s verdict on that item" in (
        undone.content.decode()
    )
    answer.refresh_from_db()
    assert answer.retracted_at is None and answer.label == "PASS"
    assignment = Assignment.objects.get(item=answer.assignment.item)
    assert assignment.reopened is False and assignment.completed_at is not None
    # The item is not handed back: answering it again is refused too.
    again = _rate(client, study, first, "FAIL", key="a-second-answer")
    assert Answer.objects.filter(label="FAIL").count() == 0, again.content.decode()[:300]


def test_an_answer_undone_before_the_reveal_is_never_revealed(direct):
    """The reveal and the undo race on the same row; exactly one wins."""
    study, user = direct(reveal_judge_verdict=True)
    me = rater(study, user)
    given = answer(
        me, assignment_next(rater=me), lambda a: {"verdict": "PASS", "confidence": 3, "note": "ok"}
    )
    assert answer_undo(rater=me) is not None  # before the next page rendered the verdict
    assert answer_verdict_reveal(answer_id=given.pk) is False
    given.refresh_from_db()
    assert given.verdict_revealed_at is None
    # ...and the other order: revealed first, then undo is refused and changes nothing
    again = answer(
        me, assignment_next(rater=me), lambda a: {"verdict": "FAIL", "confidence": 3, "note": "ok"}
    )
    assert answer_verdict_reveal(answer_id=again.pk) is True
    assert answer_verdict_reveal(answer_id=again.pk) is True  # shown again: still fine
    with pytest.raises(UndoRefused):
        answer_undo(rater=me)
    again.refresh_from_db()
    assert again.retracted_at is None


def test_the_study_form_offers_the_option_for_direct_rating_only(
    client_for, researcher, run, make_annotators
):
    people = make_annotators(2)
    client = client_for(researcher)
    url = reverse("annotation:study_new")
    direct = form_data(
        run, people, kind="direct_rating", name="Rate the replies", reveal_judge_verdict="on"
    )
    assert client.post(url, direct).status_code == 302
    assert Study.objects.get(kind="direct_rating").reveal_judge_verdict is True
    pairwise = form_data(run, people, name="Pick one", reveal_judge_verdict="on")
    assert client.post(url, pairwise).status_code == 302
    assert Study.objects.get(kind="pairwise").reveal_judge_verdict is False
    for kind, shown in (("direct_rating", True), ("pairwise", False)):
        page = client.get(url, {"kind": kind}, headers=HTMX).content.decode()  # a kind switch
        assert ('name="reveal_judge_verdict"' in page) is shown, kind


@pytest.mark.django_db(transaction=True)
def test_an_undo_racing_a_reveal_being_recorded_is_refused(make_study, make_annotators):
    """The reveal is recorded (not yet committed) while Undo arrives: the undo waits for the
    answer's row and then finds it revealed (PostgreSQL re-checks the UPDATE's condition
    after the lock; SQLite serialises the two transactions)."""
    user = make_annotators(1)[0]
    study = make_study(
        "direct_rating", annotators=[user], overlap=1, max_items=2, reveal_judge_verdict=True
    )
    me = rater(study, user)
    given = answer(
        me, assignment_next(rater=me), lambda a: {"verdict": "PASS", "confidence": 3, "note": "ok"}
    )
    recorded, outcome = threading.Event(), {}

    def reveal():
        try:
            with transaction.atomic():
                assert answer_verdict_reveal(answer_id=given.pk)
                recorded.set()
                time.sleep(0.5)  # the undo is waiting on the row meanwhile
        finally:
            recorded.set()
            connections.close_all()

    def undo():
        recorded.wait(10)
        try:
            outcome["undo"] = answer_undo(rater=me)
        except UndoRefused as exc:
            outcome["undo"] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=reveal), threading.Thread(target=undo)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert isinstance(outcome.get("undo"), UndoRefused), outcome
    given.refresh_from_db()
    assert given.retracted_at is None and given.verdict_revealed_at is not None


def test_the_study_page_says_whether_the_verdict_is_shown(
    make_study, make_annotators, client_for, researcher
):
    client = client_for(researcher)
    for reveal, shown in ((True, "shown after each answer"), (False, "not shown")):
        study = make_study("direct_rating", n_annotators=1, overlap=1, reveal_judge_verdict=reveal)
        page = client.get(reverse("annotation:study_detail", args=[study.pk])).content.decode()
        assert f"<dt>Judge's verdict</dt><dd>{shown}" in page
