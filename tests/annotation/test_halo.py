"""HALO response diagnosis: checkpoints made from a run (all chosen models' replies at one
trigger), the per-reply questions stored by response whatever the screen order, questions that
do not apply never stored (a crafted POST included), the pre-filled level confirmed or changed,
undo, the study page's lines, and k never exceeded under real concurrency."""

import re
from collections import Counter

import pytest
from django.urls import reverse

from annotation.kinds import halo
from annotation.models import Answer, Assignment, Study
from annotation.selectors import study_overview
from annotation.services.assignments import AnswerInput, answer_submit, assignment_next
from benchmark.models import Condition, EvaluationUnit, ModelEndpoint, Trigger
from tests.annotation.conftest import MODELS, form_data, rater
from tests.annotation.test_concurrency import THREADS, _in_parallel, _max_holding_per_item
from tests.annotation.test_workspace_pages import HTMX, key_of, token_of

pytestmark = pytest.mark.django_db


def replies_on(response) -> int:
    return len(
        re.findall(
            r'<article class="response halo-reply" id="reply-\d+">', response.content.decode()
        )
    )


def post_answer(client, study, response, per_reply: dict[int, dict], **extra):
    """POST the workspace's answer: ``per_reply`` maps a screen position to its fields (level,
    acceptable, timing, …, unprefixed)."""
    data = {"idempotency_key": key_of(response), **extra}
    for n, fields in per_reply.items():
        data.update({f"{name}_{n}": value for name, value in fields.items()})
    return client.post(
        reverse("annotation:answer", args=[study.pk, token_of(response)]), data, headers=HTMX
    )


@pytest.fixture
def one(make_study, make_annotators, client):
    """A HALO study of the vanilla checkpoints, one annotator, started."""
    users = make_annotators(1)
    study = make_study("halo", annotators=users, overlap=1, condition=Condition.VANILLA)
    client.force_login(users[0])
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    return study, users[0], client, first


def test_a_checkpoint_is_every_chosen_models_reply_at_one_trigger(run, make_study):
    study = make_study("halo", overlap=1, condition=Condition.VANILLA)
    triggers = Trigger.objects.count()
    assert study.items.count() == triggers
    names = sorted(name for name, _, _ in MODELS)
    for item in study.items.all():
        turn = item.trigger.turn
        assert item.key == f"{turn.dialogue.unique_id_eval}#t{turn.index}#vanilla"
        sources = item.payload["sources"]
        assert [s["id"] for s in sources] == ["r1", "r2"]
        assert [s["source"] for s in sources] == names
        units = EvaluationUnit.objects.filter(
            trigger=item.trigger, condition=Condition.VANILLA, sample_index=0
        )
        assert {s["unit"] for s in sources} == set(units.values_list("pk", flat=True))
        assert sorted(item.payload["sides"]) == ["r1", "r2"]
        # The test replies are short and raise nothing: the rule suggests L0, with its reason.
        assert {s["suggested"]["level"] for s in sources} == {"L0"}
        assert all("words" in s["suggested"]["reason"] for s in sources)
        assert item.unit_id is None and item.unit_b_id is None
    # Any condition: one checkpoint per trigger and condition; one model: one reply each.
    both = make_study("halo", overlap=1, condition="", name="Both conditions")
    assert both.items.count() == 2 * triggers
    single = make_study(
        "halo",
        overlap=1,
        condition=Condition.VANILLA,
        endpoints=[ModelEndpoint.objects.get(name=names[0])],
        name="One model",
    )
    assert {len(i.payload["sources"]) for i in single.items.all()} == {1}


def test_effort_comes_from_the_units(run, make_study):
    unit = EvaluationUnit.objects.filter(condition=Condition.VANILLA).first()
    unit.reasoning_tokens, unit.extra = 4321, {"retrieval_rounds": 3}
    unit.save()
    study = make_study("halo", overlap=1, condition=Condition.VANILLA)
    entry = next(s for i in study.items.all() for s in i.payload["sources"] if s["unit"] == unit.pk)
    assert (entry["reasoning_tokens"], entry["retrieval_rounds"]) == (4321, 3)


def test_a_study_name_naming_a_model_of_the_checkpoints_is_refused(run, make_study):
    from annotation.services.studies import StudyInputError

    with pytest.raises(StudyInputError) as refused:
        make_study("halo", overlap=1, name="Is Zephyr more proactive?")
    assert "name" in refused.value.errors


