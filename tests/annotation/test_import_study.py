"""Importing the release's human studies (Study 1 direct ratings, Study 2 pairwise) as closed
studies: from the samples, and from crafted bad files (every problem named, nothing written)."""

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import Answer, Rater, Study, StudySource, StudyStatus
from annotation.services.importer import StudyImportError, study_import
from tests.release import release_file

pytestmark = pytest.mark.django_db


def run_import(kind, items, *ratings) -> tuple[Study, str]:
    out = io.StringIO()
    call_command(
        "import_study", "--kind", kind, "--items", str(items), *map(str, ratings), stdout=out
    )
    study_id = int(out.getvalue().strip().splitlines()[-1])
    return Study.objects.get(pk=study_id), out.getvalue()


def test_study_1_sample_imports_as_a_closed_direct_rating_study():
    items_path = release_file("study1_sample_items.sample.json")
    ratings_path = release_file("study1_ratings.sample.jsonl")
    study, output = run_import("direct", items_path, ratings_path)
    items = json.loads(items_path.read_text())
    ratings = [json.loads(line) for line in ratings_path.read_text().splitlines() if line.strip()]
    assert f"Imported study {study.pk}" in output
    assert study.kind == "direct_rating" and study.status == StudyStatus.CLOSED
    assert study.source == StudySource.IMPORTED
    assert study.items.count() == len(items)
    assert set(study.raters.values_list("external_id", flat=True)) == {
        r["annotator_id"] for r in ratings
    }
    answers = Answer.objects.filter(assignment__item__study=study)
    assert answers.count() == len(ratings)
    first = ratings[0]
    answer = answers.get(
        assignment__rater__external_id=first["annotator_id"],
        assignment__item__key=first["item_id"],
    )
    assert answer.label == first["score"].upper()
    assert answer.confidence == first["confidence"] and answer.note == first["rationale"]
    assert answer.time_on_item_s == first["time_spent_seconds"]
    assert answer.submitted_at.isoformat().startswith(first["timestamp"][:19])
    item = study.items.get(key=first["item_id"])
    assert item.payload["judge_score"] and item.payload["model_response"]
    assert item.completed_answers == sum(r["item_id"] == first["item_id"] for r in ratings)


def test_study_2_sample_keeps_the_side_shown_and_the_deswapped_case(client_for, researcher):
    items_path = release_file("pairwise_sample_items.sample.json")
    ratings_path = release_file("pairwise_ratings.sample.jsonl")
    study, _ = run_import("pairwise", items_path, ratings_path)
    page = client_for(researcher).get(reverse("annotation:study_detail", args=[study.pk]))
    assert page.status_code == 200 and "P03" in page.content.decode()
    ratings = [json.loads(line) for line in ratings_path.read_text().splitlines() if line.strip()]
    for rating in ratings:
        answer = Answer.objects.get(
            assignment__item__study=study,
            assignment__rater__external_id=rating["annotator_id"],
        )
        assert answer.label == rating["chosen_case"]
        assert answer.details["ab_swap"] == rating["ab_swap"]
        assert answer.display["order"][0] == ("B" if rating["ab_swap"] else "A")
        side = {"left": "1", "right": "2", "tie": "tie"}[rating["choice_side"]]
        assert answer.details["choice"] == side


def write(tmp_path, name, content) -> str:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    return str(path)


PAIR_ITEM = {
    "item_id": "u1__S_01__s3__t8",
    "case_a_response": "Thanks, bye.",
    "case_b_response": "Pack the stand last.",
    "judge_score_case_a": "FAIL",
}
PAIR_RATING = {
    "annotator_id": "P01",
    "item_id": "u1__S_01__s3__t8",
    "ab_swap": True,
    "choice_side": "left",
    "chosen_case": "B",
    "rationale": "Grounded.",
    "confidence": 4,
    "time_spent_seconds": 61.5,
    "timestamp": "2026-05-06T00:57:17.236Z",
    "server_received_at": "2026-05-06T00:57:17.332947Z",
}


def test_bad_files_are_rejected_whole_with_every_problem_named(tmp_path):
    items = write(tmp_path, "items.json", json.dumps([PAIR_ITEM, {"item_id": 3}]))
    lines = [
        {**PAIR_RATING, "chosen_case": "A"},  # left with ab_swap is B, not A
        {**PAIR_RATING, "item_id": "nope"},
        {**PAIR_RATING, "confidence": 9},
        "not json",
    ]
    ratings = write(
        tmp_path,
        "P01.jsonl",
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines),
    )
    with pytest.raises(CommandError) as caught:
        run_import("pairwise", items, ratings)
    message = str(caught.value)
    assert "items.json, $[1].item_id: Input should be a valid string" in message
    assert "items.json, $[1].case_a_response: required field is missing" in message
    assert (
        "P01.jsonl: line 1, $.chosen_case: 'A' does not follow from choice_side 'left'" in message
    )
    assert "P01.jsonl: line 2, $.item_id: 'nope' is not in the items file" in message
    assert "P01.jsonl: line 3, $.confidence: Input should be less than or equal to 5" in message
    assert "P01.jsonl: line 4, $: invalid JSON" in message
    assert not Study.objects.exists() and not Rater.objects.exists()


