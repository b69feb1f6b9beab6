"""prune_turn_images: the turn-image files no TurnImage references any more (their dialogues
deleted) are reported, and removed with --delete — originals and display copies — with their
counts and bytes; a referenced file (one still shared by another dialogue's turn) and a file
younger than the minimum age are never removed; nor is a file a scenario's image
(ScenarioTurnImage) names. The real filesystem storage, in a temp dir."""

import io
import os
import time

import pytest
from django.core.management import CommandError, call_command

from benchmark.corpus.images import ImageStore, check_image
from benchmark.corpus.importer import corpus_import
from benchmark.models import (
    Dialogue,
    ScenarioTurnImage,
    TurnImage,
    display_name_of,
    turn_image_storage,
)
from tests.benchmark.curation import scripted
from tests.factories import dialogue_record, jsonl_bytes, stream
from tests.images import embedded, image_bytes, with_images

pytestmark = pytest.mark.django_db
HOURS_AGO = time.time() - 2 * 3600


@pytest.fixture
def storage_dir(settings, tmp_path):
    settings.STORAGES = {
        **settings.STORAGES,
        "turn_images": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": tmp_path, "base_url": "/no-public-url/"},
        },
    }
    return tmp_path


def _files(root) -> set[str]:
    return {f"{folder.name}/{name}" for folder in root.iterdir() for name in os.listdir(folder)}


def _age(root) -> None:
    for name in _files(root):
        os.utime(root / name, (HOURS_AGO, HOURS_AGO))


def _prune(*args: str) -> str:
    out = io.StringIO()
    call_command("prune_turn_images", *args, stdout=out)
    return out.getvalue()


def _import(uid: str, *images: bytes) -> None:
    record = dialogue_record(uid, blueprint_id=uid.split("__")[0])
    with_images(record, {"1": [embedded(data) for data in images]})
    corpus_import(stream=stream(jsonl_bytes([record])))


def test_files_of_deleted_dialogues_are_reported_then_deleted_and_shared_ones_kept(storage_dir):
    only_a, shared, only_b = image_bytes(), image_bytes(), image_bytes()
    _import("BP_A_01_Q__style4__0123456789abcdef0123456789abcdef", only_a, shared)
    _import("BP_B_01_Q__style4__0123456789abcdef0123456789abcdef", shared, only_b)
    stored = _files(storage_dir)
    assert len(stored) == 3 * 2  # three images, each an original and a display copy
    gone = TurnImage.objects.get(sha256=check_image(only_a).sha256)
    gone_names = {gone.file.name, display_name_of(gone.file.name)}
    gone_bytes = sum((storage_dir / name).stat().st_size for name in gone_names)
    Dialogue.objects.filter(unique_id_eval__startswith="BP_A_").delete()
    _age(storage_dir)

    report = _prune()
    assert (
        f"Would delete (dry run; --delete to act): 2 orphaned file(s), {gone_bytes:,} bytes "
        "(1 in original/, 1 in display/)"
    ) in report
    assert "Kept: 4 referenced file(s), 0 orphaned file(s) younger than 60 minute(s)" in report
    assert _files(storage_dir) == stored  # a dry run removes nothing

    report = _prune("--delete")
    assert f"Deleted: 2 orphaned file(s), {gone_bytes:,} bytes" in report
    assert _files(storage_dir) == stored - gone_names
    # Every file a row still names is there and readable; the shared image among them.
    for image in TurnImage.objects.all():
        for name in (image.file.name, display_name_of(image.file.name)):
            assert turn_image_storage().exists(name), name
    assert TurnImage.objects.filter(sha256=check_image(shared).sha256).exists()
    # Idempotent.
    assert "Deleted: 0 orphaned file(s), 0 bytes" in _prune("--delete")


def test_a_young_orphan_is_kept_an_import_may_be_writing_it(storage_dir):
    data = image_bytes()
    store = ImageStore()
    store.put(data, check_image(data))  # written as an import writes, no row (yet)
    report = _prune("--delete")
    assert "Deleted: 0 orphaned file(s)" in report
    assert "2 orphaned file(s) younger than 60 minute(s)" in report
    assert len(_files(storage_dir)) == 2
    assert "Deleted: 2 orphaned file(s)" in _prune("--delete", "--min-age-minutes", "0")
    assert _files(storage_dir) == set()


def test_an_empty_storage_and_a_bad_age(storage_dir):
    assert "0 orphaned file(s), 0 bytes" in _prune()
    with pytest.raises(CommandError, match="--min-age-minutes"):
        _prune("--min-age-minutes", "-1")


def test_a_scenario_s_image_is_referenced_until_the_scenario_image_is_deleted(storage_dir):
    data = image_bytes()
    checked = check_image(data)
    ImageStore().put(data, checked)
    image = ScenarioTurnImage.objects.create(
        scenario=scripted.make_scenario(),
        turn=2,
        file=checked.name,
        sha256=checked.sha256,
        media_type=checked.media_type,
        width=checked.width,
        height=checked.height,
        byte_size=checked.byte_size,
        description="a photo of the feature cards",
    )
    stored = _files(storage_dir)
    assert stored == {checked.name, display_name_of(checked.name)}
    _age(storage_dir)

    report = _prune("--delete")
    assert "Deleted: 0 orphaned file(s), 0 bytes" in report
    assert "Kept: 2 referenced file(s)" in report
    assert _files(storage_dir) == stored

    image.delete()
    assert "Deleted: 2 orphaned file(s)" in _prune("--delete")
    assert _files(storage_dir) == set()
