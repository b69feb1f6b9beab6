"""The proposal-review kind: items from a run (replies at a trigger as proposals), the workspace
and its answer form through the real pages (each proposal accepted or rejected by screen
position, or all rejected at once), what an answer stores, undo, the study page's lines, the
creation form's k, and k never exceeded under concurrency."""

import io
import json
import re
import threading
from collections import Counter

import pytest
from django.core.management import call_command
from django.db import connections
from django.urls import reverse

from annotation.kinds.proposal_review import KIND, ReviewLabel
from annotation.models import Answer, Assignment, AssignmentState, Rater, Study, StudyItem
from annotation.services.assignments import answer_submit, assignment_next
from annotation.services.studies import StudyInputError
from benchmark.models import Condition, EvaluationUnit, Trigger
from tests.annotation.conftest import form_data, rater
from tests.annotation.test_workspace_pages import HTMX, key_of, token_of
from tests.proposal_review import (
    SOURCES,
    answer_all,
    answer_form_data,
    context,
    import_contexts,
)

pytestmark = pytest.mark.django_db


def three_proposals(n: int = 3) -> list[dict]:
    return [
        context(f"ctx-{i}", [("a", SOURCES[0]), ("b", SOURCES[1]), ("c", SOURCES[2])])
        for i in range(n)
    ]


# --- From a run ---------------------------------------------------------------------------------


def test_from_a_run_each_trigger_is_a_context_and_each_models_reply_a_proposal(run, make_study):
    study = make_study("proposal_review", condition=Condition.VANILLA, overlap=2)
    triggers = Trigger.objects.count()
    assert study.items.count() == triggers
    item = study.items.order_by("pk").first()
    units = EvaluationUnit.objects.filter(
        run=run, trigger_id=item.trigger_id, condition=Condition.VANILLA
    ).order_by("endpoint__name")
    proposals = item.payload["proposals"]
    assert [(p["source"], p["text"]) for p in proposals] == [
        (u.endpoint.name, u.reply) for u in units
    ]
    assert item.payload["silent"] == [] and sorted(item.payload["sides"]) == ["p1", "p2"]
    conversation = item.payload["conversation"]
    turn = item.trigger.turn
    assert conversation[-1] == {"role": "user", "text": turn.user_message}
    assert len(conversation) == 2 * turn.index - 1  # every earlier turn, then its user message
    assert item.key == f"{turn.dialogue.unique_id_eval}#t{turn.index}"


def test_from_a_run_with_two_conditions_one_must_be_chosen(run, make_study):
    with pytest.raises(StudyInputError) as caught:
        make_study("proposal_review", condition="")
    assert "Choose one condition" in " ".join(caught.value.errors["condition"])


def test_the_creation_form_offers_k_3_for_proposal_review_and_keeps_a_typed_k(
    run, make_annotators, client_for, researcher
):
    client = client_for(researcher)
    url = reverse("annotation:study_new")
    people = make_annotators(3)
    switch = form_data(run, people) | {"kind": "proposal_review", "_from_kind": "pairwise"}
    html = client.get(url, switch, headers=HTMX).content.decode()
    assert re.search(r'name="overlap" value="3"', html)
    typed = switch | {"overlap": "5"}
    html = client.get(url, typed, headers=HTMX).content.decode()
    assert re.search(r'name="overlap" value="5"', html)
    back = switch | {"kind": "pairwise", "_from_kind": "proposal_review", "overlap": "3"}
    assert re.search(
        r'name="overlap" value="2"', client.get(url, back, headers=HTMX).content.decode()
    )
    response = client.post(
        url,
        form_data(run, people)
        | {"kind": "proposal_review", "overlap": "3", "condition": Condition.VANILLA},
    )
    assert response.status_code == 302
    study = Study.objects.get()
    assert study.kind == "proposal_review" and study.overlap == 3


# --- The workspace ----------------------------------------------------------------------------


@pytest.fixture
def review(make_annotators, client):
    users = make_annotators(3)
    study = import_contexts(three_proposals(), users)
    client.force_login(users[0])
    return study, users, client


def _next(client, study):
    return client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)


