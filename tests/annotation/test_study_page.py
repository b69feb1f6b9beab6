"""The staff page per study: progress per annotator, gold accuracy, agreement so far, the
rater-quality panel and reversible, recorded exclusion; the admin's read-only history; the demo."""

import io

import pytest
from django.core.management import call_command
from django.test import RequestFactory
from django.urls import reverse

from annotation import kinds
from annotation.demo import IMAGE_STUDY, LABELLED_STUDY
from annotation.models import Answer, Assignment, RaterExclusion, Study, StudyItem
from annotation.selectors import study_overview
from annotation.services.assignments import AnswerInput, answer_submit, assignment_next
from tests.annotation.conftest import rater

pytestmark = pytest.mark.django_db


def answer_all(r, label_for, elapsed_ms=5000):
    while (assignment := assignment_next(rater=r)) is not None:
        label = label_for(assignment)
        choice = "tie" if label == "tie" else str(assignment.display["order"].index(label) + 1)
        answer_submit(
            rater=r,
            item_token=assignment.item.token,
            answer=AnswerInput(label=label, confidence=3, details={"choice": choice}),
            idempotency_key=f"{r.pk}-{assignment.item_id}",
            elapsed_ms=elapsed_ms,
        )


@pytest.fixture
def finished(make_study, make_annotators, run):
    users = make_annotators(3)
    probe = make_study(annotators=users[:1], overlap=1, name="probe", max_items=1)
    gold_key = probe.items.get().key
    study = make_study(annotators=users, overlap=3, gold=f"{gold_key} B", name="Finished")
    careful, also_careful, clicker = (rater(study, u) for u in users)
    answer_all(careful, lambda a: "B", elapsed_ms=90_000)
    answer_all(also_careful, lambda a: "B" if a.item.is_gold or a.item.position % 2 else "A")
    # The clicker always presses "1", whatever is there, in seconds.
    answer_all(clicker, lambda a: a.display["order"][0], elapsed_ms=3_000)
    return study, careful, also_careful, clicker


def test_overview_figures(finished):
    study, careful, also_careful, clicker = finished
    overview = study_overview(study=study)
    items = study.items.count()
    assert overview["items"]["complete"] == items and overview["answers"] == 3 * items
    rows = {row["rater"].pk: row for row in overview["raters"]}
    assert rows[careful.pk]["figures"].gold_accuracy == 1.0
    assert rows[clicker.pk]["figures"].first_position_share == 1.0
    assert rows[clicker.pk]["figures"].median_seconds == 3.0
    assert any("one side" in flag for flag in rows[clicker.pk]["flags"])
    assert any("median under" in flag for flag in rows[clicker.pk]["flags"])
    assert not rows[careful.pk]["flags"] or all("side" not in f for f in rows[careful.pk]["flags"])
    assert 0 < overview["agreement"] < 1 and overview["agreement_items"] == items


def test_excluding_a_rater_is_recorded_reversible_and_changes_the_figures(
    finished, client_for, researcher
):
    study, careful, also_careful, clicker = finished
    client = client_for(researcher)
    before = study_overview(study=study)
    url = reverse("annotation:rater_exclusion", args=[study.pk, clicker.pk])
    response = client.post(
        url, {"excluded": "on", "reason": "20 s per item"}, headers={"HX-Request": "true"}
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="quality">') and "excluded" in html
    after = study_overview(study=study)
    assert after["answers"] == before["answers"] - study.items.count()
    assert after["answers_all"] == before["answers_all"]  # nothing deleted
    assert after["agreement"] != before["agreement"]
    client.post(url, {"excluded": ""})
    record = list(
        RaterExclusion.objects.filter(rater=clicker).values_list("excluded", "reason", "by")
    )
    assert record == [(True, "20 s per item", researcher.pk), (False, "", researcher.pk)]
    assert study_overview(study=study)["answers"] == before["answers"]
    page = client.get(reverse("annotation:study_detail", args=[study.pk])).content.decode()
    assert "Exclusion record" in page and "20 s per item" in page


def test_the_study_page_query_count_does_not_grow(
    finished, client_for, researcher, django_assert_max_num_queries
):
    study = finished[0]
    client = client_for(researcher)
    # 14, and since issue #19: the live panel (2), item table (count and page) and flags (1).
    with django_assert_max_num_queries(19):
        assert client.get(reverse("annotation:study_detail", args=[study.pk])).status_code == 200
    with django_assert_max_num_queries(8):
        assert client.get(reverse("annotation:study_list")).status_code == 200
    with django_assert_max_num_queries(8):
        assert client.get(reverse("annotation:study_new")).status_code == 200
    rater_pk = study.raters.first().pk
    with django_assert_max_num_queries(20):
        client.post(
            reverse("annotation:rater_exclusion", args=[study.pk, rater_pk]),
            {"excluded": "on"},
            headers={"HX-Request": "true"},
        )


def test_the_admin_shows_history_read_only_and_keeps_studies_with_answers(
    finished, client_for, admin_user
):
    study = finished[0]
    client = client_for(admin_user)
    answer = Answer.objects.first()
    for name, obj in (
        ("answer", answer),
        ("assignment", answer.assignment),
        ("studyitem", answer.assignment.item),
    ):
        assert client.get(reverse(f"admin:annotation_{name}_changelist")).status_code == 200
        page = client.get(reverse(f"admin:annotation_{name}_change", args=[obj.pk]))
        assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
        delete = client.post(
            reverse(f"admin:annotation_{name}_delete", args=[obj.pk]), {"post": "yes"}
        )
        assert delete.status_code == 403
    delete = client.post(reverse("admin:annotation_study_delete", args=[study.pk]), {"post": "yes"})
    assert delete.status_code == 403
    assert Study.objects.filter(pk=study.pk).exists() and Answer.objects.count() > 0
    listing = client.get(reverse("admin:annotation_study_changelist")).content.decode()
    assert "progress &amp; quality" in listing and "Import from the release" in listing
    assert client.get(reverse("admin:annotation_study_change", args=[study.pk])).status_code == 200


def test_load_demo_creates_one_study_of_each_kind_for_the_demo_annotators(client):
    call_command("load_demo", stdout=io.StringIO())
    out = io.StringIO()
    call_command("load_demo", stdout=out)
    assert "Demo studies: 0 created" in out.getvalue()  # idempotent
    # Besides them, the closed failure-mode study the demo raters answered
    # (tests/stats/test_demo_failure_mode_labels.py): not the annotators'; and a second direct
    # rating, of the replies to the multimodal demo's photos (tests/annotation/test_demo_photos.py).
    assert Study.objects.get(name=IMAGE_STUDY).kind == "direct_rating"
    studies = Study.objects.exclude(name=LABELLED_STUDY)
    assert sorted(studies.exclude(name=IMAGE_STUDY).values_list("kind", flat=True)) == sorted(
        k.key for k in kinds.all_kinds()
    )
    for study in studies:
        assert set(
            study.raters.filter(annotates=True).values_list("user__username", flat=True)
        ) == {
            "annotator1",
            "annotator2",
        }
        assert study.items.exists()
    # django-axes needs the request the credentials came with (the test client passes none).
    assert client.login(
        request=RequestFactory().post("/accounts/login/"),
        username="annotator1",
        password="demo-annotator1",
    )
    home = client.get(reverse("annotation:home")).content.decode()
    for study in studies:
        assert study.name in home
    assert StudyItem.objects.filter(is_gold=True).count() == 1
    assert not Assignment.objects.filter(item__study__in=studies).exists()