def test_an_answer_is_stored_per_response_whatever_the_screen_order(one):
    study, user, client, first = one
    assert replies_on(first) == 2
    assignment = Assignment.objects.get(item__token=token_of(first))
    order = assignment.display["order"]
    post_answer(
        client,
        study,
        first,
        {
            1: {"level": "L1", "acceptable": "yes"},
            2: {
                "level": "L3",
                "acceptable": "no",
                "timing": "premature",
                "intensity": "excessive",
                "issue_unsupported": "on",
                "issue_unsupported_note": "No message said the van was needed.",
            },
        },
        note="Reply 2 books on a guess.",
    )
    answer = Answer.objects.get(assignment=assignment)
    replies = {r["response"]: r for r in answer.details["replies"]}
    assert [r["response"] for r in answer.details["replies"]] == ["r1", "r2"]  # canonical order
    shown_first, shown_second = replies[order[0]], replies[order[1]]
    assert shown_first == {
        "response": order[0],
        "position": 1,
        "level": "L1",
        "suggested": "L0",
        "level_changed": True,
        "acceptable": True,
    }
    assert shown_second == {
        "response": order[1],
        "position": 2,
        "level": "L3",
        "suggested": "L0",
        "level_changed": True,
        "acceptable": False,
        "timing": "premature",
        "intensity": "excessive",
        "issues": {"unsupported": "No message said the van was needed."},
    }
    assert answer.label == halo.AcceptedReplies.SOME and answer.note == "Reply 2 books on a guess."


def test_questions_that_do_not_apply_are_never_stored_whatever_is_posted(one):
    """A crafted POST: timing and intensity for an accepted L1 and for a rejected L0, other
    issues for an accepted reply. None of them is stored; the rejected L0 is an inaction."""
    study, user, client, first = one
    post_answer(
        client,
        study,
        first,
        {
            1: {
                "level": "L1",
                "acceptable": "yes",
                "timing": "premature",
                "intensity": "excessive",
                "issue_irrelevant": "on",
                "issue_irrelevant_note": "should not be kept",
            },
            2: {
                "level": "L0",
                "acceptable": "no",
                "timing": "belated",
                "intensity": "insufficient",
            },
        },
    )
    answer = Answer.objects.get(assignment__rater__user=user)
    for reply in answer.details["replies"]:
        assert not {"timing", "intensity"} & set(reply), reply
    by_position = {r["position"]: r for r in answer.details["replies"]}
    assert "issues" not in by_position[1]
    assert by_position[2]["issues"] == {}  # rejected: asked, none flagged
    assert answer.label == halo.AcceptedReplies.SOME
    assert "should not be kept" not in str(answer.details)


def test_a_rejected_intervention_needs_timing_and_intensity_and_an_issue_a_note(one):
    study, user, client, first = one
    sent_back = post_answer(
        client,
        study,
        first,
        {
            1: {"level": "L2", "acceptable": "no", "issue_contradiction": "on"},
            2: {"acceptable": "yes"},
        },
    )
    html = sent_back.content.decode()
    assert "Reply 1: its timing" in html and "(keys p, b, a)" in html
    assert "Reply 1: its intensity" in html and "(keys i, e, a)" in html
    assert "Reply 1: factual contradiction: a note must say what." in html
    assert "Reply 2: choose its action level (keys 0–3)." in html
    assert token_of(sent_back) == token_of(first)  # the same item, sent back
    assert not Answer.objects.exists()


def test_the_prefilled_level_is_preselected_and_a_confirmation_is_recorded(one):
    study, user, client, first = one
    html = first.content.decode()
    assert html.count('value="L0" id="id_level_1_0" required checked') == 1
    assert "Suggested: <strong>L0</strong>" in html
    post_answer(
        client,
        study,
        first,
        {1: {"level": "L0", "acceptable": "yes"}, 2: {"level": "L0", "acceptable": "yes"}},
    )
    answer = Answer.objects.get()
    assert [r["level_changed"] for r in answer.details["replies"]] == [False, False]
    assert answer.label == halo.AcceptedReplies.ALL


def test_undo_brings_the_checkpoint_back_as_it_was_answered(one):
    study, user, client, first = one
    post_answer(
        client,
        study,
        first,
        {
            1: {"level": "L2", "acceptable": "no", "timing": "belated", "intensity": "appropriate"},
            2: {"level": "L0", "acceptable": "no"},
        },
    )
    back = client.post(reverse("annotation:undo", args=[study.pk]), headers=HTMX)
    html = back.content.decode()
    assert token_of(back) == token_of(first)
    for checked in (
        'name="level_1" value="L2" id="id_level_1_2" required checked',
        'name="acceptable_1" value="no" id="id_acceptable_1_1" required checked',
        'name="timing_1" value="belated" id="id_timing_1_1" checked',
        'name="intensity_1" value="appropriate" id="id_intensity_1_2" checked',
        'name="acceptable_2" value="no" id="id_acceptable_2_1" required checked',
    ):
        assert checked in html, checked
    assert "Undone" in html