def test_the_workspace_shows_the_timeline_and_the_proposals_by_position(review):
    study, users, client = review
    page = _next(client, study)
    html = page.content.decode()
    token = token_of(page)
    assignment = Assignment.objects.get(item__token=token)
    item = assignment.item
    assert "What the user has been doing" in html and '<ol class="event-timeline">' in html
    for event in item.payload["events"]:
        assert event["time"] in html and event["text"] in html
    texts = {p["id"]: p["text"] for p in item.payload["proposals"]}
    for position, pid in enumerate(assignment.display["order"], start=1):
        row = re.search(rf'<tr data-check-row data-proposal="{position}".*?</tr>', html, re.S)
        assert row and texts[pid] in row.group(0)
        assert f'name="proposal_{position}" value="accept"' in row.group(0)
    assert 'name="reject_all" value="1"' in html and 'data-keys="0"' in html
    # Rows carry no id: htmx's settle copies the class of the last item's row with the same id
    # onto the new one for a moment, and a key pressed then answered the wrong row.
    assert not re.search(r"<tr[^>]* id=", html)
    assert 'data-check-keys="y"' in html and 'data-check-keys="n"' in html


def test_an_answer_maps_positions_back_to_proposal_ids(review):
    study, users, client = review
    page = _next(client, study)
    assignment = Assignment.objects.get(item__token=token_of(page))
    first, second, third = assignment.display["order"]
    data = {
        "idempotency_key": key_of(page),
        "proposal_1": "accept",
        "proposal_2": "reject",
        "proposal_3": "accept",
    }
    client.post(reverse("annotation:answer", args=[study.pk, token_of(page)]), data, headers=HTMX)
    answer = Answer.objects.get()
    assert answer.label == ReviewLabel.SOME_ACCEPTED
    assert answer.details == {
        "decisions": {first: "accept", second: "reject", third: "accept"},
        "reject_all": False,
    }
    assert answer.display == assignment.display
    assert KIND.answer_shown(answer) == "Accepted proposals 1, 3 of 3"


def test_each_proposal_needs_a_decision_unless_all_are_rejected(review):
    study, users, client = review
    page = _next(client, study)
    url = reverse("annotation:answer", args=[study.pk, token_of(page)])
    html = client.post(
        url, {"idempotency_key": key_of(page), "proposal_2": "accept"}, headers=HTMX
    ).content.decode()
    assert "Proposal 1: accept or reject it (y / n), or reject all (0)." in html
    assert "Proposal 3: accept or reject it" in html and "Proposal 2: accept" not in html
    assert not Answer.objects.exists()
    # "Reject all" rejects every proposal, whatever the rows held (nothing hidden is kept).
    client.post(
        url,
        {"idempotency_key": key_of(page), "proposal_2": "accept", "reject_all": "1"},
        headers=HTMX,
    )
    answer = Answer.objects.get()
    assert answer.label == ReviewLabel.REJECT_ALL
    assert answer.details["reject_all"] is True
    assert set(answer.details["decisions"].values()) == {"reject"}
    assert len(answer.details["decisions"]) == 3
    assert KIND.answer_shown(answer) == "Reject all (no help needed)"


def test_rejecting_each_is_not_reject_all(review):
    study, users, client = review
    page = _next(client, study)
    data = {"idempotency_key": key_of(page)} | {f"proposal_{n}": "reject" for n in (1, 2, 3)}
    client.post(reverse("annotation:answer", args=[study.pk, token_of(page)]), data, headers=HTMX)
    answer = Answer.objects.get()
    assert answer.label == ReviewLabel.NONE_ACCEPTED and answer.details["reject_all"] is False


def test_undo_brings_the_decisions_back_by_position(review):
    study, users, client = review
    page = _next(client, study)
    token = token_of(page)
    data = {"idempotency_key": key_of(page), "proposal_1": "reject", "proposal_2": "accept"}
    data["proposal_3"] = "reject"
    client.post(reverse("annotation:answer", args=[study.pk, token]), data, headers=HTMX)
    undone = client.post(reverse("annotation:undo", args=[study.pk]), headers=HTMX)
    assert token_of(undone) == token
    html = undone.content.decode()
    assert re.search(r'name="proposal_2" value="accept"[^>]*checked', html)
    assert re.search(r'name="proposal_1" value="reject"[^>]*checked', html)


