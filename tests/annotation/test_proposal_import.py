"""Importing contexts and proposals as an open proposal-review study (docs/annotation.md, "The
import format"): a good file through the service, the command and the admin; every bad line
named ``line N: <field>: <message>`` with nothing written; the file streamed in batches."""

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import Rater, Study, StudyItem, StudySource, StudyStatus
from annotation.services import proposals as proposals_service
from annotation.services.importer import StudyImportError
from annotation.services.studies import StudyInputError
from tests.proposal_review import SOURCES, context, import_contexts, jsonl

pytestmark = pytest.mark.django_db


def good_records(n: int = 4) -> list[dict]:
    return [
        context(
            f"ctx-{i}",
            [("a", SOURCES[0]), ("b", SOURCES[1])],
            silent=(SOURCES[2],) if i % 2 else (),
        )
        for i in range(n)
    ]


def nothing_written() -> bool:
    return not (Study.objects.exists() or StudyItem.objects.exists() or Rater.objects.exists())


def test_a_good_file_becomes_an_open_study_with_k_3_and_random_hand_out_order(make_annotators):
    users = make_annotators(3)
    records = good_records(30)
    study = import_contexts(records, users)
    assert (study.kind, study.status, study.source) == (
        "proposal_review",
        StudyStatus.OPEN,
        StudySource.CREATED,
    )
    assert study.overlap == 3  # the kind's default, as the seed's three annotators
    assert set(study.raters.values_list("user__username", flat=True)) == {u.username for u in users}
    assert study.selection | {"seed": 0} == {
        "file": "contexts.jsonl",
        "seed": 0,
        "contexts": 30,
        "proposals": 60,
        "silent": 15,
    }
    items = list(study.items.order_by("position"))
    assert sorted(i.position for i in items) == list(range(30))
    assert [i.key for i in items] != [r["context_id"] for r in records]  # shuffled
    item = study.items.get(key="ctx-1")
    assert item.required_answers == 3 and item.completed_answers == 0
    payload = item.payload
    assert payload["events"] == records[1]["events"]
    assert payload["proposals"] == records[1]["proposals"]
    assert payload["silent"] == [SOURCES[2]]
    assert sorted(payload["sides"]) == ["a", "b"]
    # The base order is random per item: both orders occur.
    assert {tuple(i.payload["sides"]) for i in items} == {("a", "b"), ("b", "a")}


def test_the_command_imports_and_prints_the_study_id(make_annotators, tmp_path):
    users = make_annotators(2)
    path = tmp_path / "contexts.jsonl"
    path.write_bytes(jsonl(good_records(3)))
    out = io.StringIO()
    call_command(
        "import_proposals",
        str(path),
        "--name",
        "Suggestions",
        "--annotators",
        ",".join(u.username for u in users),
        "--overlap",
        "2",
        stdout=out,
    )
    study = Study.objects.get(pk=int(out.getvalue().strip().splitlines()[-1]))
    assert "3 contexts, 6 proposals, 1 silent decisions, k = 2, 2 annotators" in out.getvalue()
    assert study.overlap == 2 and study.items.count() == 3


def test_the_command_names_unknown_annotators_and_a_missing_file(make_annotators, tmp_path):
    users = make_annotators(3)
    path = tmp_path / "contexts.jsonl"
    path.write_bytes(jsonl(good_records(1)))
    names = ",".join([u.username for u in users] + ["nobody-here"])
    with pytest.raises(CommandError, match="No active user named nobody-here"):
        call_command("import_proposals", str(path), "--name", "x", "--annotators", names)
    names = ",".join(u.username for u in users)
    with pytest.raises(CommandError, match="No such file"):
        call_command(
            "import_proposals", str(tmp_path / "no.jsonl"), "--name", "x", "--annotators", names
        )
    assert nothing_written()


