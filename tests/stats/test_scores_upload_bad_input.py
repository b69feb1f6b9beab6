"""The external-benchmark scores upload (/stats/benchmarks/) with bad input: empty, huge, wrongly
encoded, binary, compressed and malicious files. Each is refused with a message on the page
(HTTP 400), nothing is written, and nothing in the file is rendered as markup."""

import gzip

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from benchmark.models import ModelEndpoint
from stats.models import ExternalBenchmarkScore

pytestmark = pytest.mark.django_db

GOOD = "model,benchmark,score\nGPT-5.5,GPQA,0.71\n"


@pytest.fixture
def page(client_for, researcher):
    ModelEndpoint.objects.create(
        name="gpt-5-5", display_name="GPT-5.5", provider="replay", model_name="gpt-5-5"
    )
    client = client_for(researcher)

    def upload(data: bytes, name: str = "scores.csv"):
        return client.post(
            reverse("stats:benchmark_scores"), {"file": SimpleUploadedFile(name, data)}
        )

    return upload


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(b"", "The submitted file is empty.", id="empty"),
        pytest.param(b"\n\n  \n", "empty file: expected a header row", id="blank-lines"),
        pytest.param(GOOD.encode("utf-16"), "not UTF-8", id="utf-16"),
        pytest.param(
            "model,benchmark,score\nGPT-5.5,Café-Bench,0.5\n".encode("latin-1"),
            "not UTF-8",
            id="latin-1",
        ),
        pytest.param(gzip.compress(GOOD.encode()), "not UTF-8", id="gzip"),
        pytest.param(b"model,benchmark,score\nGPT-5.5,GP\x00QA,1\n", "NUL character", id="nul"),
        pytest.param(b"model,benchmark,score\nGPT-5.5,GPQA,1e999\n", "is not a number", id="inf"),
        pytest.param(b"model,benchmark,score\nGPT-5.5,GPQA,nan\n", "is not a number", id="nan"),
        pytest.param(
            b"model,benchmark,score\nGPT-5.5," + b"B" * 81 + b",1\n",
            "longer than 80 characters",
            id="long-name",
        ),
    ],
)
def test_bad_files_are_refused_with_a_message_and_write_nothing(page, data, message):
    response = page(data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not ExternalBenchmarkScore.objects.exists()


def test_a_byte_order_mark_is_accepted(page):
    response = page(b"\xef\xbb\xbf" + GOOD.encode())
    assert response.status_code == 302
    assert ExternalBenchmarkScore.objects.get().benchmark == "GPQA"


def test_a_huge_file_is_refused_before_it_is_read(page, settings):
    cap = settings.PROACTBENCH_MAX_SCORES_FILE_BYTES
    huge = GOOD.encode() + b"GPT-5.5,X,1\n" * (cap // 12 + 1)
    response = page(huge)
    assert response.status_code == 400
    assert "a scores file is at most 2 MB" in response.content.decode()
    assert not ExternalBenchmarkScore.objects.exists()


def test_markup_in_a_file_is_shown_as_text_never_run(page):
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    response = page(f"model,benchmark,score\n{evil},GPQA,1\n".encode())
    html = response.content.decode()
    assert response.status_code == 400
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert" in html


def test_a_benchmark_name_with_markup_is_stored_as_text_and_escaped_on_the_page(page):
    assert page(b"model,benchmark,score\nGPT-5.5,<b>Bench</b>,1\n").status_code == 302
    assert ExternalBenchmarkScore.objects.get().benchmark == "<b>Bench</b>"
    html = page(b"").content.decode()  # any later view of the page lists it
    assert "&lt;b&gt;Bench&lt;/b&gt;" in html and "<b>Bench</b>" not in html


def test_a_path_traversal_file_name_is_only_a_name(page):
    response = page(GOOD.encode(), name="../../../../tmp/evil<script>.csv")
    assert response.status_code == 302  # the name plays no part: nothing is saved as a file
    assert ExternalBenchmarkScore.objects.count() == 1


def test_the_service_refuses_a_file_over_the_cap_by_itself(settings):
    """Issue #14 (F5): the cap is in the service too, not only in the page's form."""
    import io

    from stats.services import ScoresImportError, benchmark_scores_import

    settings.PROACTBENCH_MAX_SCORES_FILE_BYTES = 10
    with pytest.raises(ScoresImportError, match="file is larger than 10 bytes"):
        benchmark_scores_import(stream=io.BytesIO(GOOD.encode()))
    assert not ExternalBenchmarkScore.objects.exists()