def test_the_display_order_rotates_between_a_contexts_raters(make_annotators):
    users = make_annotators(3)
    study = import_contexts(three_proposals(6), users)
    orders: dict[int, list] = {}
    for user in users:
        assignment = assignment_next(rater=rater(study, user))
        orders.setdefault(assignment.item_id, []).append(tuple(assignment.display["order"]))
    for seen in orders.values():
        firsts = [order[0] for order in seen]
        assert len(set(firsts)) == len(firsts)  # each rater sees another proposal first


def test_the_study_page_shows_decisions_and_agreement_per_proposal(
    make_annotators, client_for, researcher
):
    users = make_annotators(3)
    study = import_contexts(three_proposals(2), users)
    # Two annotators: on both contexts a accepted by both, b split, c rejected by both.
    answer_all(study, users[0], lambda key: {"a": "accept", "b": "accept", "c": "reject"})
    answer_all(study, users[1], lambda key: {"a": "accept", "b": "reject", "c": "reject"})
    html = (
        client_for(researcher)
        .get(reverse("annotation:study_detail", args=[study.pk]))
        .content.decode()
    )
    # 12 decisions, 6 accepts (a twice and b once per context); per proposal: a and c agree,
    # b does not → 4 of 6.
    assert "Proposal decisions: <strong>50%</strong> accepted of 12" in html
    assert "(0 of 4 answers were “reject all”)" in html
    assert "Agreement per proposal so far: <strong>67%</strong>" in html
    assert "over 6 proposal(s) with 2+ decisions" in html


# --- Concurrency --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_simultaneous_annotators_never_push_a_context_past_k(make_annotators):
    n = 8
    users = make_annotators(n)
    study = import_contexts(three_proposals(10), users)  # k = 3: 30 places for 8 people
    raters = list(Rater.objects.select_related("study").filter(study=study))
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def work(i: int) -> None:
        try:
            barrier.wait()
            done = 0
            while (assignment := assignment_next(rater=raters[i])) is not None:
                form = KIND.answer_form(
                    answer_form_data(assignment, {"a": "accept", "b": "reject", "c": "reject"}),
                    study=study,
                    assignment=assignment,
                )
                assert form.is_valid(), form.errors
                answer_submit(
                    rater=raters[i],
                    item_token=assignment.item.token,
                    answer=form.to_input(),
                    idempotency_key=form.cleaned_data["idempotency_key"],
                )
                done += 1
            results[i] = done
        except Exception as exc:  # reported below, with the thread's number
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not [r for r in results if isinstance(r, Exception)], results
    assert sum(results) == 30
    per_item = Counter(
        Answer.objects.filter(assignment__item__study=study, retracted_at__isnull=True).values_list(
            "assignment__item_id", flat=True
        )
    )
    assert set(per_item.values()) == {3} and len(per_item) == 10
    assert set(
        StudyItem.objects.filter(study=study).values_list("completed_answers", flat=True)
    ) == {3}
    assert not Assignment.objects.filter(item__study=study, state=AssignmentState.LEASED).exists()


# --- The demo -------------------------------------------------------------------------------------


def test_load_demo_imports_the_hand_written_contexts_once(db):
    from annotation.demo import PROPOSAL_STUDY, PROPOSALS_FILE
    from annotation.management.commands.load_demo import DEMO_ENDPOINTS

    call_command("load_demo", stdout=io.StringIO())
    out = io.StringIO()
    call_command("load_demo", stdout=out)
    assert "Demo studies: 0 created" in out.getvalue()
    study = Study.objects.get(name=PROPOSAL_STUDY)
    records = [json.loads(line) for line in PROPOSALS_FILE.read_text().splitlines()]
    assert study.kind == "proposal_review" and study.overlap == 2
    assert set(study.items.values_list("key", flat=True)) == {r["context_id"] for r in records}
    assert set(study.raters.values_list("user__username", flat=True)) == {
        "annotator1",
        "annotator2",
    }
    demo_models = {name for name, _ in DEMO_ENDPOINTS}
    sources = {p["source"] for r in records for p in r["proposals"]}
    silent = {m for r in records for m in r.get("silent", [])}
    assert sources | silent <= demo_models and silent
    assert any(len(r["proposals"]) == 3 for r in records)
