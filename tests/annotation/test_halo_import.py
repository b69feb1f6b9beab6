"""HALO checkpoints from a JSON Lines file (docs/annotation.md, "HALO checkpoints file"): a good
file becomes an open study whose workspace shows the events and the replies (blind), the
pre-fill follows the record's level, its action, or the text; every bad line is named and
nothing is written; the command and the admin upload do the same."""

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import Rater, Study, StudyItem
from annotation.services.checkpoints import checkpoints_import
from annotation.services.importer import StudyImportError
from annotation.services.studies import StudyInputError
from tests.annotation.test_blinding import assert_blind_of
from tests.annotation.test_workspace_pages import HTMX, token_of

pytestmark = pytest.mark.django_db

SOURCES = ("orchid-agent-7", "basalt-assist-2")


def checkpoint(n: int, **extra) -> dict:
    return {
        "checkpoint_id": f"home-03/s{n}/e4",
        "context": [
            {"time": "2026-03-02 09:14", "actor": "calendar", "text": "Dentist moved to Friday."},
            {"time": "2026-03-02 11:40", "actor": "email", "text": "School play is Friday 4pm."},
        ],
        "responses": [
            {
                "source": SOURCES[0],
                "text": "Heads up: Friday now has both the dentist and the school play.",
                "action": "notify_user",
                "reasoning_tokens": 51209,
                "retrieval_rounds": 2,
            },
            {
                "source": SOURCES[1],
                "text": "I moved the dentist to Monday.",
                "level": "L3",
                "reasoning_tokens": 88017,
            },
        ],
        "need_type": "risk",
        **extra,
    }


def jsonl(*records) -> io.BytesIO:
    return io.BytesIO(
        b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in records)
    )


def test_a_good_file_becomes_an_open_study_with_its_checkpoints(make_annotators):
    users = make_annotators(2)
    study = checkpoints_import(
        stream=jsonl(checkpoint(1), checkpoint(2, responses=[{"source": "x", "text": "Okay."}])),
        file_name="checkpoints.jsonl",
        name="Diagnose the home checkpoints",
        annotators=users,
        overlap=2,
        seed=4,
    )
    assert study.kind == "halo" and study.status == "open" and study.run is None
    assert study.selection["imported_from"] == "checkpoints.jsonl"
    first = study.items.get(key="home-03/s1/e4")
    payload = first.payload
    assert payload["meta"] == {"need_type": "risk"}
    assert payload["texts"]["r2"] == "I moved the dentist to Monday."
    assert payload["context"][1] == {
        "text": "School play is Friday 4pm.",
        "time": "2026-03-02 11:40",
        "actor": "email",
    }
    one, two = payload["sources"]
    assert (one["source"], one["reasoning_tokens"], one["retrieval_rounds"]) == (
        SOURCES[0],
        51209,
        2,
    )
    assert (two["retrieval_rounds"], one["unit"]) == (None, None)
    # The pre-fill: the command's words (notify → L1), the record's own level (L3), and for the
    # second checkpoint's "Okay." the text rule (short, nothing raised → L0).
    assert one["suggested"]["level"] == "L1" and "notify_user" in one["suggested"]["reason"]
    assert two["suggested"] == {"level": "L3", "reason": "The imported record gives this level."}
    assert study.items.get(key="home-03/s2/e4").payload["sources"][0]["suggested"]["level"] == "L0"
    assert set(Rater.objects.filter(study=study).values_list("user__username", flat=True)) == {
        u.username for u in users
    }


def test_the_workspace_of_an_imported_checkpoint_shows_the_events_and_hides_the_sources(
    make_annotators, client
):
    users = make_annotators(1)
    study = checkpoints_import(
        stream=jsonl(checkpoint(1)),
        file_name="c.jsonl",
        name="Diagnose",
        annotators=users,
        overlap=1,
    )
    client.force_login(users[0])
    response = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    html = response.content.decode()
    assert '<ol class="timeline card">' in html and "School play is Friday 4pm." in html
    assert "I moved the dentist to Monday." in html and "Reply 2" in html
    assert_blind_of(response, [*SOURCES, "51209", "88017", "home-03/s1/e4", "risk"], "imported")
    assert token_of(response)


