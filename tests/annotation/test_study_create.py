"""Creating studies from selections: what each kind selects, every bad input named on its
field, all-or-nothing writes; the researchers' form and the admin's."""

import pytest
from django.db import IntegrityError
from django.urls import reverse

from annotation.models import Rater, Study, StudyItem
from annotation.services.studies import StudyInputError, StudySpec, study_create
from benchmark.models import (
    Condition,
    Dialogue,
    DialogueStatus,
    JudgeDisagreement,
    Judgment,
    ModelEndpoint,
    TriggerType,
)
from tests.annotation.conftest import form_data

pytestmark = pytest.mark.django_db


def errors_of(call) -> dict:
    with pytest.raises(StudyInputError) as caught:
        call()
    return caught.value.errors


def spec(run, annotators, **fields) -> StudySpec:
    return StudySpec(
        **{
            "kind": "pairwise",
            "name": "A study",
            "run": run,
            "annotators": annotators,
            "trigger_type": TriggerType.RECOVERY,
        }
        | fields
    )


def test_pairwise_pairs_vanilla_with_rubric_injected_per_trigger_and_model(run, make_annotators):
    study = study_create(spec=spec(run, make_annotators(2)))
    items = list(study.items.select_related("unit", "unit_b"))
    assert len(items) == 4 * 2  # RECOVERY triggers × models
    for item in items:
        assert item.unit.condition == Condition.VANILLA
        assert item.unit_b.condition == Condition.RUBRIC_INJECTED
        assert item.unit.trigger_id == item.unit_b.trigger_id == item.trigger_id
        assert item.unit.endpoint_id == item.unit_b.endpoint_id
        assert item.trigger.type == TriggerType.RECOVERY
        assert sorted(item.payload["sides"]) == ["A", "B"]
    assert sorted(i.position for i in items) == list(range(8))


def test_each_kind_selects_what_the_issue_says(run, make_annotators):
    people = make_annotators(3)
    one_model = ModelEndpoint.objects.get(name="zephyr-secret-large")
    direct = study_create(
        spec=spec(
            run,
            people,
            kind="direct_rating",
            endpoints=[one_model],
            condition=Condition.VANILLA,
            trigger_type="",
        )
    )
    assert direct.items.count() == 12 and direct.reason_required
    assert set(direct.items.values_list("unit__endpoint", flat=True)) == {one_model.pk}
    adjudication = study_create(
        spec=spec(run, people, kind="adjudication", trigger_type="", overlap=1)
    )
    assert adjudication.items.count() == JudgeDisagreement.objects.count()
    failures = study_create(spec=spec(run, people, kind="failure_mode"))
    failed_units = set(
        Judgment.objects.filter(
            judge=run.primary_judge, verdict="FAIL", unit__trigger__type="RECOVERY"
        ).values_list("unit_id", flat=True)
    )
    assert set(failures.items.values_list("unit_id", flat=True)) == failed_units
    assert all(i.payload["suggestion"]["reason"] for i in failures.items.all())
    audit = study_create(
        spec=spec(None, people[:2], kind="dialogue_audit", adjudicators=people[2:], max_items=2)
    )
    assert audit.items.count() == 2
    assert Rater.objects.filter(study=audit, annotates=False, adjudicates=True).count() == 1


def test_a_sample_is_seeded_and_recorded(run, make_annotators):
    people = make_annotators(2)
    one = study_create(spec=spec(run, people, max_items=3, seed=42, name="one"))
    two = study_create(spec=spec(run, people, max_items=3, seed=42, name="two"))
    assert list(one.items.values_list("key", flat=True)) == list(
        two.items.values_list("key", flat=True)
    )
    assert one.selection["seed"] == 42 and one.selection["matched"] == 8


@pytest.mark.parametrize(
    ("fields", "field", "fragment"),
    [
        ({"name": "  "}, "name", "Give the study a name"),
        ({"run": None}, "run", "Choose the evaluation run"),
        ({"overlap": 3}, "annotators", "needs at least 3 annotators"),
        ({"overlap": 0}, "overlap", "between 1 and 20"),
        ({"annotators": []}, "annotators", "at least one annotator"),
        ({"trigger_type": "EMERGENT", "endpoints": "none"}, "run", "no trigger"),
        ({"name": "Zephyr Secret Large vs the rest"}, "name", "must not reveal"),
        ({"instructions": "Prefer the rubric-injected one"}, "instructions", "must not reveal"),
        ({"gold": "no-such-key B"}, "gold", "no item of this selection has key"),
        ({"gold": "just-one-word"}, "gold", "Line 1"),
        ({"condition": "spicy"}, "condition", "Unknown condition"),
    ],
)
def test_bad_input_is_named_on_its_field_and_nothing_is_written(
    run, make_annotators, fields, field, fragment
):
    fields = dict(fields)
    if fields.get("endpoints") == "none":  # a model of the run that replied to nothing
        unused = ModelEndpoint.objects.create(
            name="unused", display_name="U", provider="replay", model_name="u"
        )
        run.endpoints.add(unused)
        fields["endpoints"] = [unused]
    people = fields.pop("annotators", None)
    run = fields.pop("run", run)
    errors = errors_of(
        lambda: study_create(
            spec=spec(run, make_annotators(2) if people is None else people, **fields)
        )
    )
    assert fragment in " ".join(errors[field]), errors
    assert not Study.objects.exists() and not StudyItem.objects.exists()