BAD_LINES = {
    "not JSON": (b"{not json\n", "line 1: $: invalid JSON"),
    "not an object": (b"[1, 2]\n", "line 1: $: expected a JSON object (one context)"),
    "missing events": (
        {"context_id": "c", "proposals": [{"id": "a", "source": "m", "text": "t"}]},
        "line 1: events: required field is missing",
    ),
    "unknown field": (
        {**context("c", [("a", "m")]), "proposal": []},
        "line 1: proposal: unknown field",
    ),
    "a number for a text": (
        context("c", [("a", "m")]) | {"context_id": 7},
        "line 1: context_id: Input should be a valid string",
    ),
    "blank proposal": (
        context("c", [("a", "m", "   ")]),
        "line 1: proposals[0].text: must not be blank",
    ),
    "no proposals": (
        context("c", []),
        "line 1: proposals: List should have at least 1 item",
    ),
    "too many proposals": (
        context("c", [(str(n), "m") for n in range(21)]),
        "line 1: proposals: List should have at most 20 items",
    ),
    "a bad time": (
        context("c", [("a", "m")]) | {"events": [{"time": "yesterday", "text": "x"}]},
        "line 1: events[0].time: 'yesterday' is not an ISO 8601 date-time",
    ),
    "events out of order": (
        context("c", [("a", "m")])
        | {
            "events": [
                {"time": "2026-03-02T10:00:00", "text": "later"},
                {"time": "2026-03-02T09:00:00", "text": "earlier"},
            ]
        },
        "line 1: events[1].time: earlier than the event before it",
    ),
    "mixed offsets": (
        context("c", [("a", "m")])
        | {
            "events": [
                {"time": "2026-03-02T09:00:00", "text": "x"},
                {"time": "2026-03-02T10:00:00+01:00", "text": "y"},
            ]
        },
        "line 1: events: mixes times with and without a UTC offset",
    ),
    "a proposal id twice": (
        context("c", [("a", "m"), ("a", "n")]),
        "line 1: proposals[1].id: 'a' appears twice in this context",
    ),
    "silent and proposing": (
        context("c", [("a", "m")], silent=("m",)),
        "line 1: silent[0]: 'm' also proposes in this context",
    ),
    "a NUL character": (
        context("c", [("a", "m", "pack\x00it")]),
        "line 1: proposals[0].text: contains a NUL character",
    ),
    "an over-long source": (
        context("c", [("a", "m" * 101)]),
        "line 1: proposals[0].source: String should have at most 100 characters",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_a_bad_line_is_named_and_nothing_is_written(case, make_annotators):
    record, expected = BAD_LINES[case]
    users = make_annotators(3)
    bad = record if isinstance(record, bytes) else jsonl([record])
    stream = io.BytesIO(bad + jsonl(good_records(2)))
    with pytest.raises(StudyImportError) as caught:
        proposals_service.proposal_study_import(
            stream=stream, source_name="x.jsonl", name="Suggestions", annotators=users
        )
    assert any(e.startswith(expected) for e in caught.value.errors), caught.value.errors
    assert nothing_written()


def test_every_bad_line_is_reported_with_its_number(make_annotators):
    users = make_annotators(3)
    records = good_records(5)
    lines = jsonl(records).splitlines(keepends=True)
    lines[1] = b"{oops\n"
    lines[3] = jsonl([context("ctx-0", [("a", "m")])])  # ctx-0 again
    with pytest.raises(StudyImportError) as caught:
        proposals_service.proposal_study_import(
            stream=io.BytesIO(b"".join(lines)), source_name="x", name="S", annotators=users
        )
    errors = caught.value.errors
    assert errors[0].startswith("line 2: $: invalid JSON")
    assert errors[1] == "line 4: context_id: 'ctx-0' appears on an earlier line"
    assert len(errors) == 2 and nothing_written()


def test_an_error_after_written_batches_rolls_everything_back(make_annotators, monkeypatch):
    monkeypatch.setattr(proposals_service, "BATCH", 3)
    users = make_annotators(3)
    records = [*good_records(10), {"context_id": "late"}]
    with pytest.raises(StudyImportError, match="line 11: events: required field is missing"):
        import_contexts(records, users)
    assert nothing_written()


def test_a_line_over_the_record_cap_is_refused_without_reading_it(make_annotators, settings):
    settings.PROACTBENCH_MAX_RECORD_BYTES = 2_000
    users = make_annotators(3)
    records = [*good_records(1), context("long", [("a", "m", "x" * 3_000)]), *good_records(2)[1:]]
    with pytest.raises(StudyImportError) as caught:
        import_contexts(records, users)
    assert len(caught.value.errors) == 1
    assert caught.value.errors[0].startswith("line 2: $: ")
    assert "PROACTBENCH_MAX_RECORD_BYTES" in caught.value.errors[0]
    assert nothing_written()


def test_an_empty_file_and_bad_settings_are_refused(make_annotators):
    users = make_annotators(2)
    with pytest.raises(StudyImportError, match="the file has no context"):
        import_contexts([], users, overlap=2)
    with pytest.raises(StudyInputError) as caught:
        import_contexts(good_records(1), users)  # k = 3 with two annotators
    assert "3 annotators per item needs at least 3 annotators" in str(caught.value.errors)
    with pytest.raises(StudyInputError, match="Give the study a name"):
        import_contexts(good_records(1), users, overlap=2, name=" ")
    assert nothing_written()


def test_a_name_or_instructions_naming_a_model_of_the_file_is_refused(make_annotators):
    users = make_annotators(3)
    with pytest.raises(StudyImportError) as caught:
        import_contexts(
            good_records(2),
            users,
            name="Zephyr Secret Large suggestions",
            instructions="Compare with onyx.",
        )
    text = " ".join(caught.value.errors)
    assert "name: Annotators see this, and it names 'zephyr-secret-large'" in text
    assert "instructions: Annotators see this, and it names 'onyx'" in text
    assert nothing_written()


def test_the_admin_imports_a_file_and_lists_the_errors_of_a_bad_one(
    client_for, admin_user, make_annotators
):
    users = make_annotators(3)
    client = client_for(admin_user)
    url = reverse("admin:annotation_study_import_proposals")
    assert (
        "Import proposals to review"
        in client.get(reverse("admin:annotation_study_changelist")).content.decode()
    )
    form = {
        "name": "Suggestions",
        "overlap": "3",
        "lease_minutes": "30",
        "annotators": [str(u.pk) for u in users],
    }
    bad = jsonl([*good_records(1), {"context_id": "x"}])
    response = client.post(url, {**form, "file": SimpleUploadedFile("c.jsonl", bad)})
    html = response.content.decode()
    assert response.status_code == 200 and 'id="import-errors"' in html
    assert "line 2: events: required field is missing" in html
    assert nothing_written()
    response = client.post(
        url, {**form, "overlap": "4", "file": SimpleUploadedFile("c.jsonl", jsonl(good_records(2)))}
    )
    assert "4 annotators per item needs at least 4 annotators" in response.content.decode()
    response = client.post(
        url, {**form, "file": SimpleUploadedFile("c.jsonl", jsonl(good_records(2)))}
    )
    study = Study.objects.get()
    assert response.status_code == 302 and study.items.count() == 2
    assert json.loads(json.dumps(study.selection))["file"] == "c.jsonl"
