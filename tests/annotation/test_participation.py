"""Crowd-platform participation (issue #19): a study's link makes or reuses a participant
account scoped to that study, validates the platform's ids, and ends with the completion code
or the platform's completion URL; the participant reaches nothing else."""

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotation.models import Participant, Rater, StudyItem
from annotation.services.assignments import AnswerInput, answer_submit, assignment_next
from annotation.services.onboarding import OnboardingSpec, study_onboarding_set
from annotation.services.participation import ParticipationInput, participant_join
from core.roles import is_participant
from tests.annotation.test_blinding import assert_blind
from tests.annotation.test_concurrency import _in_parallel

pytestmark = pytest.mark.django_db

PID = "5f1e2d3c4b5a69788796a5b4"
COMPLETE = "https://app.prolific.com/submissions/complete?cc=C1AB2CD3"


def open_to_crowd(study, **fields):
    spec = {"participation_enabled": True, "completion_code": "C1AB2CD3", **fields}
    study_onboarding_set(study=study, spec=OnboardingSpec(**spec))
    study.refresh_from_db()
    return study


def link(study, **params) -> str:
    return reverse("participate", args=[study.participation_token]), params


def visit(client, study, **params):
    url, query = link(study, **params)
    return client.get(url, query)


@pytest.fixture
def crowd_study(make_study, make_annotators):
    return open_to_crowd(make_study(annotators=make_annotators(1), overlap=1, max_items=2))


def test_the_link_makes_an_account_for_that_study_and_reuses_it(crowd_study, client, make_study):
    response = visit(client, crowd_study, PROLIFIC_PID=PID, STUDY_ID="s1", SESSION_ID="a1")
    assert response.status_code == 302
    assert response.url == reverse("annotation:workspace", args=[crowd_study.pk])
    participant = Participant.objects.get()
    user = participant.user
    assert is_participant(user) and not user.has_usable_password()
    assert PID not in user.username  # the username names no one
    assert (participant.platform_study_id, participant.session_id) == ("s1", "a1")
    assert Rater.objects.filter(user=user).values_list("study_id", flat=True)[::1] == [
        crowd_study.pk
    ]
    assert client.get(response.url).status_code == 200  # signed in
    # The same id again (a new session): the same account.
    other_browser = Client()
    again = visit(other_browser, crowd_study, PROLIFIC_PID=PID, SESSION_ID="a2")
    assert again.status_code == 302 and Participant.objects.count() == 1
    participant.refresh_from_db()
    assert participant.session_id == "a2"
    assert int(other_browser.session["_auth_user_id"]) == user.pk
    # Another study's link: another account, in that study only.
    second = open_to_crowd(
        make_study(annotators=[], overlap=1, max_items=2, name="Second", participation_enabled=True)
    )
    visit(Client(), second, participant=PID)
    assert Participant.objects.count() == 2
    other_user = Participant.objects.get(study=second).user
    assert other_user != user
    assert list(Rater.objects.filter(user=other_user).values_list("study_id", flat=True)) == [
        second.pk
    ]


def test_a_new_participant_joins_the_gold_items_every_annotator_count(make_study, make_annotators):
    study = make_study(annotators=make_annotators(2), overlap=1, max_items=3)
    key = study.items.first().key
    study = open_to_crowd(study, practice=f"{key} A")
    item = StudyItem.objects.get(key=key, study=study)
    assert item.required_answers == 2
    visit(Client(), study, PROLIFIC_PID=PID)
    item.refresh_from_db()
    assert item.required_answers == 3


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({}, "PROLIFIC_PID"),
        ({"PROLIFIC_PID": "a b"}, "PROLIFIC_PID or participant"),
        ({"PROLIFIC_PID": "x" * 65}, "PROLIFIC_PID or participant"),
        ({"participant": "<script>"}, "PROLIFIC_PID or participant"),
        ({"PROLIFIC_PID": PID, "STUDY_ID": "s;1"}, "STUDY_ID"),
        ({"PROLIFIC_PID": PID, "SESSION_ID": "\x00"}, "SESSION_ID"),
    ],
)
def test_bad_ids_are_refused_naming_the_parameter_and_nothing_is_made(
    crowd_study, client, params, named
):
    users = User.objects.count()
    response = visit(client, crowd_study, **params)
    assert response.status_code == 400
    assert named in response.content.decode()
    assert User.objects.count() == users and not Participant.objects.exists()
    assert "_auth_user_id" not in client.session