def test_every_bad_line_is_named_and_nothing_is_written(make_annotators):
    users = make_annotators(1)
    bad = jsonl(
        checkpoint(1),
        b"{not json",
        ["a list"],
        checkpoint(1),  # the same id again
        checkpoint(3, responses=[{"source": "a", "text": "x"}, {"source": "a", "text": "y"}]),
        checkpoint(4, responses=[{"source": "a", "text": "x", "level": "L7"}]),
        checkpoint(5, responses=[{"source": "a", "text": "x", "reasoning_tokens": -1}]),
        checkpoint(6, responses=[{"source": "a", "text": "x", "retrieval_round": 2}]),
        checkpoint(7, context=[]),
        {"checkpoint_id": "nul", "context": [{"text": "a\u0000b"}], "responses": []},
        checkpoint(9, responses=[{"source": "a"}]),
    )
    with pytest.raises(StudyImportError) as rejected:
        checkpoints_import(
            stream=bad, file_name="bad.jsonl", name="Bad", annotators=users, overlap=1
        )
    errors = rejected.value.errors
    expected = [
        ("line 2, $:", "invalid JSON"),
        ("line 3, $:", "expected a JSON object, got list"),
        ("line 4, $.checkpoint_id:", "'home-03/s1/e4' is already on line 1"),
        ("line 5, $.responses[1].source:", "'a' already answered at this checkpoint"),
        ("line 6, $.responses[0].level:", "L0"),
        ("line 7, $.responses[0].reasoning_tokens:", "greater than or equal to 0"),
        ("line 8, $.responses[0].retrieval_round:", "Extra inputs are not permitted"),
        ("line 9, $.context:", "at least 1 item"),
        ("line 10, $.context[0].text:", "NUL"),
        ("line 11, $.responses[0].text:", "required field is missing"),
    ]
    for where, what in expected:
        assert any(e.startswith(where) and what in e for e in errors), (where, what, errors)
    assert len(errors) == len(expected)
    assert not Study.objects.exists() and not StudyItem.objects.exists()


def test_an_empty_file_and_a_name_that_names_a_source_are_refused(make_annotators):
    users = make_annotators(1)
    with pytest.raises(StudyImportError, match="empty.jsonl: no checkpoint in the file"):
        checkpoints_import(
            stream=io.BytesIO(b"\n"), file_name="empty.jsonl", name="E", annotators=users
        )
    with pytest.raises(StudyInputError) as refused:
        checkpoints_import(
            stream=jsonl(checkpoint(1)),
            file_name="c.jsonl",
            name="Is Orchid too eager?",
            annotators=users,
            overlap=1,
        )
    assert "name" in refused.value.errors and "orchid" in str(refused.value)
    assert not Study.objects.exists()


def test_the_command_creates_the_study_and_prints_its_id(make_annotators, tmp_path):
    users = make_annotators(2)
    path = tmp_path / "checkpoints.jsonl"
    path.write_bytes(jsonl(checkpoint(1), checkpoint(2)).getvalue())
    out = io.StringIO()
    call_command(
        "import_halo",
        str(path),
        "--name",
        "Diagnose",
        "--annotators",
        ",".join(u.username for u in users),
        "--overlap",
        "2",
        stdout=out,
    )
    study = Study.objects.get()
    assert out.getvalue().strip().splitlines()[-1] == str(study.pk)
    assert "2 checkpoints for 2 annotators" in out.getvalue()
    path.write_bytes(jsonl(checkpoint(3, context="not a list")).getvalue())
    with pytest.raises(CommandError, match=r"line 1, \$\.context"):
        call_command("import_halo", str(path), "--name", "X", "--annotators", users[0].username)
    with pytest.raises(CommandError, match="Not an active annotator: nobody"):
        call_command("import_halo", str(path), "--name", "X", "--annotators", "nobody")
    assert Study.objects.count() == 1


def test_the_admin_uploads_checkpoints_and_lists_the_errors(
    make_annotators, client_for, admin_user
):
    users = make_annotators(1)
    client = client_for(admin_user)
    url = reverse("admin:annotation_study_import_halo")
    assert "Import HALO checkpoints" in client.get(url).content.decode()
    upload = io.BytesIO(jsonl(checkpoint(1), b"[1]").getvalue())
    upload.name = "c.jsonl"
    page = client.post(
        url, {"checkpoints": upload, "name": "D", "annotators": [users[0].pk], "overlap": "1"}
    )
    assert page.status_code == 200
    assert "line 2, $: expected a JSON object, got list" in page.content.decode()
    assert not Study.objects.exists()
    upload = io.BytesIO(jsonl(checkpoint(1)).getvalue())
    upload.name = "c.jsonl"
    done = client.post(
        url, {"checkpoints": upload, "name": "D", "annotators": [users[0].pk], "overlap": "1"}
    )
    study = Study.objects.get()
    assert done.status_code == 302 and done.url == reverse(
        "admin:annotation_study_change", args=[study.pk]
    )
    listing = client.get(reverse("admin:annotation_study_changelist")).content.decode()
    assert "Import HALO checkpoints" in listing
