"""Onboarding and qualification (issue #19): the consent screen, practice items with feedback
and the qualification threshold — enforced in the assignment service, shown in the workspace,
overridden (and the override undone) by staff, and practice answers never counted."""

import pytest
from django.urls import reverse

from annotation.models import (
    Answer,
    ConsentRecord,
    QualificationOverride,
    Study,
    StudyItem,
)
from annotation.selectors import study_battles, study_overview
from annotation.services import onboarding
from annotation.services.assignments import (
    AnswerInput,
    UndoRefused,
    answer_submit,
    answer_undo,
    assignment_next,
)
from annotation.services.onboarding import (
    Gate,
    OnboardingInputError,
    OnboardingSpec,
    qualification_override_set,
    rater_gate,
    study_onboarding_set,
)
from stats.exports import vote_rows
from stats.studies import study_data
from tests.annotation.conftest import rater
from tests.annotation.test_blinding import assert_blind
from tests.annotation.test_workspace_pages import HTMX, _cycle, key_of, token_of

pytestmark = pytest.mark.django_db


def practice_study(
    make_study, users, *, threshold=None, consent=False, n_practice=2, max_items=6, **fields
):
    """A pairwise study (k = 1) whose first ``n_practice`` items (by key) are practice items:
    expected Case A, with an explanation."""
    study = make_study(annotators=users, overlap=1, max_items=max_items, **fields)
    keys = list(study.items.order_by("key").values_list("key", flat=True))[:n_practice]
    lines = "\n".join(f"{key} A | Look at **which reply** asks first." for key in keys)
    study_onboarding_set(
        study=study,
        spec=OnboardingSpec(
            consent_required=consent, qualification_percent=threshold, practice=lines
        ),
    )
    study.refresh_from_db()
    return study, keys


def answer(r, assignment, label, key):
    return answer_submit(
        rater=r,
        item_token=assignment.item.token,
        answer=AnswerInput(label=label, confidence=3),
        idempotency_key=key,
    )


def test_practice_items_come_first_in_order_then_the_threshold_gates_real_items(
    make_study, make_annotators, admin_user
):
    user = make_annotators(1)[0]
    study, keys = practice_study(make_study, [user], threshold=100)
    me = rater(study, user)
    positions = dict(study.items.filter(key__in=keys).values_list("key", "position"))
    first = assignment_next(rater=me)
    assert first.item.is_practice and first.item.key == min(keys, key=positions.get)
    answer(me, first, "B", "p1")  # wrong
    second = assignment_next(rater=me)
    assert second.item.is_practice and second.item.pk != first.item.pk
    answer(me, second, "A", "p2")  # right: 1 of 2 = 50 % < 100 %
    assert assignment_next(rater=me) is None
    me.refresh_from_db()
    assert rater_gate(me) is Gate.UNQUALIFIED
    standing = onboarding.practice_standing(me)
    assert (standing.answered, standing.correct, standing.passed) == (2, 1, False)
    # Staff let them through: real items follow; undone: nothing new again.
    qualification_override_set(rater=me, qualified=True, by=admin_user, reason="known expert")
    real = assignment_next(rater=me)
    assert real is not None and not real.item.is_practice
    answer(me, real, "A", "r1")
    qualification_override_set(rater=me, qualified=False, by=admin_user, reason="")
    assert assignment_next(rater=me) is None
    records = list(QualificationOverride.objects.filter(rater=me).values_list("qualified", "by"))
    assert records == [(True, admin_user.pk), (False, admin_user.pk)]
    # A second identical override is no new record.
    assert qualification_override_set(rater=me, qualified=False, by=admin_user) is None


def test_an_answer_that_hands_out_the_next_item_follows_the_practice_and_the_threshold(
    make_study, make_annotators
):
    """As the page answers (``hand_out_next``): after a practice item comes the next practice
    item, in order, and after the last one nothing while the rater is below the threshold —
    never a real item, nor a practice item out of order, from the answer's own transaction."""
    user = make_annotators(1)[0]
    study, keys = practice_study(make_study, [user], threshold=100, n_practice=3)
    me = rater(study, user)
    positions = dict(study.items.filter(key__in=keys).values_list("key", "position"))
    shown = assignment_next(rater=me)
    seen = [shown.item.key]
    for n in range(3):
        shown = answer_submit(
            rater=me,
            item_token=shown.item.token,
            answer=AnswerInput(label="B", confidence=3),  # wrong: below the threshold
            idempotency_key=f"hand-out-p{n}",
            hand_out_next=True,
        ).following
        if shown is None:
            break
        assert shown.item.is_practice
        seen.append(shown.item.key)
    assert shown is None and seen == sorted(keys, key=positions.get)
    assert rater_gate(me) is Gate.UNQUALIFIED


def test_passing_the_practice_opens_the_real_items(make_study, make_annotators):
    user = make_annotators(1)[0]
    study, _ = practice_study(make_study, [user], threshold=50)
    me = rater(study, user)
    for n in range(2):
        answer(me, assignment_next(rater=me), "A" if n == 0 else "B", f"p{n}")
    real = assignment_next(rater=me)
    assert real is not None and not real.item.is_practice


