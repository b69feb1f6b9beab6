"""What answers decide: a dialogue's audit status (two auditors, a third on a split) and a
judge disagreement's final verdict."""

import pytest
from django.urls import reverse

from annotation.models import AssignmentRole, StudyItem
from annotation.services.assignments import (
    AnswerInput,
    answer_submit,
    answer_undo,
    assignment_next,
)
from benchmark.models import Dialogue, DialogueStatus, JudgeDisagreement
from tests.annotation.conftest import rater

pytestmark = pytest.mark.django_db


def answer(r, label, key, note=""):
    assignment = assignment_next(rater=r)
    answer_submit(
        rater=r,
        item_token=assignment.item.token,
        answer=AnswerInput(label=label, note=note),
        idempotency_key=key,
    )
    return assignment


@pytest.fixture
def audit(make_study, make_annotators):
    users = make_annotators(3)
    study = make_study(
        "dialogue_audit",
        annotators=users[:2],
        adjudicators=users[2:],
        max_items=1,
        name="Audit",
    )
    return study, [rater(study, u) for u in users]


def test_creating_an_audit_puts_its_dialogues_in_audit(audit):
    study, _ = audit
    item = study.items.get()
    assert Dialogue.objects.get(pk=item.dialogue_id).status == DialogueStatus.IN_AUDIT
    assert Dialogue.objects.filter(status=DialogueStatus.DRAFT).count() == 3


def test_two_passing_auditors_accept_the_dialogue(audit):
    study, (one, two, third) = audit
    answer(one, "pass", "a1")
    answer(two, "pass", "a2")
    item = study.items.get()
    assert item.outcome == "pass" and not item.needs_adjudication
    assert Dialogue.objects.get(pk=item.dialogue_id).status == DialogueStatus.ACCEPTED
    assert assignment_next(rater=third) is None  # no third needed


def test_a_split_calls_the_adjudicator_who_decides(audit):
    study, (one, two, third) = audit
    answer(one, "pass", "a1")
    assert assignment_next(rater=third) is None  # nothing to adjudicate yet
    answer(two, "fail", "a2")
    item = study.items.get()
    assert item.needs_adjudication and item.required_answers == 3 and item.outcome == ""
    assert Dialogue.objects.get(pk=item.dialogue_id).status == DialogueStatus.IN_AUDIT
    decided = answer(third, "fail", "a3")
    assert decided.role == AssignmentRole.ADJUDICATE
    item.refresh_from_db()
    assert item.outcome == "fail" and item.completed_answers == 3
    assert Dialogue.objects.get(pk=item.dialogue_id).status == DialogueStatus.REJECTED
    # The adjudicator undoes: the dialogue is undecided again.
    answer_undo(rater=third)
    assert Dialogue.objects.get(pk=item.dialogue_id).status == DialogueStatus.IN_AUDIT


def test_two_failing_auditors_reject_and_an_undo_reopens(audit):
    study, (one, two, _) = audit
    answer(one, "fail", "a1")
    answer(two, "fail", "a2")
    item = study.items.get()
    assert Dialogue.objects.get(pk=item.dialogue_id).status == DialogueStatus.REJECTED
    answer_undo(rater=two)
    item.refresh_from_db()
    assert item.outcome == "" and item.completed_answers == 1
    assert Dialogue.objects.get(pk=item.dialogue_id).status == DialogueStatus.IN_AUDIT


def test_only_an_adjudicator_takes_the_third_place(make_study, make_annotators):
    users = make_annotators(4)
    study = make_study(
        "dialogue_audit",
        annotators=users[:3],
        adjudicators=users[3:],
        max_items=1,
        name="Audit",
    )
    one, two, plain, judge = (rater(study, u) for u in users)
    answer(one, "pass", "a1")
    answer(two, "fail", "a2")
    assert assignment_next(rater=plain) is None
    assert assignment_next(rater=judge).role == AssignmentRole.ADJUDICATE


def test_the_adjudicated_verdict_is_written_to_the_disagreement(make_study, make_annotators):
    users = make_annotators(1)
    study = make_study("adjudication", annotators=users, overlap=1, name="Adjudicate")
    r = rater(study, users[0])
    assignment = answer(r, "PARTIAL", "adj-1", note="Right direction, not tied to the anchor.")
    disagreement = JudgeDisagreement.objects.get(pk=assignment.item.disagreement_id)
    assert disagreement.final_verdict == "PARTIAL"
    assert disagreement.resolved_by == users[0] and disagreement.resolved_at
    assert disagreement.resolution_note == "Right direction, not tied to the anchor."
    assert StudyItem.objects.get(pk=assignment.item_id).outcome == "PARTIAL"
    answer_undo(rater=r)
    disagreement.refresh_from_db()
    assert disagreement.final_verdict == "" and disagreement.resolved_by is None


def test_adjudication_with_two_people_needs_their_majority(make_study, make_annotators):
    users = make_annotators(2)
    study = make_study("adjudication", annotators=users, overlap=2, name="Adjudicate")
    one, two = (rater(study, u) for u in users)
    first = answer(one, "PASS", "b1")
    answer(two, "FAIL", "b2")
    disagreement = JudgeDisagreement.objects.get(pk=first.item.disagreement_id)
    assert disagreement.final_verdict == ""  # a tie decides nothing
    answer_undo(rater=two)
    reopened = assignment_next(rater=two)
    answer_submit(
        rater=two,
        item_token=reopened.item.token,
        answer=AnswerInput(label="PASS"),
        idempotency_key="b3",
    )
    disagreement.refresh_from_db()
    assert disagreement.final_verdict == "PASS"


# --- What the study page says the answers decided (each kind's summary) ----------------------


def _page(client_for, researcher, study) -> str:
    return (
        client_for(researcher)
        .get(reverse("annotation:study_detail", args=[study.pk]))
        .content.decode()
    )


def test_the_audit_page_counts_decided_and_accepted_dialogues(audit, client_for, researcher):
    study, (one, two, third) = audit
    assert 'Decided: <strong>0</strong> <span class="muted">(0 accepted)</span>' in _page(
        client_for, researcher, study
    )
    answer(one, "pass", "s1")
    answer(two, "pass", "s2")
    html = _page(client_for, researcher, study)
    assert 'Decided: <strong>1</strong> <span class="muted">(1 accepted)</span>' in html
    assert "2 (a third when the two split)" in html


def test_the_adjudication_page_counts_resolved_disagreements(
    make_study, make_annotators, client_for, researcher
):
    users = make_annotators(1)
    study = make_study("adjudication", annotators=users, overlap=1, name="Adjudicate")
    r = rater(study, users[0])
    answer(r, "FAIL", "r1")
    answer(r, "PASS", "r2")
    html = _page(client_for, researcher, study)
    assert "Resolved: <strong>2</strong>" in html and "a third when" not in html


def test_the_pairwise_page_counts_the_injected_preference_and_ties(
    make_study, make_annotators, client_for, researcher
):
    users = make_annotators(1)
    study = make_study("pairwise", annotators=users, overlap=1, max_items=3)
    r = rater(study, users[0])
    for key, label in (("p1", "B"), ("p2", "A"), ("p3", "tie")):
        answer(r, label, key)
    html = _page(client_for, researcher, study)
    assert (
        'Rubric-injected preferred: <strong>1</strong> of 2 <span class="muted">(ties 1)</span>'
        in html
    )
    assert '<th class="num">Response 1</th>' in html  # the position-bias column