def test_a_switched_off_closed_or_unknown_link_is_a_404(crowd_study, client):
    assert (
        client.get(reverse("participate", args=["nope"]), {"PROLIFIC_PID": PID}).status_code == 404
    )
    crowd_study.status = "closed"
    crowd_study.save()
    assert visit(client, crowd_study, PROLIFIC_PID=PID).status_code == 404
    crowd_study.status = "open"
    crowd_study.participation_enabled = False
    crowd_study.save()
    assert visit(client, crowd_study, PROLIFIC_PID=PID).status_code == 404
    assert not Participant.objects.exists()


def finish(study):
    user = Participant.objects.get(study=study).user
    me = Rater.objects.get(user=user)
    n = 0
    while (assignment := assignment_next(rater=me)) is not None:
        n += 1
        answer_submit(
            rater=me,
            item_token=assignment.item.token,
            answer=AnswerInput(label="A", confidence=3),
            idempotency_key=f"fin-{n}",
        )


def test_the_end_shows_the_completion_code_then_sends_on_to_the_platform(crowd_study, client, run):
    visit(client, crowd_study, PROLIFIC_PID=PID)
    complete = reverse("annotation:complete", args=[crowd_study.pk])
    workspace = reverse("annotation:workspace", args=[crowd_study.pk])
    # Not finished yet: back to the workspace, no code anywhere.
    assert client.get(complete).url == workspace
    assert "C1AB2CD3" not in client.get(workspace).content.decode()
    finish(crowd_study)
    page = client.get(workspace)
    assert 'id="completion-code">C1AB2CD3<' in page.content.decode()
    assert_blind(page, run, "finished")
    done = client.get(complete)
    assert done.status_code == 200 and "C1AB2CD3" in done.content.decode()
    assert_blind(done, run, "complete")
    open_to_crowd(crowd_study, completion_url=COMPLETE)
    assert client.get(complete).url == COMPLETE


def test_an_ordinary_rater_gets_no_completion_page(make_study, make_annotators, client):
    user = make_annotators(1)[0]
    study = open_to_crowd(make_study(annotators=[user], overlap=1, max_items=2))
    client.force_login(user)
    assert client.get(reverse("annotation:complete", args=[study.pk])).status_code == 404


def test_a_participant_reaches_their_study_and_nothing_else(crowd_study, client, make_study):
    other = make_study(
        annotators=[], overlap=1, max_items=2, name="Not yours", participation_enabled=True
    )
    visit(client, crowd_study, PROLIFIC_PID=PID)
    workspace = reverse("annotation:workspace", args=[crowd_study.pk])
    assert client.get("/").url == reverse("annotation:home")
    assert client.get(reverse("annotation:home")).url == workspace
    for url in (
        reverse("annotation:workspace", args=[other.pk]),
        reverse("annotation:study_list"),
        reverse("annotation:study_detail", args=[crowd_study.pk]),
        reverse("benchmark:dialogue_list"),
        reverse("stats:dashboard"),
        reverse("stats_api:table", args=["leaderboard"]),
    ):
        assert client.get(url).status_code == 404, url
    admin = client.get(reverse("admin:index"))
    assert admin.status_code == 302 and admin.url.startswith("/admin/login/")


@pytest.mark.django_db(transaction=True)
def test_simultaneous_first_visits_make_one_account_per_id(make_study, make_annotators):
    """Eight threads, each its own connection, open the link at once: two ids, one account each
    and one rater each, and the gold count grows by exactly two."""
    study = make_study(annotators=make_annotators(1), overlap=1, max_items=3)
    key = study.items.first().key
    study = open_to_crowd(study, practice=f"{key} A")
    ids = ["a" * 24, "b" * 24]
    users = _in_parallel(
        lambda i: participant_join(study=study, given=ParticipationInput(ids[i % 2])).pk, 8
    )
    assert len(set(users)) == 2 and Participant.objects.count() == 2
    assert Rater.objects.filter(study=study, user__participant__isnull=False).count() == 2
    assert StudyItem.objects.get(study=study, key=key).required_answers == 1 + 2


def test_the_staff_page_shows_the_link_to_copy(crowd_study, client, admin_user):
    client.force_login(admin_user)
    html = client.get(reverse("annotation:study_detail", args=[crowd_study.pk])).content.decode()
    expected = (
        f"http://testserver/participate/{crowd_study.participation_token}/"
        "?PROLIFIC_PID={{%PROLIFIC_PID%}}&amp;STUDY_ID={{%STUDY_ID%}}&amp;SESSION_ID={{%SESSION_ID%}}"
    )
    assert expected in html and "C1AB2CD3" in html