def test_consent_comes_before_the_first_item_and_again_when_the_text_changes(
    make_study, make_annotators
):
    user = make_annotators(1)[0]
    study = make_study(annotators=[user], overlap=1, max_items=3, instructions="Be careful.")
    study_onboarding_set(study=study, spec=OnboardingSpec(consent_required=True))
    me = rater(study, user)
    me.study.refresh_from_db()
    assert assignment_next(rater=me) is None and rater_gate(me) is Gate.CONSENT
    assert not onboarding.consent_accept(rater=me, text_sha256="0" * 64)
    digest = onboarding.consent_text_sha256(me.study)
    assert onboarding.consent_accept(rater=me, text_sha256=digest)
    assert onboarding.consent_accept(rater=me, text_sha256=digest)  # idempotent
    assert ConsentRecord.objects.filter(rater=me).count() == 1
    assert assignment_next(rater=me) is not None
    Study.objects.filter(pk=study.pk).update(instructions="Be careful. New rules.")
    me.study.refresh_from_db()
    assert rater_gate(me) is Gate.CONSENT


def test_practice_answers_are_never_counted(make_study, make_annotators):
    users = make_annotators(2)
    study, keys = practice_study(make_study, users)
    for n, user in enumerate(users):
        me = rater(study, user)
        for m in range(3):  # two practice answers, then one real one
            answer(me, assignment_next(rater=me), "A", f"c{n}{m}")
    practice_answers = Answer.objects.filter(assignment__item__is_practice=True)
    assert practice_answers.count() == 4
    overview = study_overview(study=study)
    assert overview["answers_all"] == 2 and overview["gold_answers"] == 0
    assert len(study_data(study).answers) == 2
    exported = list(vote_rows({"study": study.pk}))
    assert len(exported) == 2
    battles = list(study_battles(study=study))
    assert {b.item_key for b in battles}.isdisjoint(keys) and len(battles) == 2


def test_the_workspace_shows_practice_feedback_blind_and_the_answer_is_then_final(
    make_study, make_annotators, client, run
):
    user = make_annotators(1)[0]
    study, _ = practice_study(make_study, [user], threshold=100)
    client.force_login(user)
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    assert "Practice" in first.content.decode()
    assert_blind(first, run, "practice item")
    token = token_of(first)
    item = StudyItem.objects.get(token=token)
    display = item.assignments.get().display["order"]
    right = str(display.index("A") + 1)  # the screen position of Case A for this rater
    response = client.post(
        reverse("annotation:answer", args=[study.pk, token]),
        {"idempotency_key": key_of(first), "choice": right, "confidence": "4"},
        headers=HTMX,
    )
    html = response.content.decode()
    assert "Practice feedback" in html and f"the expected answer: <strong>Response {right}" in html
    assert "<strong>which reply</strong>" in html  # the explanation, rendered Markdown
    assert_blind(response, run, "practice feedback")
    # Seen the expected answer: that answer is final.
    with pytest.raises(UndoRefused):
        answer_undo(rater=rater(study, user))


def test_the_workspace_consent_screen_and_the_not_qualified_page(
    make_study, make_annotators, client, run
):
    user = make_annotators(1)[0]
    study, _ = practice_study(
        make_study, [user], threshold=100, consent=True, instructions="Read **this** first."
    )
    client.force_login(user)
    url = reverse("annotation:workspace", args=[study.pk])
    page = client.get(url)
    html = page.content.decode()
    assert 'id="consent"' in html and "<strong>this</strong>" in html
    assert_blind(page, run, "consent")
    digest = onboarding.consent_text_sha256(study)
    refused = client.post(
        reverse("annotation:consent", args=[study.pk]), {"text_sha256": digest}, headers=HTMX
    )
    assert "tick the box" in refused.content.decode() and not ConsentRecord.objects.exists()
    accepted = client.post(
        reverse("annotation:consent", args=[study.pk]),
        {"text_sha256": digest, "agree": "on"},
        headers=HTMX,
    )
    assert token_of(accepted)  # straight on to the first (practice) item
    record = ConsentRecord.objects.get()
    assert record.rater.user == user and record.text_sha256 == digest
    me = rater(study, user)
    for n in range(2):
        answer(me, assignment_next(rater=me), "B", f"w{n}")  # both wrong
    page = client.get(url)
    assert 'id="not-qualified"' in page.content.decode()
    assert_blind(page, run, "not qualified")
    # A hand-made Next gets nothing either: the gate is the service's.
    nxt = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    assert token_of(nxt) == "" and 'id="not-qualified"' in nxt.content.decode()


