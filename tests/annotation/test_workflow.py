"""Working through a study (issue #19): "Item N of M", the saved line, skip, flags, my answers,
the per-item time limit (enforced by the server) and the staff page's live panel, item table,
flags and exports — through the services and the real pages."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation import kinds
from annotation.models import (
    Answer,
    Assignment,
    AssignmentState,
    FlagCategory,
    ItemFlag,
    ItemSkip,
    RetractionReason,
    SkipCause,
    Study,
)
from annotation.selectors import rater_progress
from annotation.services.assignments import (
    TIME_LIMIT_GRACE,
    AnswerInput,
    AnswerRejected,
    SkipRefused,
    answer_submit,
    assignment_next,
    item_skip,
)
from annotation.services.flags import item_flag
from annotation.services.onboarding import OnboardingSpec, study_onboarding_set
from annotation.services.studies import StudyInputError
from tests.annotation.conftest import MODELS, rater

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


def token_of(response) -> str:
    return re.search(r'data-item="([^"]*)"', response.content.decode()).group(1)


def key_of(response) -> str:
    return re.search(r'name="idempotency_key" value="([^"]+)"', response.content.decode()).group(1)


def answer(r, token: str, key: str, now=None):
    return answer_submit(
        rater=r,
        item_token=token,
        answer=AnswerInput(label="A", confidence=3),
        idempotency_key=key,
        now=now,
    )


# --- Item N of M ------------------------------------------------------------------------------


def test_item_n_of_m_counts_the_held_item_once(make_study, make_annotators, client):
    users = make_annotators(2)
    study = make_study(annotators=users, overlap=2, max_items=4)
    client.force_login(users[0])
    page = client.get(reverse("annotation:workspace", args=[study.pk])).content.decode()
    assert "<strong>0</strong> of 4 done" in page  # nothing held yet
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    html = first.content.decode()
    assert "<strong>Item 1</strong> of 4" in html
    assert '<progress id="ws-progress-bar" max="4" value="0">' in html
    assert '<label for="ws-progress-bar">' in html  # the bar has its label
    second = client.post(
        reverse("annotation:answer", args=[study.pk, token_of(first)]),
        {"idempotency_key": key_of(first), "choice": "1", "confidence": "3"},
        headers=HTMX,
    ).content.decode()
    assert "<strong>Item 2</strong> of 4" in second and 'max="4" value="1"' in second
    # A reload while holding item 2 still says item 2, not 3.
    reload = client.get(reverse("annotation:workspace", args=[study.pk])).content.decode()
    assert "<strong>Item 2</strong> of 4" in reload


def test_m_shrinks_when_others_fill_items_and_never_counts_a_skip(make_study, make_annotators):
    users = make_annotators(2)
    study = make_study(annotators=users, overlap=1, max_items=4)
    me, other = rater(study, users[0]), rater(study, users[1])
    theirs = assignment_next(rater=other)
    answer(other, theirs.item.token, "other-1")
    progress = rater_progress(rater=me)
    assert (progress.done, progress.total, progress.number) == (0, 3, None)
    held = assignment_next(rater=me)
    assert rater_progress(rater=me, holding=True).number == 1
    item_skip(rater=me, item_token=held.item.token)
    assert rater_progress(rater=me).total == 2  # the skipped item is not theirs to do


# --- Saved ------------------------------------------------------------------------------------


def test_an_answer_says_saved_in_a_status_region(make_study, make_annotators, client):
    users = make_annotators(1)
    study = make_study(annotators=users, overlap=1, max_items=3)
    client.force_login(users[0])
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    assert re.search(r'<p id="ws-saved" class="saved" role="status"></p>', first.content.decode())
    after = client.post(
        reverse("annotation:answer", args=[study.pk, token_of(first)]),
        {"idempotency_key": key_of(first), "choice": "2", "confidence": "2"},
        headers=HTMX,
    ).content.decode()
    assert re.search(r'<p id="ws-saved" class="saved" role="status">Saved\.', after)
    # Without htmx: the same, as a message after the redirect.
    second = token_of(client.get(reverse("annotation:workspace", args=[study.pk])))
    plain = client.post(
        reverse("annotation:answer", args=[study.pk, second]),
        {"idempotency_key": "plain-key-0001", "choice": "1", "confidence": "2"},
        follow=True,
    )
    assert "Saved." in plain.content.decode()


# --- Skip -------------------------------------------------------------------------------------


def test_a_skipped_item_goes_to_another_rater_and_never_back_to_the_skipper(
    make_study, make_annotators
):
    users = make_annotators(2)
    study = make_study(annotators=users, overlap=1, max_items=3)
    skipper, other = rater(study, users[0]), rater(study, users[1])
    held = assignment_next(rater=skipper)
    result = item_skip(
        rater=skipper, item_token=held.item.token, reason=" unreadable ", hand_out_next=True
    )
    skip = ItemSkip.objects.get()
    assert (skip.assignment_id, skip.cause, skip.reason) == (
        held.pk,
        SkipCause.ANNOTATOR,
        "unreadable",
    )
    assert Assignment.objects.get(pk=held.pk).state == AssignmentState.SKIPPED
    assert result.following is not None and result.following.item_id != held.item_id
    # The item is free at once: the other rater, next in line, is given it first (hand-out order).
    assert assignment_next(rater=other).item_id == held.item_id
    # The skipper works through everything left and never meets it again.
    seen = [result.following.item_id]
    answer(skipper, result.following.item.token, "s-1")
    while (following := assignment_next(rater=skipper)) is not None:
        seen.append(following.item_id)
        answer(skipper, following.item.token, f"s-{len(seen)}")
    assert held.item_id not in seen and len(seen) == 2
    # Skipping twice (a double press) records one skip; an answer to it is refused.
    assert item_skip(rater=skipper, item_token=held.item.token).replayed
    assert ItemSkip.objects.count() == 1
    with pytest.raises(AnswerRejected, match="skipped"):
        answer(skipper, held.item.token, "after-skip")


def test_a_skip_refuses_an_answered_item_a_closed_study_and_a_long_reason(
    make_study, make_annotators
):
    users = make_annotators(1)
    study = make_study(annotators=users, overlap=1, max_items=3)
    me = rater(study, users[0])
    held = assignment_next(rater=me)
    with pytest.raises(SkipRefused, match="at most 500"):
        item_skip(rater=me, item_token=held.item.token, reason="x" * 501)
    answer(me, held.item.token, "answered-1")
    with pytest.raises(SkipRefused, match="undo your answer first"):
        item_skip(rater=me, item_token=held.item.token)
    with pytest.raises(SkipRefused, match="not yours"):
        item_skip(rater=me, item_token="no-such-token")
    Study.objects.filter(pk=study.pk).update(status="closed")
    with pytest.raises(SkipRefused, match="closed"):
        item_skip(rater=me, item_token=held.item.token)
    assert not ItemSkip.objects.exists()


def test_skip_through_the_page_hands_out_the_next_item(make_study, make_annotators, client):
    users = make_annotators(1)
    study = make_study(annotators=users, overlap=1, max_items=3)
    client.force_login(users[0])
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    html = first.content.decode()
    assert 'data-keys="s"' in html and 'id="skip-dialog"' in html and 'id="flag-dialog"' in html
    skipped = client.post(
        reverse("annotation:skip", args=[study.pk, token_of(first)]),
        {"reason": "I cannot judge this one"},
        headers=HTMX,
    )
    assert skipped.status_code == 200
    assert token_of(skipped) not in ("", token_of(first))
    assert "went back to the pool" in skipped.content.decode()
    assert ItemSkip.objects.get().reason == "I cannot judge this one"
    # A reason over the limit: refused, named, nothing written.
    again = client.post(
        reverse("annotation:skip", args=[study.pk, token_of(skipped)]),
        {"reason": "y" * 600},
        headers=HTMX,
    )
    assert "Not skipped" in again.content.decode() and ItemSkip.objects.count() == 1


# --- Flags ------------------------------------------------------------------------------------


def test_a_flag_is_not_an_answer_and_the_rater_may_still_answer(
    make_study, make_annotators, client
):
    users = make_annotators(1)
    study = make_study(annotators=users, overlap=1, max_items=2)
    client.force_login(users[0])
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    url = reverse("annotation:flag", args=[study.pk, token_of(first)])
    flagged = client.post(url, {"category": "unclear", "note": "Which user?"}, headers=HTMX)
    body = flagged.content.decode()
    assert flagged.status_code == 200 and body.startswith('<p id="flag-status"')
    assert "Flagged" in body and "<section" not in body  # only the status line is swapped
    # Again with the same category: one row, the note replaced; another category: a second row.
    client.post(url, {"category": "unclear", "note": "Which user is meant?"}, headers=HTMX)
    client.post(url, {"category": "broken", "note": ""}, headers=HTMX)
    flags = {f.category: f.note for f in ItemFlag.objects.all()}
    assert flags == {"unclear": "Which user is meant?", "broken": ""}
    assignment = Assignment.objects.get()
    assert assignment.state == AssignmentState.LEASED and not Answer.objects.exists()
    bad = client.post(url, {"category": "boring"}, headers=HTMX)
    assert bad.status_code == 400 and "Not flagged" in bad.content.decode()
    answered = client.post(
        reverse("annotation:answer", args=[study.pk, token_of(first)]),
        {"idempotency_key": key_of(first), "choice": "1", "confidence": "3"},
        headers=HTMX,
    )
    assert "Saved." in answered.content.decode() and Answer.objects.count() == 1
    # An answered item may still be flagged (from its page); plain POST redirects back.
    plain = client.post(url, {"category": FlagCategory.OFFENSIVE})
    assert plain.status_code == 302 and ItemFlag.objects.count() == 3


# --- My answers -------------------------------------------------------------------------------


def test_my_answers_lists_answers_and_skips_with_undo_on_the_last_only(
    make_study, make_annotators, client
):
    users = make_annotators(2)
    study = make_study(annotators=users, overlap=2, max_items=4)
    me = rater(study, users[0])
    first = assignment_next(rater=me)
    answer(me, first.item.token, "mine-1")
    second = assignment_next(rater=me)
    item_skip(rater=me, item_token=second.item.token, reason="no idea")
    third = assignment_next(rater=me)
    answer(me, third.item.token, "mine-3")
    client.force_login(users[0])
    url = reverse("annotation:my_answers", args=[study.pk])
    html = client.get(url).content.decode()
    rows = re.findall(r'<tr id="mine-(\d+)">(.*?)</tr>', html, re.S)
    assert [n for n, _ in rows] == ["1", "2", "3"]
    assert "skipped" in rows[1][1] and "no idea" in rows[1][1]
    assert [bool("Undo and change" in row) for _, row in rows] == [False, False, True]
    for token, (_, row) in zip(
        (first.item.token, second.item.token, third.item.token), rows, strict=True
    ):
        assert reverse("annotation:item", args=[study.pk, token]) in row
    assert not [m for model in MODELS for m in model if m in html]  # blind
    # Undo from the list is today's undo: the last answer comes back.
    client.post(reverse("annotation:undo", args=[study.pk]))
    assert Assignment.objects.get(pk=third.pk).state == AssignmentState.LEASED
    assert "Undo and change" in client.get(url).content.decode()  # now the first answer's
    # Another rater of the study has an empty list; someone outside it a 404.
    client.force_login(users[1])
    assert "Nothing yet" in client.get(url).content.decode()


def test_my_answers_query_count_does_not_grow(make_study, make_annotators, client):
    users = make_annotators(1)
    study = make_study(annotators=users, overlap=1)
    me = rater(study, users[0])
    client.force_login(users[0])
    url = reverse("annotation:my_answers", args=[study.pk])

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        return len(queries)

    held = assignment_next(rater=me)
    answer(me, held.item.token, "q-0")
    small = count()
    for n in range(1, 6):
        held = assignment_next(rater=me)
        if held is None:
            break
        answer(me, held.item.token, f"q-{n}")
    assert count() <= small <= 8


# --- Time limit -------------------------------------------------------------------------------


def test_the_time_limit_releases_the_item_on_the_server(make_study, make_annotators):
    users = make_annotators(2)
    study = make_study(annotators=users, overlap=1, max_items=3, item_time_limit_s=30)
    slow, other = rater(study, users[0]), rater(study, users[1])
    start = timezone.now()
    held = assignment_next(rater=slow, now=start)
    assert held.time_limit_ends_at == start + timedelta(seconds=30)
    assert held.lease_expires_at == held.time_limit_ends_at + TIME_LIMIT_GRACE
    # Within the limit: Next keeps the item.
    assert assignment_next(rater=slow, now=start + timedelta(seconds=20)).pk == held.pk
    # Once past it, the item's place is free for others (the lease ran out with the limit)…
    late = start + timedelta(seconds=40)
    assert assignment_next(rater=other, now=late).item_id == held.item_id
    # …and the slow rater's answer is kept, retracted, not counted; their item is a skip.
    result = answer(slow, held.item.token, "too-late", now=late)
    assert result.timed_out
    stored = Answer.objects.get(idempotency_key="too-late")
    assert stored.retraction_reason == RetractionReason.TIME_LIMIT
    skip = ItemSkip.objects.get()
    assert (skip.assignment_id, skip.cause) == (held.pk, SkipCause.TIME_LIMIT)
    assert held.item.__class__.objects.get(pk=held.item_id).completed_answers == 0


def test_an_answer_within_the_grace_counts_and_next_after_the_limit_skips(
    make_study, make_annotators
):
    users = make_annotators(1)
    study = make_study(annotators=users, overlap=1, max_items=3, item_time_limit_s=30)
    me = rater(study, users[0])
    start = timezone.now()
    held = assignment_next(rater=me, now=start)
    just_after = start + timedelta(seconds=32)  # past the limit, within the grace
    assert not answer(me, held.item.token, "in-grace", now=just_after).timed_out
    following = assignment_next(rater=me, now=just_after)
    # Next after the limit, without an answer: recorded as a time-limit skip, another item.
    after = just_after + timedelta(seconds=31)
    third = assignment_next(rater=me, now=after)
    assert third is not None and third.item_id not in (held.item_id, following.item_id)
    assert ItemSkip.objects.get().assignment_id == following.pk
    assert ItemSkip.objects.get().cause == SkipCause.TIME_LIMIT
    assert third.time_limit_ends_at == after + timedelta(seconds=30)


def test_the_workspace_shows_the_timer_and_no_form_once_time_is_up(
    make_study, make_annotators, client
):
    users = make_annotators(1)
    study = make_study(annotators=users, overlap=1, max_items=3, item_time_limit_s=60)
    client.force_login(users[0])
    first = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    html = first.content.decode()
    left = int(re.search(r'data-time-left-s="(\d+)"', html).group(1))
    assert 55 <= left <= 60 and "form[data-time-up]" not in html and "data-time-up" in html
    Assignment.objects.update(time_limit_ends_at=timezone.now() - timedelta(seconds=1))
    page = client.get(reverse("annotation:workspace", args=[study.pk])).content.decode()
    assert "Time ran out" in page and "data-answer" not in page
    # The timer's Next: a skip recorded (time limit), the next item handed out.
    following = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    assert token_of(following) not in ("", token_of(first))
    assert ItemSkip.objects.get().cause == SkipCause.TIME_LIMIT


def test_the_time_limit_is_checked_on_creation(
    make_study, make_annotators, client, researcher, run
):
    with pytest.raises(StudyInputError) as error:
        make_study(annotators=make_annotators(1), item_time_limit_s=5)
    assert "item_time_limit_s" in error.value.errors
    from tests.annotation.conftest import form_data

    client.force_login(researcher)
    people = make_annotators(2, prefix="tl")
    response = client.post(
        reverse("annotation:study_new"), form_data(run, people, item_time_limit_s="3")
    )
    assert response.status_code == 200 and "item_time_limit_s" in response.content.decode()
    created = client.post(
        reverse("annotation:study_new"), form_data(run, people, item_time_limit_s="90")
    )
    assert created.status_code == 302
    assert Study.objects.get(name="Which closing reply is better?").item_time_limit_s == 90


# --- Staff page -------------------------------------------------------------------------------


def test_the_staff_page_shows_live_counts_items_flags_and_exports(
    make_study, make_annotators, client, researcher
):
    users = make_annotators(2)
    study = make_study(annotators=users, overlap=1, max_items=4)
    a, b = rater(study, users[0]), rater(study, users[1])
    first = assignment_next(rater=a)
    answer(a, first.item.token, "staff-1")
    held = assignment_next(rater=a)
    item_flag(assignment=held, category="offensive", note="Slur in turn 2")
    item_skip(rater=a, item_token=held.item.token)
    assignment_next(rater=b)  # b holds the skipped item now
    client.force_login(researcher)
    html = client.get(reverse("annotation:study_detail", args=[study.pk])).content.decode()
    assert 'hx-get="{}"'.format(reverse("annotation:study_live", args=[study.pk])) in html
    assert 'hx-trigger="every 5s"' in html
    assert re.search(r'data-status="complete">Complete: <strong>1</strong>', html)
    assert re.search(r'data-status="in progress">In progress: <strong>1</strong>', html)
    assert re.search(r'data-status="not started">Not started: <strong>2</strong>', html)
    assert re.search(r'data-live="skips">1<', html) and re.search(r'data-live="flags">1<', html)
    row = re.search(rf'<tr id="item-{held.item_id}">(.*?)</tr>', html, re.S).group(1)
    assert "in progress" in row and ">1</span></a>" in row  # one flag
    assert "Slur in turn 2" in html and "Offensive" in html
    assert f"/exports/votes.csv?study={study.pk}" in html
    live = client.get(reverse("annotation:study_live", args=[study.pk]), headers=HTMX)
    assert live.content.decode().lstrip().startswith('<section id="live"')


def test_the_staff_page_query_count_does_not_grow_with_items_and_flags(
    make_study, make_annotators, client, researcher
):
    users = make_annotators(3)
    client.force_login(researcher)

    def count(study) -> dict[str, int]:
        counts = {}
        for name in ("study_detail", "study_live"):
            with CaptureQueriesContext(connection) as queries:
                assert client.get(reverse(f"annotation:{name}", args=[study.pk])).status_code == 200
            counts[name] = len(queries)
        return counts

    small = make_study(annotators=users, overlap=1, max_items=2, name="Small study")
    big = make_study(annotators=users, overlap=2, name="Big study")
    for user in users:
        r = rater(big, user)
        for n in range(3):
            held = assignment_next(rater=r)
            item_flag(assignment=held, category="unclear", note=f"{user.pk}-{n}")
            if n == 2:
                item_skip(rater=r, item_token=held.item.token)
            else:
                answer(r, held.item.token, f"big-{user.pk}-{n}")
    live = client.get(reverse("annotation:study_live", args=[big.pk])).content.decode()
    assert re.search(r'data-live="answers">6<', live) and re.search(r'data-live="skips">3<', live)
    assert re.search(r'data-live="flags">9<', live)
    few, many = count(small), count(big)
    assert many == few, (few, many)
    assert many["study_live"] <= 6  # as measured: the session, the user, the role, the study, 2


@pytest.mark.parametrize("kind", sorted(kind.key for kind in kinds.all_kinds()))
def test_the_tools_keys_are_free_in_every_kind(kind, make_study, make_annotators, client):
    """s, g and h belong to skip, flag and My answers in every workspace: no kind's control
    uses them (checked on each kind's rendered item, so a kind's own keys are all there)."""
    users = make_annotators(3)
    extra = {"condition": "vanilla"} if kind == "proposal_review" else {}
    study = make_study(kind, annotators=users, overlap=2, **extra)
    client.force_login(users[0])
    html = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX).content.decode()
    assert 'id="skip-dialog"' in html
    used = re.findall(r'<(\w+)[^>]*\bdata-(?:check-)?keys="([^"]*)"', html)
    taken = [(k, tag) for tag, keys in used for k in keys.split() if k in ("s", "g", "h")]
    assert sorted(taken) == [("g", "button"), ("h", "a"), ("s", "button")], (kind, used)


def test_a_practice_item_is_untimed_and_cannot_be_skipped(make_study, make_annotators, client):
    """A practice item given back would leave its rater short of the practice the qualification
    threshold counts: no Skip on it, no timer; the real items after it are timed."""
    user = make_annotators(1)[0]
    study = make_study(annotators=[user], overlap=1, max_items=3, item_time_limit_s=60)
    key = study.items.order_by("key").values_list("key", flat=True)[0]
    study_onboarding_set(study=study, spec=OnboardingSpec(practice=f"{key} A"))
    me = rater(study, user)
    me.study.refresh_from_db()
    held = assignment_next(rater=me)
    assert held.item.is_practice and held.time_limit_ends_at is None
    with pytest.raises(SkipRefused, match="practice"):
        item_skip(rater=me, item_token=held.item.token)
    client.force_login(user)
    page = client.get(reverse("annotation:workspace", args=[study.pk])).content.decode()
    assert 'id="skip-dialog"' not in page and "data-time-left-s" not in page
    assert 'id="flag-dialog"' in page  # flagging a practice item is still possible
    answer(me, held.item.token, "practice-1")
    real = assignment_next(rater=me)
    assert not real.item.is_practice and real.time_limit_ends_at is not None
