"""The corpus upload in the admin (Dialogues → Import corpus) with bad input: empty, huge, wrongly
encoded, compressed and malicious files. Each is refused with its line and field on the page and
nothing written, or imported as plain text that is never rendered as markup."""

import gzip
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from benchmark.models import Dialogue, Turn
from tests.factories import dialogue_record, jsonl_bytes, records_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def upload(client_for, admin_user):
    client = client_for(admin_user)

    def post(data: bytes, name: str = "final_dialogues.jsonl", **flags):
        return client.post(
            reverse("admin:benchmark_dialogue_import"),
            {"file": SimpleUploadedFile(name, data), **flags},
        )

    return post


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(b"", "The submitted file is empty.", id="empty"),
        pytest.param(b"\n \n\t\n", "$: the file has no dialogues", id="blank-lines"),
        pytest.param(
            (json.dumps(dialogue_record(), ensure_ascii=False) + "\n").encode("latin-1", "replace"),
            "line 1, $: not valid UTF-8 (byte 0xe9",
            id="latin-1",
        ),
        pytest.param(
            (json.dumps(dialogue_record(), ensure_ascii=False) + "\n").encode("utf-16"),
            "line 1, $: file is UTF-16; save it as UTF-8",
            id="utf-16",
        ),
        pytest.param(
            gzip.compress(jsonl_bytes(records_for(1))),
            "line 1, $: not valid UTF-8",
            id="gzip-is-not-decompressed",
        ),
        pytest.param(
            b"\x00\x01\x02binary\xff\n", "line 1, $: not valid UTF-8 (byte 0xff", id="binary"
        ),
        pytest.param(b'{"a": NaN}\n', "line 1, $: invalid JSON: NaN", id="nan"),
    ],
)
def test_bad_files_are_refused_naming_the_line_and_nothing_is_written(upload, data, message):
    response = upload(data)
    assert response.status_code == 200
    html = response.content.decode()
    assert message in html, html[-3000:]
    assert Dialogue.objects.count() == 0


def test_a_byte_order_mark_is_accepted(upload):
    assert upload(b"\xef\xbb\xbf" + jsonl_bytes(records_for(2))).status_code == 302
    assert Dialogue.objects.count() == 2


def test_a_file_larger_than_memory_uploads_is_streamed_from_disk_and_imported(upload, settings):
    record = dialogue_record()
    record["notes_from_curators"] = "x" * (settings.FILE_UPLOAD_MAX_MEMORY_SIZE + 1024)
    assert upload(jsonl_bytes([record, *records_for(3)[1:]])).status_code == 302
    assert Dialogue.objects.count() == 3
    assert (
        len(
            Dialogue.objects.get(unique_id_eval=record["unique_id_eval"]).extra[
                "notes_from_curators"
            ]
        )
        > 2_000_000
    )


def test_markup_in_the_corpus_is_stored_as_text_and_shown_escaped(upload, client_for, admin_user):
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    record = dialogue_record()
    record["turn_records"][0]["user_message"] = evil
    record["turn_records"][0]["assistant_response"] = evil
    assert upload(jsonl_bytes([record])).status_code == 302
    assert Turn.objects.filter(user_message=evil).exists()
    page = client_for(admin_user).get(
        reverse("benchmark:dialogue_detail", args=[Dialogue.objects.get().pk])
    )
    html = page.content.decode()
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html


def test_markup_in_an_error_message_is_escaped(upload):
    record = dialogue_record()
    record["category_key"] = "<script>alert(1)</script>"
    html = upload(jsonl_bytes([record])).content.decode()
    assert "$.category_key" in html
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)" in html


def test_a_path_traversal_file_name_is_reduced_to_a_name_and_escaped(upload):
    html = upload(b"{\n", name="../../../etc/<b>passwd</b>.jsonl").content.decode()
    assert "line 1, $: invalid JSON" in html
    assert "../" not in html.split("was rejected")[0].rsplit(">", 1)[-1]
    assert "<b>passwd</b>" not in html


def test_many_errors_are_capped_on_the_page(upload):
    lines = "\n".join(json.dumps({"line": i}) for i in range(2000)).encode() + b"\n"
    response = upload(lines)
    html = response.content.decode()
    assert "was rejected with" in html and "… and more" in html
    assert len(html) < 500_000  # the page lists the first errors, not all of them


def test_a_record_over_the_cap_is_refused_by_its_line_and_nothing_is_written(upload, settings):
    """Issue #14 (F5): one 200 MB line was accepted (worker 291 → 1,290 MB)."""
    settings.PROACTBENCH_MAX_RECORD_BYTES = 100_000
    records = records_for(3)
    records[1]["notes_from_curators"] = "x" * 200_000
    html = upload(jsonl_bytes(records)).content.decode()
    assert "line 2, $: record is longer than 100,000 bytes (PROACTBENCH_MAX_RECORD_BYTES)" in html
    assert Dialogue.objects.count() == 0


def test_a_file_over_the_cap_is_refused_before_its_lines_are_read(upload, settings):
    data = jsonl_bytes(records_for(3))
    settings.PROACTBENCH_MAX_FILE_BYTES = len(data) - 1
    html = upload(data).content.decode()
    assert f"file is larger than {len(data) - 1:,} bytes ({len(data):,} bytes)" in html
    assert Dialogue.objects.count() == 0
