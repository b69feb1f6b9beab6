"""Archiving and deleting studies: a study with any answer (live or retracted) is never deleted —
not by the admin's Delete, its bulk action, ``delete()`` or a queryset — only archived, which is
recorded and reversible; archived studies are closed to annotators and hidden from their home
and the staff list, and the statistics still read them. A study without answers may be deleted."""

import html
import threading
import time

import pytest
from django.contrib.admin.models import LogEntry
from django.db import connections, transaction
from django.db.models.deletion import ProtectedError
from django.test import Client
from django.urls import reverse

from annotation.models import (
    Answer,
    Assignment,
    Rater,
    RaterExclusion,
    Study,
    StudyArchiveEvent,
    StudyItem,
    StudyStatus,
)
from annotation.services.assignments import (
    AnswerInput,
    AnswerRejected,
    answer_submit,
    answer_undo,
    assignment_next,
)
from annotation.services.studies import (
    StudyHasAnswers,
    rater_exclusion_set,
    study_archive,
    study_delete,
    study_unarchive,
)
from tests.annotation.conftest import rater

pytestmark = pytest.mark.django_db

A = AnswerInput(label="A", confidence=3, details={"choice": "1"})


def answered(study, key="archive-key-1"):
    """The study's first rater takes an item and answers it; returns that rater."""
    r = study.raters.order_by("pk").first()
    assignment = assignment_next(rater=r)
    answer_submit(rater=r, item_token=assignment.item.token, answer=A, idempotency_key=key)
    return r


def counts(study_id):
    return (
        Study.objects.filter(pk=study_id).count(),
        StudyItem.objects.filter(study_id=study_id).count(),
        Rater.objects.filter(study_id=study_id).count(),
        Assignment.objects.filter(item__study_id=study_id).count(),
        Answer.objects.filter(assignment__item__study_id=study_id).count(),
    )


def body(response) -> bytes:
    if response.streaming:
        return b"".join(response.streaming_content)
    return response.content


def changelist_post(client, action, *studies, **extra):
    return client.post(
        reverse("admin:annotation_study_changelist"),
        {"action": action, "_selected_action": [s.pk for s in studies], **extra},
        follow=True,
    )


# --- The services -----------------------------------------------------------------------------


def test_archiving_is_recorded_and_unarchiving_gives_back_the_status_it_had(make_study, admin_user):
    study = make_study()
    event = study_archive(study=study, by=admin_user)
    study.refresh_from_db()
    assert study.status == StudyStatus.ARCHIVED
    assert (event.archived, event.previous_status, event.by) == (True, "open", admin_user)
    assert event.at is not None
    assert study_archive(study=study, by=admin_user) is None  # already archived: a no-op
    back = study_unarchive(study=study, by=admin_user)
    study.refresh_from_db()
    assert study.status == StudyStatus.OPEN and back.archived is False
    assert study_unarchive(study=study, by=admin_user) is None

    Study.objects.filter(pk=study.pk).update(status=StudyStatus.CLOSED)
    study.refresh_from_db()
    study_archive(study=study, by=admin_user)
    study_unarchive(study=study, by=None)
    study.refresh_from_db()
    assert study.status == StudyStatus.CLOSED  # a closed study comes back closed, not open
    history = list(study.archive_events.values_list("archived", "previous_status"))
    assert history == [(True, "open"), (False, "archived"), (True, "closed"), (False, "archived")]


def test_an_archived_study_hands_out_nothing_and_takes_no_answers_or_undos(
    make_study, make_annotators, admin_user
):
    people = make_annotators(3)
    study = make_study(annotators=people)
    holder, idle, answerer = (rater(study, u) for u in people)
    held = assignment_next(rater=holder)
    done = assignment_next(rater=answerer)
    answer_submit(rater=answerer, item_token=done.item.token, answer=A, idempotency_key="k-one-1")
    study_archive(study=study, by=admin_user)
    idle, holder, answerer = (rater(study, u) for u in (people[1], people[0], people[2]))

    assert assignment_next(rater=idle) is None  # nothing new for anyone
    with pytest.raises(AnswerRejected, match="closed"):
        answer_submit(rater=holder, item_token=held.item.token, answer=A, idempotency_key="k-2-2")
    assert answer_undo(rater=answerer) is None
    assert Answer.objects.filter(retracted_at__isnull=True).count() == 1
    assert not Assignment.objects.filter(rater=idle).exists()