def test_a_rater_who_rated_twice_keeps_both_the_later_live(tmp_path):
    items = write(tmp_path, "items.json", json.dumps([PAIR_ITEM]))
    later = {**PAIR_RATING, "timestamp": "2026-05-06T01:00:00Z", "chosen_case": "B"}
    earlier = {**PAIR_RATING, "choice_side": "tie", "chosen_case": "tie"}
    ratings = write(tmp_path, "P01.jsonl", json.dumps(later) + "\n" + json.dumps(earlier) + "\n")
    study, _ = run_import("pairwise", items, ratings)
    answers = Answer.objects.filter(assignment__item__study=study).order_by("submitted_at")
    assert [a.label for a in answers] == ["tie", "B"]
    assert answers[0].retraction_reason == "superseded" and answers[1].retracted_at is None
    assert study.items.get().completed_answers == 1


def test_missing_files_and_unknown_kinds_are_clear_errors(tmp_path):
    with pytest.raises(CommandError, match="No such file"):
        run_import("direct", tmp_path / "missing.json", tmp_path / "missing.jsonl")
    with pytest.raises(StudyImportError, match="kind must be one of"):
        study_import(kind="triple", items=("x", io.BytesIO(b"[]")), ratings=[])
    empty = write(tmp_path, "items.json", "[]")
    with pytest.raises(CommandError, match="expected a non-empty JSON array"):
        run_import("direct", empty, write(tmp_path, "A01.jsonl", ""))


def test_the_admin_imports_the_same_files(client_for, admin_user, tmp_path):
    client = client_for(admin_user)
    url = reverse("admin:annotation_study_import")
    assert client.get(url).status_code == 200
    response = client.post(
        url,
        {
            "kind": "pairwise",
            "items": SimpleUploadedFile("items.json", json.dumps([PAIR_ITEM]).encode()),
            "ratings": [
                SimpleUploadedFile("P01.jsonl", json.dumps(PAIR_RATING).encode()),
                SimpleUploadedFile(
                    "P02.jsonl", json.dumps({**PAIR_RATING, "annotator_id": "P02"}).encode()
                ),
            ],
            "name": "Old pairwise",
        },
    )
    study = Study.objects.get(name="Old pairwise")
    assert response.status_code == 302 and study.raters.count() == 2
    bad = client.post(
        url,
        {
            "kind": "direct",
            "items": SimpleUploadedFile("items.json", b"{"),
            "ratings": [SimpleUploadedFile("A01.jsonl", b"not json\n")],
        },
    )
    assert "nothing was written" in bad.content.decode()
    assert Study.objects.count() == 1


def test_the_admin_import_names_the_missing_files_of_an_empty_submission(client_for, admin_user):
    """Before, an empty POST was treated as no POST: the blank form again, and not a word why."""
    response = client_for(admin_user).post(reverse("admin:annotation_study_import"), {})
    html = response.content.decode()
    assert response.status_code == 200
    assert set(response.context["form"].errors) == {"kind", "items", "ratings"}, html
    assert not Study.objects.exists()


@pytest.mark.parametrize("depth", [100, 5_000, 200_000])
def test_deeply_nested_json_is_a_form_error_naming_the_line(client_for, admin_user, depth):
    """Issue #14 (F6): nesting past the parser's limit raised RecursionError (a 500); nesting
    short of it was imported, and failed later in whatever walked it."""
    deep = "[" * depth + "]" * depth
    client = client_for(admin_user)
    url = reverse("admin:annotation_study_import")
    items = ("[\n" + json.dumps(PAIR_ITEM) + ',\n{"x": ' + deep + "}\n]").encode()
    response = client.post(
        url,
        {
            "kind": "pairwise",
            "items": SimpleUploadedFile("items.json", items),
            "ratings": [SimpleUploadedFile("P01.jsonl", json.dumps(PAIR_RATING).encode())],
        },
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert (
        "items.json: line 3: invalid JSON: nested more than 64 levels deep "
        "(PROACTBENCH_MAX_JSON_DEPTH)" in html
    )
    ratings = (json.dumps(PAIR_RATING) + '\n{"x": ' + deep + "}\n").encode()
    response = client.post(
        url,
        {
            "kind": "pairwise",
            "items": SimpleUploadedFile("items.json", json.dumps([PAIR_ITEM]).encode()),
            "ratings": [SimpleUploadedFile("P01.jsonl", ratings)],
        },
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "P01.jsonl: line 2, $: " in html and ("nested" in html)
    assert not Study.objects.exists()


def test_an_items_file_over_the_cap_is_refused(tmp_path, settings):
    data = json.dumps([PAIR_ITEM]).encode()
    settings.PROACTBENCH_MAX_FILE_BYTES = len(data) - 1
    items = write(tmp_path, "items.json", data.decode())
    ratings = write(tmp_path, "P01.jsonl", json.dumps(PAIR_RATING))
    with pytest.raises(CommandError, match=r"items.json: file is larger than"):
        run_import("pairwise", items, ratings)
    assert not Study.objects.exists()