def test_staff_set_onboarding_see_standings_and_override(
    make_study, make_annotators, client, admin_user
):
    user = make_annotators(1)[0]
    study, keys = practice_study(make_study, [user], threshold=100)
    me = rater(study, user)
    for n in range(2):
        answer(me, assignment_next(rater=me), "B", f"s{n}")
    client.force_login(admin_user)
    page = client.get(reverse("annotation:study_detail", args=[study.pk])).content.decode()
    assert 'id="onboarding"' in page and "below the threshold" in page
    response = client.post(
        reverse("annotation:qualification_override", args=[study.pk, me.pk]),
        {"qualified": "on", "reason": "checked by hand"},
    )
    assert response.status_code == 302
    page = client.get(reverse("annotation:study_detail", args=[study.pk])).content.decode()
    assert "let through by staff" in page and "checked by hand" in page
    me.refresh_from_db()
    assert me.qualification_override
    client.post(
        reverse("annotation:qualification_override", args=[study.pk, me.pk]), {"qualified": ""}
    )
    me.refresh_from_db()
    assert not me.qualification_override and QualificationOverride.objects.count() == 2


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"practice": "no-such-key A"}, "practice", "no item of this study has key"),
        ({"practice": "{key} maybe"}, "practice", "must be one of"),
        ({"practice": "{key} A | zephyr-secret-large asks first"}, "practice", "a blind study"),
        ({"qualification_percent": "80"}, "qualification_percent", "needs practice items"),
        ({"completion_url": "http://example.org/done"}, "completion_url", "https://"),
        ({"participation_enabled": "on"}, "completion_code", "completion code or"),
        ({"completion_code": "a b"}, "completion_code", "letters, digits"),
    ],
)
def test_bad_onboarding_settings_are_named_on_their_field_and_nothing_is_written(
    make_study, make_annotators, client, admin_user, fields, field, message
):
    study = make_study(annotators=make_annotators(1), overlap=1, max_items=3)
    key = study.items.first().key
    data = {k: v.format(key=key) for k, v in fields.items()}
    client.force_login(admin_user)
    response = client.post(reverse("annotation:study_onboarding", args=[study.pk]), data)
    assert response.status_code == 400
    assert message in response.content.decode()
    study.refresh_from_db()
    assert (study.practice_items, study.participation_enabled, study.completion_url) == (
        0,
        False,
        "",
    )


def test_an_answered_item_cannot_become_a_practice_item(make_study, make_annotators):
    user = make_annotators(1)[0]
    study = make_study(annotators=[user], overlap=1, max_items=3)
    me = rater(study, user)
    done = assignment_next(rater=me)
    answer(me, done, "A", "x1")
    with pytest.raises(OnboardingInputError) as caught:
        study_onboarding_set(study=study, spec=OnboardingSpec(practice=f"{done.item.key} A"))
    assert "already have answers" in str(caught.value)
    assert not StudyItem.objects.filter(is_practice=True).exists()


def test_onboarding_adds_a_bounded_number_of_queries_that_do_not_grow_with_the_data(
    make_study, make_annotators, client
):
    """Past the consent screen and the practice, each annotator action costs a few queries more
    than in a study without onboarding (the gate's and the feedback's), and no more with more
    data; a study without onboarding costs none (``Study.practice_items``)."""
    users = make_annotators(2)
    plain = make_study(annotators=users, overlap=1, max_items=8)
    client.force_login(users[0])
    without = _cycle(client, plain)
    study, _ = practice_study(
        make_study,
        users,
        threshold=100,
        consent=True,
        n_practice=1,
        max_items=12,
        instructions="Agree?",
    )
    me = rater(study, users[0])
    onboarding.consent_accept(rater=me, text_sha256=onboarding.consent_text_sha256(study))
    answer(me, assignment_next(rater=me), "A", "q-practice")
    small = _cycle(client, study)
    for n in range(3):
        other = make_annotators(1)
        make_study(annotators=other, overlap=1, name=f"Other {n}")
        _cycle(client, study)
    big = _cycle(client, study)
    assert all(big[name] <= small[name] for name in small), (small, big)
    extra = {name: small[name] - without[name] for name in without}
    # Next: consent, the next practice item, the standing (each one query) in the hand-out,
    # and the practice feedback's look at the last answer in the page (measured 2026-12-06).
    assert all(n <= 6 for n in extra.values()), extra


def test_staff_save_onboarding_from_the_study_page(make_study, make_annotators, client, admin_user):
    study = make_study(annotators=make_annotators(2), overlap=1, max_items=4)
    key = study.items.order_by("key").first().key
    client.force_login(admin_user)
    response = client.post(
        reverse("annotation:study_onboarding", args=[study.pk]),
        {
            "consent_required": "on",
            "practice": f"{key} b | Response **B** asks first.",
            "qualification_percent": "100",
            "participation_enabled": "on",
            "completion_code": "C0DE-1",
            "completion_url": "https://app.prolific.com/submissions/complete?cc=C0DE-1",
        },
    )
    assert response.status_code == 302 and response.url.endswith("#onboarding")
    study.refresh_from_db()
    assert (study.consent_required, study.qualification_percent, study.practice_items) == (
        True,
        100,
        1,
    )
    item = study.items.get(key=key)
    assert (item.is_practice, item.is_gold, item.expected) == (True, True, "B")
    assert item.explanation == "Response **B** asks first." and item.required_answers == 2
    page = client.get(reverse("annotation:study_detail", args=[study.pk])).content.decode()
    assert f"{key} B | Response **B** asks first." in page  # the form shows what is set