def test_through_the_pages_an_archived_study_is_gone_from_home_and_refuses_answers(
    make_study, make_annotators, client_for, admin_user
):
    people = make_annotators(2)
    study = make_study(annotators=people, name="The archived one")
    other = make_study(annotators=people, name="The study in use")
    held = assignment_next(rater=rater(study, people[0]))
    study_archive(study=study, by=admin_user)
    client = client_for(people[0])

    home = client.get(reverse("annotation:home")).content.decode()
    assert other.name in home and study.name not in home
    page = client.post(reverse("annotation:next", args=[study.pk]), follow=True)
    assert page.status_code == 200 and 'name="choice"' not in page.content.decode()
    response = client.post(
        reverse("annotation:answer", args=[study.pk, held.item.token]),
        {"idempotency_key": "page-key-1", "choice": "1", "confidence": "3"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    assert "Not saved: this study is closed." in response.content.decode()
    assert not Answer.objects.exists()
    fresh = client_for(people[1]).post(
        reverse("annotation:next", args=[study.pk]), headers={"HX-Request": "true"}
    )
    assert "Nothing is left for you in this study" in fresh.content.decode()
    assert not Assignment.objects.filter(rater__user=people[1], item__study=study).exists()


def test_the_staff_list_hides_archived_studies_unless_asked(
    make_study, client_for, researcher, admin_user
):
    kept, archived = make_study(name="Still in use"), make_study(name="Put away")
    study_archive(study=archived, by=admin_user)
    client = client_for(researcher)
    listing = client.get(reverse("annotation:study_list")).content.decode()
    assert kept.name in listing and archived.name not in listing
    assert "?archived=1" in listing
    shown = client.get(reverse("annotation:study_list"), {"archived": "1"}).content.decode()
    assert archived.name in shown and kept.name not in shown
    detail = client.get(reverse("annotation:study_detail", args=[archived.pk])).content.decode()
    assert "Archived" in detail and "by alice-admin" in detail


def test_the_statistics_still_read_an_archived_study(
    make_study, make_annotators, client_for, researcher, admin_user
):
    people = make_annotators(2)
    study = make_study(annotators=people)
    for n, user in enumerate(people):
        r = rater(study, user)
        for i in range(3):
            got = assignment_next(rater=r)
            answer_submit(
                rater=r, item_token=got.item.token, answer=A, idempotency_key=f"stats-{n}-{i}-key"
            )
    client = client_for(researcher)
    urls = [
        reverse("stats_api:table", args=["preference"]) + f"?study={study.pk}",
        reverse("stats_api:table", args=["human-agreement"]) + f"?study={study.pk}",
        reverse("stats_api:raw-export", args=["votes", "jsonl"]) + f"?study={study.pk}",
    ]
    before = [body(client.get(url)) for url in urls]
    study_archive(study=study, by=admin_user)
    after = [client.get(url) for url in urls]
    assert [r.status_code for r in after] == [200, 200, 200]
    assert [body(r) for r in after] == before
    assert before[2].count(b"\n") == 6  # every answer, in the votes export
    dashboard = client.get(reverse("stats:dashboard"), {"study": study.pk})
    assert dashboard.status_code == 200 and study.name in dashboard.content.decode()


# --- Deleting: the service and the schema -----------------------------------------------------


@pytest.mark.parametrize("undone", [False, True], ids=["live answer", "only a retracted one"])
def test_a_study_with_an_answer_cannot_be_deleted_in_any_way(make_study, undone):
    study = make_study()
    r = answered(study)
    if undone:
        answer_undo(rater=r)
        assert not Answer.objects.filter(retracted_at__isnull=True).exists()
    before = counts(study.pk)
    with pytest.raises(StudyHasAnswers, match="archive it instead"):
        study_delete(study=study)
    with pytest.raises(ProtectedError):
        study.delete()
    with pytest.raises(ProtectedError):
        Study.objects.filter(pk=study.pk).delete()
    with pytest.raises(ProtectedError):
        StudyItem.objects.filter(study=study).delete()
    assert counts(study.pk) == before


def test_a_study_without_answers_is_deleted_with_its_items_raters_and_leases(
    make_study, admin_user
):
    study = make_study()
    r = study.raters.order_by("pk").first()
    assignment_next(rater=r)  # a lease, never answered
    rater_exclusion_set(rater=r, excluded=True, by=admin_user, reason="test")
    study_archive(study=study, by=admin_user)
    study_delete(study=study)
    assert counts(study.pk) == (0, 0, 0, 0, 0)
    assert not RaterExclusion.objects.exists() and not StudyArchiveEvent.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_an_answer_being_written_while_the_study_is_deleted_stops_the_deletion(make_study):
    """The deletion waits for the rater's lock that every answer is written under, so it sees
    an answer committed meanwhile and refuses (without the lock, on PostgreSQL it counted no
    answer and then failed on the foreign key: a 500 instead of the message)."""
    study = make_study()
    r = study.raters.order_by("pk").first()
    held = assignment_next(rater=r)
    written = threading.Event()
    outcome = {}

    def answer():
        try:
            with transaction.atomic():  # keeps answer_submit's rater lock a moment longer
                answer_submit(
                    rater=r, item_token=held.item.token, answer=A, idempotency_key="race-1"
                )
                written.set()
                time.sleep(0.5)
        finally:
            connections.close_all()

    def delete():
        try:
            written.wait(10)
            study_delete(study=Study.objects.get(pk=study.pk))
        except Exception as exc:  # what the deletion raised is the result
            outcome["error"] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=answer), threading.Thread(target=delete)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert isinstance(outcome.get("error"), StudyHasAnswers), outcome
    assert counts(study.pk)[0] == 1 and Answer.objects.count() == 1


# --- Through the admin ------------------------------------------------------------------------


@pytest.mark.parametrize("undone", [False, True], ids=["live answer", "only a retracted one"])
def test_the_admin_refuses_to_delete_a_study_with_answers(
    make_study, client_for, admin_user, undone
):
    study = make_study()
    r = answered(study)
    if undone:
        answer_undo(rater=r)
    before = counts(study.pk)
    client = client_for(admin_user)
    change = client.get(reverse("admin:annotation_study_change", args=[study.pk])).content.decode()
    assert reverse("admin:annotation_study_delete", args=[study.pk]) not in change
    assert 'id="archive"' in change
    delete_url = reverse("admin:annotation_study_delete", args=[study.pk])
    assert client.get(delete_url).status_code == 403
    assert client.post(delete_url, {"post": "yes"}).status_code == 403

    page = changelist_post(client, "delete_selected", study, post="yes")
    assert page.status_code == 200  # Django's own bulk delete is not offered at all
    assert "No action selected" in page.content.decode()
    for extra in ({}, {"post": "yes"}):  # the action, and its confirmation sent directly
        page = changelist_post(client, "delete_studies_without_answers", study, **extra)
        text = page.content.decode()
        assert "Nothing deleted" in text and "archive it instead" in text
    assert counts(study.pk) == before
    assert not LogEntry.objects.filter(action_flag=3).exists()  # no deletion logged


def test_the_admin_bulk_delete_refuses_the_whole_selection_if_one_study_has_answers(
    make_study, client_for, admin_user
):
    empty, used = make_study(name="Empty"), make_study(name="Used")
    answered(used)
    page = changelist_post(
        client_for(admin_user), "delete_studies_without_answers", empty, used, post="yes"
    )
    assert "Nothing deleted: 'Used'" in html.unescape(page.content.decode())
    assert Study.objects.count() == 2


def test_the_admin_deletes_a_study_without_answers_single_and_bulk(
    make_study, client_for, admin_user
):
    """Items, raters, leases and exclusion records go with their study, although their own
    admins refuse to delete them one by one (before, that refusal blocked every deletion)."""
    single, bulk = make_study(name="Single"), make_study(name="Bulk")
    for study in (single, bulk):
        r = study.raters.order_by("pk").first()
        assignment_next(rater=r)
        rater_exclusion_set(rater=r, excluded=True, by=admin_user)
    client = client_for(admin_user)
    url = reverse("admin:annotation_study_delete", args=[single.pk])
    confirm = client.get(url)
    assert confirm.status_code == 200 and "Are you sure" in confirm.content.decode()
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert counts(single.pk) == (0, 0, 0, 0, 0)

    confirm = changelist_post(client, "delete_studies_without_answers", bulk)
    assert "Are you sure" in confirm.content.decode()
    done = changelist_post(client, "delete_studies_without_answers", bulk, post="yes")
    assert "Successfully deleted 1 study" in done.content.decode()
    assert counts(bulk.pk) == (0, 0, 0, 0, 0) and not RaterExclusion.objects.exists()


def test_the_admin_archives_and_unarchives_with_its_button_and_actions(
    make_study, client_for, admin_user
):
    study, other = make_study(), make_study(name="Other")
    client = client_for(admin_user)
    archive = reverse("admin:annotation_study_archive", args=[study.pk])
    assert client.get(archive).status_code == 302  # GET only goes back to the page
    assert Study.objects.get(pk=study.pk).status == StudyStatus.OPEN
    response = client.post(archive)
    assert response.url == reverse("admin:annotation_study_change", args=[study.pk])
    assert Study.objects.get(pk=study.pk).status == StudyStatus.ARCHIVED
    change = client.get(response.url).content.decode()
    assert 'id="unarchive"' in change and "archive history" in change.lower()
    client.post(reverse("admin:annotation_study_unarchive", args=[study.pk]))
    assert Study.objects.get(pk=study.pk).status == StudyStatus.OPEN

    page = changelist_post(client, "archive_studies", study, other)
    assert "2 study(ies) archived" in page.content.decode()
    assert set(Study.objects.values_list("status", flat=True)) == {StudyStatus.ARCHIVED}
    changelist_post(client, "unarchive_studies", study, other)
    assert set(Study.objects.values_list("status", flat=True)) == {StudyStatus.OPEN}
    assert (
        list(StudyArchiveEvent.objects.filter(study=study).values_list("archived", "by__username"))
        == [(True, "alice-admin"), (False, "alice-admin")] * 2
    )


def test_the_admin_cannot_archive_by_editing_the_status_field(make_study, client_for, admin_user):
    study = make_study()
    client = client_for(admin_user)
    url = reverse("admin:annotation_study_change", args=[study.pk])
    response = client.post(
        url,
        {
            "name": study.name,
            "status": "archived",
            "instructions": "",
            "lease_minutes": "30",
            "raters-TOTAL_FORMS": "0",
            "raters-INITIAL_FORMS": "0",
            "archive_events-TOTAL_FORMS": "0",
            "archive_events-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert Study.objects.get(pk=study.pk).status == StudyStatus.OPEN
    study_archive(study=study, by=admin_user)
    page = client.get(url).content.decode()
    assert 'name="status"' not in page  # read-only while archived: unarchive to change it


def test_the_archive_buttons_need_the_csrf_token_and_staff(make_study, admin_user, researcher):
    study = make_study()
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(admin_user)
    assert strict.post(reverse("admin:annotation_study_archive", args=[study.pk])).status_code == (
        403
    )
    researcher_client = Client()
    researcher_client.force_login(researcher)
    response = researcher_client.post(reverse("admin:annotation_study_archive", args=[study.pk]))
    assert response.status_code == 302 and response.url.startswith("/admin/login/")
    assert Study.objects.get(pk=study.pk).status == StudyStatus.OPEN
    assert not StudyArchiveEvent.objects.exists()
