"""Turn images in the corpus: import and export round trips (embedded, folder, zip), Pillow's
refusals naming the line and field, and nothing left behind by a rejected import."""

import base64
import io
import json
import zipfile
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import override_settings
from PIL import Image

from benchmark.corpus.exporter import corpus_export
from benchmark.corpus.images import FolderSource, without_metadata
from benchmark.corpus.importer import CorpusImportError, corpus_import
from benchmark.models import Dialogue, TurnImage, turn_image_storage
from tests.factories import dialogue_record, jsonl_bytes, stream
from tests.images import embedded, image_bytes, with_images

pytestmark = pytest.mark.django_db


def _record(uid: str = "BP_IMG_01", **turn_images) -> dict:
    return with_images(
        dialogue_record(uid), {k.removeprefix("t"): v for k, v in turn_images.items()}
    )


def _exported_images(
    lines: list[dict], root=None, archive=None
) -> dict[tuple[str, int, int], bytes]:
    """(dialogue, turn, position) → the exported image's bytes, wherever the export put them."""
    found = {}
    for record in lines:
        for turn, parts in record["x_workbench"].get("turn_images", {}).items():
            for position, part in enumerate(parts):
                if "data" in part:
                    data = base64.b64decode(part["data"])
                elif archive is not None:
                    data = archive.read(part["path"])
                else:
                    data = (root / part["path"]).read_bytes()
                found[(record["unique_id_eval"], int(turn), position)] = data
    return found


def _read_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def corpus():
    """Two dialogues: three images on the first (PNG and JPEG on turn 1, a GIF on turn 3),
    a WebP on the second's turn 2; returns (records, expected bytes by place)."""
    png, jpeg = image_bytes("PNG"), image_bytes("JPEG", quality=85)
    gif, webp = image_bytes("GIF"), image_bytes("WEBP")
    records = [
        _record(
            "BP_IMG_01",
            t1=[embedded(png, alt="a mug behind a box"), embedded(jpeg, "image/jpeg")],
            t3=[embedded(gif, "image/gif", alt="a sketch")],
        ),
        _record("BP_IMG_02", t2=[embedded(webp, "image/webp", alt="blurry sign")]),
    ]
    expected = {
        ("BP_IMG_01", 1, 0): png,
        ("BP_IMG_01", 1, 1): jpeg,
        ("BP_IMG_01", 3, 0): gif,
        ("BP_IMG_02", 2, 0): webp,
    }
    return records, expected