def test_gold_lines_are_checked_one_by_one(run, make_annotators):
    people = make_annotators(2)
    key = study_create(spec=spec(run, people, name="probe")).items.first().key
    errors = errors_of(
        lambda: study_create(spec=spec(run, people, gold=f"{key} maybe\n{key} A\n{key} B"))
    )["gold"]
    assert errors == [
        "Line 1: the expected answer must be one of A, B, tie (got 'maybe').",
        f"Line 3: {key!r} is given twice.",
    ]


def test_audit_rules_two_auditors_and_someone_to_decide(run, make_annotators):
    people = make_annotators(3)
    errors = errors_of(
        lambda: study_create(spec=spec(None, people[:2], kind="dialogue_audit", overlap=3))
    )
    assert "two auditors" in errors["overlap"][0]
    errors = errors_of(lambda: study_create(spec=spec(None, people[:2], kind="dialogue_audit")))
    assert "at least three people" in errors["adjudicators"][0]
    Dialogue.objects.update(status=DialogueStatus.ACCEPTED)
    errors = errors_of(lambda: study_create(spec=spec(None, people, kind="dialogue_audit")))
    assert errors == {"dialogue_status": ["No dialogue has the chosen status."]}


def test_a_pairwise_study_needs_both_conditions(run, make_annotators):
    run.conditions = [Condition.VANILLA]
    run.save()
    errors = errors_of(lambda: study_create(spec=spec(run, make_annotators(2))))
    assert "no rubric_injected replies" in errors["run"][0]


def test_creation_is_all_or_nothing(run, make_annotators, monkeypatch):
    """A database error half-way (two items with one key break a unique constraint, after the
    study and its raters were written) leaves nothing behind."""
    from annotation.kinds.pairwise import Pairwise

    select = Pairwise.select

    def with_a_duplicate(self, s):
        drafts = select(self, s)
        return drafts + drafts[:1]

    monkeypatch.setattr(Pairwise, "select", with_a_duplicate)
    with pytest.raises(IntegrityError):
        study_create(spec=spec(run, make_annotators(2)))
    assert not Study.objects.exists() and not Rater.objects.exists()


# --- Through the pages ------------------------------------------------------------------------


def test_a_researcher_creates_a_study_from_the_page(client_for, researcher, run, make_annotators):
    client = client_for(researcher)
    people = make_annotators(2)
    page = client.get(reverse("annotation:study_new"))
    assert page.status_code == 200 and "Create study" in page.content.decode()
    response = client.post(reverse("annotation:study_new"), form_data(run, people))
    study = Study.objects.get()
    assert response.status_code == 302
    assert response.url == reverse("annotation:study_detail", args=[study.pk])
    assert study.created_by == researcher and study.items.count() == 8
    detail = client.get(response.url)
    assert detail.status_code == 200 and "Raters: progress and quality" in detail.content.decode()
    listing = client.get(reverse("annotation:study_list")).content.decode()
    assert study.name in listing


def test_the_form_shows_service_errors_on_their_fields(
    client_for, researcher, run, make_annotators
):
    client = client_for(researcher)
    people = make_annotators(2)
    response = client.post(
        reverse("annotation:study_new"), form_data(run, people, overlap="3", name="")
    )
    html = response.content.decode()
    assert response.status_code == 200 and not Study.objects.exists()
    assert 'id="field-name"' in html and "This field is required." in html
    response = client.post(reverse("annotation:study_new"), form_data(run, people, overlap="3"))
    assert "needs at least 3 annotators" in response.content.decode()


def test_switching_the_kind_rerenders_the_form_with_its_fields(client_for, researcher, run):
    client = client_for(researcher)
    response = client.get(
        reverse("annotation:study_new"),
        {"kind": "dialogue_audit", "name": "Kept"},
        headers={"HX-Request": "true"},
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<form id="study-form"') and "<html" not in html
    assert 'id="field-dialogue_status"' in html and 'id="field-run"' not in html
    assert 'value="Kept"' in html and "errorlist" not in html


def test_only_staff_reach_the_staff_pages(client_for, annotator, outsider, run):
    for user in (annotator, outsider):
        client = client_for(user)
        for url in (
            reverse("annotation:study_list"),
            reverse("annotation:study_new"),
            reverse("annotation:study_detail", args=[1]),
        ):
            assert client.get(url).status_code == 404, url
        response = client.post(reverse("annotation:study_new"), {"kind": "pairwise"})
        assert response.status_code == 404
        response = client.post(reverse("annotation:rater_exclusion", args=[1, 1]))
        assert response.status_code == 404
    assert not Study.objects.exists()


def test_the_admin_creates_a_study_with_the_same_rules(
    client_for, admin_user, run, make_annotators
):
    client = client_for(admin_user)
    people = make_annotators(2)
    url = reverse("admin:annotation_study_add")
    assert client.get(url).status_code == 200
    bad = client.post(url, form_data(run, people, name="Quartz Hidden Mini wins?"))
    assert "must not reveal" in bad.content.decode() and not Study.objects.exists()
    response = client.post(url, form_data(run, people))
    study = Study.objects.get()
    assert response.status_code == 302
    assert response.url == reverse("admin:annotation_study_change", args=[study.pk])
    change = client.get(response.url)
    assert change.status_code == 200


def test_a_researcher_can_be_the_audit_adjudicator(client_for, researcher, run, make_annotators):
    people = make_annotators(2)
    response = client_for(researcher).post(
        reverse("annotation:study_new"),
        form_data(
            run,
            people,
            kind="dialogue_audit",
            name="Audit the drafts",
            adjudicators=[str(researcher.pk)],
            dialogue_status="draft",
        ),
    )
    study = Study.objects.get()
    assert response.status_code == 302 and study.kind == "dialogue_audit"
    judge = Rater.objects.get(study=study, user=researcher)
    assert judge.adjudicates and not judge.annotates