def test_the_answered_view_and_the_kept_answer_read_in_replies(one):
    study, user, client, first = one
    post_answer(
        client,
        study,
        first,
        {1: {"level": "L0", "acceptable": "no"}, 2: {"level": "L0", "acceptable": "no"}},
    )
    answer = Answer.objects.get()
    assert halo.KIND.answer_shown(answer) == "0 of 2 replies acceptable"
    page = client.get(reverse("annotation:item", args=[study.pk, token_of(first)]))
    assert "0 of 2 replies acceptable" in page.content.decode()
    assert answer.label == halo.AcceptedReplies.NONE


def test_the_study_page_adds_acceptability_the_split_and_agreement_per_question(
    make_study, make_annotators, client_for, researcher
):
    users = make_annotators(2)
    study = make_study("halo", annotators=users, overlap=2, condition=Condition.VANILLA)
    for n, user in enumerate(users):
        r = rater(study, user)
        while (assignment := assignment_next(rater=r)) is not None:
            replies = [
                {
                    "response": response,
                    "position": p,
                    "level": "L1",
                    "acceptable": n == 0 and response == "r1",
                    **(
                        {}
                        if n == 0 and response == "r1"
                        else {"timing": "premature", "intensity": "insufficient", "issues": {}}
                    ),
                }
                for p, response in enumerate(assignment.display["order"], start=1)
            ]
            answer_submit(
                rater=r,
                item_token=assignment.item.token,
                answer=AnswerInput(label="some", details={"replies": replies}),
                idempotency_key=f"{r.pk}-{assignment.pk}",
            )
    overview = study_overview(study=study)
    lines = {line.label: line for line in overview["summary"]}
    items = study.items.count()
    assert lines["Replies judged acceptable"].value == items  # r1, by the first annotator
    assert lines["Replies judged acceptable"].rest == f"of {4 * items}"
    # Every rejection is premature and insufficient: over- and under-proactive at once.
    assert lines["Rejected replies over- / under-proactive"].value == f"{3 * items} / {3 * items}"
    agreement = lines["Agreement per question so far"].value
    assert "level 100%" in agreement and "acceptable 50%" in agreement
    assert "timing 100%" in agreement and "intensity 100%" in agreement
    page = client_for(researcher).get(reverse("annotation:study_detail", args=[study.pk]))
    assert "Agreement per question so far" in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_simultaneous_annotators_never_push_a_checkpoint_past_k(make_study, make_annotators):
    users = make_annotators(THREADS)
    study = make_study("halo", annotators=users, overlap=2, condition=Condition.VANILLA)
    raters = [rater(study, u) for u in users]

    def work(i):
        r, done = raters[i], []
        while (assignment := assignment_next(rater=r)) is not None:
            replies = [
                {"response": resp, "position": p, "level": "L0", "acceptable": True}
                for p, resp in enumerate(assignment.display["order"], start=1)
            ]
            answer_submit(
                rater=r,
                item_token=assignment.item.token,
                answer=AnswerInput(label="all", details={"replies": replies}),
                idempotency_key=f"h{i}-{assignment.pk}",
            )
            done.append(assignment.item_id)
        return done

    per_item = Counter(item for done in _in_parallel(work, THREADS) for item in done)
    assert set(per_item.values()) == {2} and len(per_item) == study.items.count()
    assert _max_holding_per_item(study) == 2
    # The two annotators of a checkpoint saw its replies in different orders.
    for item in study.items.all():
        orders = [tuple(a.display["order"]) for a in item.assignments.all()]
        assert len(set(orders)) == 2, orders


def test_a_halo_study_is_created_from_the_staff_page(run, make_annotators, client_for, researcher):
    people = make_annotators(2)
    data = form_data(run, people, kind="halo", name="Diagnose the closings", condition="vanilla")
    response = client_for(researcher).post(reverse("annotation:study_new"), data)
    study = Study.objects.get(name="Diagnose the closings")
    assert response.status_code == 302 and study.kind == "halo"
    # RECOVERY triggers only (the form's trigger type), vanilla: one checkpoint each.
    assert study.items.count() == Trigger.objects.filter(type="RECOVERY").count()
    assert study.selection["condition"] == "vanilla"