def test_embedded_images_round_trip_byte_for_byte(corpus):
    records, expected = corpus
    summary = corpus_import(stream=stream(jsonl_bytes(records)))
    assert summary.images == 4
    image = TurnImage.objects.get(
        turn__dialogue__unique_id_eval="BP_IMG_01", turn__index=1, position=0
    )
    assert (image.media_type, image.width, image.height, image.alt) == (
        "image/png",
        24,
        16,
        "a mug behind a box",
    )
    assert image.file.name == f"original/{image.sha256}.png"
    out = io.StringIO()
    corpus_export(out=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert _exported_images(lines) == expected
    part = lines[0]["x_workbench"]["turn_images"]["1"][0]
    assert part["alt"] == "a mug behind a box" and part["media_type"] == "image/png"
    # Importing the export changes nothing, and exports the same again.
    again = corpus_import(stream=stream(out.getvalue().encode()))
    assert again.unchanged == 2 and TurnImage.objects.count() == 4
    second = io.StringIO()
    corpus_export(out=second)
    assert second.getvalue() == out.getvalue()


@pytest.mark.parametrize("mode", ["folder", "zip"])
def test_folder_and_zip_exports_round_trip_through_import(corpus, tmp_path, mode):
    records, expected = corpus
    corpus_import(stream=stream(jsonl_bytes(records)))
    out = tmp_path / "corpus.jsonl"
    call_command("export_corpus", out=out, images=mode)
    lines = _read_lines(out)
    assert all(
        "data" not in p
        for r in lines
        for ps in r["x_workbench"]["turn_images"].values()
        for p in ps
    )
    if mode == "zip":
        archive_path = tmp_path / "corpus.images.zip"
        with zipfile.ZipFile(archive_path) as archive:
            assert _exported_images(lines, archive=archive) == expected
    else:
        assert _exported_images(lines, root=tmp_path) == expected
    # A fresh database: the dialogues go, the files come back from the export.
    Dialogue.objects.all().delete()
    assert TurnImage.objects.count() == 0
    options = {"images": tmp_path / "corpus.images.zip"} if mode == "zip" else {}
    call_command("import_corpus", out, stdout=io.StringIO(), **options)
    embedded_again = io.StringIO()
    corpus_export(out=embedded_again)
    again = [json.loads(line) for line in embedded_again.getvalue().splitlines()]
    assert _exported_images(again) == expected


def _rejected(records, **kwargs) -> list[str]:
    with pytest.raises(CorpusImportError) as info:
        corpus_import(stream=stream(jsonl_bytes(records)), **kwargs)
    return [str(e) for e in info.value.errors]


def _bomb() -> bytes:
    out = io.BytesIO()
    Image.new("1", (6000, 6000)).save(out, "PNG")  # 36 M pixels in a few kilobytes
    return out.getvalue()


@pytest.mark.parametrize(
    ("part", "message"),
    [
        (embedded(image_bytes("GIF", size=(120, 90))[:2000], "image/gif"), "cannot be decoded"),
        (embedded(b"plain text, not an image"), "not a PNG, JPEG, WebP or GIF image"),
        (embedded(image_bytes("BMP"), "image/png"), "not a PNG, JPEG, WebP or GIF image"),
        (embedded(image_bytes("PNG", size=(200, 200))[:300]), "truncated"),
        (embedded(_bomb()), "PROACTBENCH_IMAGE_MAX_PIXELS"),
        (embedded(image_bytes("JPEG"), "image/png"), "but the image is 'image/jpeg'"),
        ({"type": "image", "data": "not base64!"}, "not valid base64"),
        ({"type": "image", "path": "../secrets.png"}, "must be relative"),
    ],
)
def test_bad_images_are_refused_naming_line_and_field(part, message):
    records = [_record("BP_IMG_OK", t1=[embedded(image_bytes())]), _record("BP_IMG_BAD", t2=[part])]
    field = "data" if "data" in part else "path"
    errors = _rejected(records, images=FolderSource(Path(__file__).parent))
    assert len(errors) == 1
    assert errors[0].startswith(f"line 2, $.x_workbench.turn_images.2[0].{field}: ")
    assert message in errors[0]
    assert not Dialogue.objects.exists() and not TurnImage.objects.exists()


@override_settings(PROACTBENCH_IMAGE_MAX_BYTES=2000)
def test_an_image_over_the_byte_cap_is_refused_before_decoding():
    (error,) = _rejected([_record(t1=[embedded(image_bytes(size=(64, 64)))])])
    assert error.startswith("line 1, $.x_workbench.turn_images.1[0].data: image is ")
    assert "PROACTBENCH_IMAGE_MAX_BYTES" in error


@override_settings(PROACTBENCH_IMAGE_MAX_PER_TURN=2)
def test_too_many_images_on_one_turn_and_images_on_no_turn_are_refused():
    parts = [embedded(image_bytes()) for _ in range(3)]
    errors = _rejected([with_images(dialogue_record(), {"1": parts, "99": parts[:1]})])
    assert "line 1, $.x_workbench.turn_images.1: 3 images, more than 2" in errors[0]
    assert any(e.startswith("line 1, $.x_workbench.turn_images.99: no turn") for e in errors)


def test_schema_refuses_a_part_with_both_or_neither_source():
    errors = _rejected([_record(t1=[{"type": "image", "data": "AA==", "path": "a.png"}])])
    assert errors[0].startswith("line 1, $.x_workbench.turn_images.1[0]")
    assert "exactly one of data (base64) or path" in errors[0]


def test_a_rejected_import_leaves_no_image_file_behind():
    good = image_bytes()
    records = [
        _record("BP_IMG_GOOD", t1=[embedded(good)]),
        _record("BP_IMG_BAD", t1=[embedded(b"nope")]),
    ]
    _rejected(records)
    import hashlib

    sha = hashlib.sha256(good).hexdigest()
    storage = turn_image_storage()
    assert not storage.exists(f"original/{sha}.png")
    assert not storage.exists(f"display/{sha}.png")


def test_a_dry_run_writes_no_image_file():
    good = image_bytes()
    summary = corpus_import(
        stream=stream(jsonl_bytes([_record(t1=[embedded(good)])])), dry_run=True
    )
    import hashlib

    assert summary.dialogues == 1
    assert not turn_image_storage().exists(f"original/{hashlib.sha256(good).hexdigest()}.png")


def test_an_image_already_stored_survives_a_rejected_import_that_names_it_again():
    good = image_bytes()
    corpus_import(stream=stream(jsonl_bytes([_record("BP_IMG_KEEP", t1=[embedded(good)])])))
    image = TurnImage.objects.get()
    _rejected(
        [_record("BP_IMG_NEW", t1=[embedded(good)]), _record("BP_IMG_BAD", t1=[embedded(b"x")])]
    )
    assert turn_image_storage().exists(image.file.name)
    assert turn_image_storage().exists(image.display_name)


def test_reimport_with_fewer_images_drops_the_rest():
    first, second = image_bytes(), image_bytes()
    corpus_import(stream=stream(jsonl_bytes([_record(t1=[embedded(first), embedded(second)])])))
    corpus_import(stream=stream(jsonl_bytes([_record(t1=[embedded(second)])])))
    (image,) = TurnImage.objects.all()
    assert image.position == 0
    with turn_image_storage().open(image.file.name) as f:
        assert f.read() == second


def test_the_display_copy_carries_no_metadata():
    exif = Image.Exif()
    exif[0x010F] = "Secret Camera Maker"  # Make
    exif[0x0131] = "model gpt-x condition rubric_injected"  # Software
    source = image_bytes("JPEG", exif=exif.tobytes(), quality=90)
    png = io.BytesIO()
    from PIL import PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "written by model gpt-x")
    Image.open(io.BytesIO(image_bytes())).save(png, "PNG", pnginfo=info, exif=exif.tobytes())
    for data in (source, png.getvalue()):
        assert b"gpt-x" in data
        clean = without_metadata(data)
        assert b"gpt-x" not in clean and b"Secret Camera" not in clean
        with Image.open(io.BytesIO(clean)) as image:
            assert not image.getexif() and image.size == Image.open(io.BytesIO(data)).size


def test_the_admin_upload_reads_image_paths_from_the_zip_beside_the_file(client_for, admin_user):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    data = image_bytes()
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("images/one.png", data)
    record = _record(t1=[{"type": "image", "path": "images/one.png", "alt": "zipped"}])
    client = client_for(admin_user)
    response = client.post(
        reverse("admin:benchmark_dialogue_import"),
        {
            "file": SimpleUploadedFile("final_dialogues.jsonl", jsonl_bytes([record])),
            "images": SimpleUploadedFile("corpus.images.zip", archive.getvalue()),
        },
    )
    assert response.status_code == 302
    image = TurnImage.objects.get()
    assert image.alt == "zipped"
    with turn_image_storage().open(image.file.name) as stored:
        assert stored.read() == data
    # Without the zip, the path cannot be read: the error names the line and field.
    Dialogue.objects.all().delete()
    response = client.post(
        reverse("admin:benchmark_dialogue_import"),
        {"file": SimpleUploadedFile("final_dialogues.jsonl", jsonl_bytes([record]))},
    )
    assert response.status_code == 200
    assert "line 1, $.x_workbench.turn_images.1[0].path" in response.content.decode()
    assert not Dialogue.objects.exists()
