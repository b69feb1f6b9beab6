"""Images a user turn carries (multimodal turns): the corpus's image parts
(``x_workbench.turn_images``, docs/corpus-format.md), checked with Pillow, stored
content-addressed in the turn-image storage, and written back on export.

Memory: one image is decoded at a time, and its bytes are let go once it is stored; a line's
parts are dropped from the parsed record as soon as its images are stored, so an import batch
holds the images' metadata only.

Nothing half-written: an import writes each image file as soon as it passes its checks
(content-addressed, so a file that already exists is the same image and is left alone), and
``ImageStore.discard`` removes the files *this* import created when the import fails or is a
dry run — which writes no file at all.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
import warnings
import zipfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from django.conf import settings
from django.core.files.base import ContentFile
from django.utils import timezone
from PIL import Image, UnidentifiedImageError

from benchmark.models import ScenarioTurnImage, TurnImage, display_name_of, turn_image_storage
from benchmark.providers.base import ImagePart

# Pillow's format name → the media type the corpus and the chat APIs use, and the file suffix.
MEDIA_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
SUFFIXES = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}
ALLOWED_TEXT = "PNG, JPEG, WebP or GIF"
SHA256_PATTERN = re.compile(r"[0-9a-f]{64}")


class ImageRefused(ValueError):
    """An image the Workbench does not take; the message says why (the caller adds where)."""


@dataclass(frozen=True)
class CheckedImage:
    sha256: str
    media_type: str
    width: int
    height: int
    byte_size: int

    @property
    def name(self) -> str:
        """The original's name in the turn-image storage: its content, never its source."""
        return f"original/{self.sha256}.{SUFFIXES[self.media_type]}"


def max_bytes() -> int:
    return settings.PROACTBENCH_IMAGE_MAX_BYTES


def max_pixels() -> int:
    return settings.PROACTBENCH_IMAGE_MAX_PIXELS


def max_per_turn() -> int:
    return settings.PROACTBENCH_IMAGE_MAX_PER_TURN


def too_large(size: int) -> str:
    return f"image is {size:,} bytes, more than {max_bytes():,} (PROACTBENCH_IMAGE_MAX_BYTES)"


def check_image(data: bytes, *, declared_type: str | None = None) -> CheckedImage:
    """Check one image's bytes: size, type (by content, and agreeing with ``declared_type``),
    pixel count before decoding (the decompression-bomb guard: ours, and Pillow's own warning
    taken as an error), then a full decode (a truncated or corrupt file fails here)."""
    if len(data) > max_bytes():
        raise ImageRefused(too_large(len(data)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(data), formats=list(MEDIA_TYPES)) as image:
                width, height = image.size
                if width * height > max_pixels():
                    raise ImageRefused(
                        f"image is {width}×{height} = {width * height:,} pixels, more than "
                        f"{max_pixels():,} (PROACTBENCH_IMAGE_MAX_PIXELS; a decompression bomb?)"
                    )
                media_type = MEDIA_TYPES[image.format or ""]
                image.load()
        except UnidentifiedImageError:
            raise ImageRefused(f"not a {ALLOWED_TEXT} image") from None
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise ImageRefused(f"decompression bomb refused: {exc}") from None
        except (OSError, SyntaxError, ValueError, EOFError) as exc:
            raise ImageRefused(f"image cannot be decoded (truncated or corrupt?): {exc}") from None
    if declared_type is not None and declared_type != media_type:
        raise ImageRefused(f"media_type says {declared_type!r} but the image is {media_type!r}")
    return CheckedImage(
        sha256=hashlib.sha256(data).hexdigest(),
        media_type=media_type,
        width=width,
        height=height,
        byte_size=len(data),
    )


def without_metadata(data: bytes) -> bytes:
    """The image re-encoded with its pixels (and colour profile) only: no EXIF, XMP, text
    chunks or comments — what people are shown, so that nothing a file carries (a camera, a
    place, a tool's or a model's name) reaches an annotator. JPEG keeps its quantisation
    tables (``quality="keep"``), so the copy looks the same."""
    with Image.open(io.BytesIO(data), formats=list(MEDIA_TYPES)) as image:
        out = io.BytesIO()
        profile = image.info.get("icc_profile")
        options: dict[str, Any] = {"icc_profile": profile} if profile else {}
        if image.format == "JPEG":
            image.save(out, "JPEG", quality="keep", subsampling="keep", **options)
        elif image.format == "PNG":
            image.save(out, "PNG", **options)
        elif image.format == "WEBP":
            animated = getattr(image, "n_frames", 1) > 1
            image.save(out, "WEBP", lossless=True, save_all=animated, **options)
        else:  # GIF: every frame, no comment extension
            image.info.pop("comment", None)
            image.save(out, "GIF", save_all=getattr(image, "n_frames", 1) > 1)
        return out.getvalue()


# --- Where a part's bytes come from ------------------------------------------------------------


class ImageSource(Protocol):
    """Where ``{"type": "image", "path": …}`` parts are read from: a folder or a zip."""

    def read(self, path: str) -> bytes: ...


def _relative(path: str) -> PurePosixPath:
    relative = PurePosixPath(path)
    if not path or relative.is_absolute() or ".." in relative.parts or "\\" in path:
        raise ImageRefused(f"path {path!r} must be relative, with / and no '..'")
    return relative


class FolderSource:
    """Paths relative to a folder (by default the JSON Lines file's own)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def read(self, path: str) -> bytes:
        target = (self.root / _relative(path)).resolve()
        if not target.is_relative_to(self.root):
            raise ImageRefused(f"path {path!r} leaves the images folder")
        try:
            size = target.stat().st_size
            if size > max_bytes():
                raise ImageRefused(too_large(size))
            return target.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ImageRefused(f"no file {path!r} in {self.root}") from None


class ZipSource:
    """Paths are members of a zip archive (sizes checked from its directory before reading)."""

    def __init__(self, archive: zipfile.ZipFile, label: str = "the zip") -> None:
        self.archive = archive
        self.label = label

    def read(self, path: str) -> bytes:
        name = str(_relative(path))
        try:
            info = self.archive.getinfo(name)
        except KeyError:
            raise ImageRefused(f"no member {path!r} in {self.label}") from None
        if info.file_size > max_bytes():
            raise ImageRefused(too_large(info.file_size))
        try:
            return self.archive.read(info)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise ImageRefused(f"cannot read {path!r} from {self.label}: {exc}") from None


class NoSource:
    def read(self, path: str) -> bytes:
        raise ImageRefused(f"path {path!r}: no images folder or zip was given with this upload")


def part_bytes(part: dict, source: ImageSource) -> bytes:
    """A part's bytes: its base64 ``data`` (size estimated before decoding), or its ``path``."""
    data = part.get("data")
    if data is not None:
        if len(data) // 4 * 3 > max_bytes() + 2:
            raise ImageRefused(too_large(len(data) // 4 * 3))
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ImageRefused("data is not valid base64") from None
    return source.read(part["path"])


# --- Storing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredImage:
    """One stored image of a parsed line: which turn, its place, what it is."""

    turn: int
    position: int
    image: CheckedImage
    alt: str


class ImageStore:
    """The files one import writes. ``write=False`` (a dry run, or a file already known to be
    rejected) checks without writing."""

    def __init__(self, *, write: bool = True) -> None:
        self.write = write
        self.created: list[str] = []

    def put(self, data: bytes, image: CheckedImage) -> None:
        if not self.write:
            return
        storage = turn_image_storage()
        display = display_name_of(image.name)
        for name, content in (
            (image.name, lambda: data),
            (display, lambda: without_metadata(data)),
        ):
            if storage.exists(name):
                continue
            saved = storage.save(name, ContentFile(content()))
            self.created.append(saved)
            if saved != name:
                # Another import stored the same content at the same moment: the storage chose
                # another name for ours; the file under the content's name is the same bytes.
                storage.delete(saved)
                self.created.remove(saved)

    def discard(self) -> None:
        """Remove the files this import created (it failed, nothing of it is kept)."""
        storage = turn_image_storage()
        for name in self.created:
            storage.delete(name)
        self.created.clear()


def store_part(data: bytes, part: dict, store: ImageStore) -> CheckedImage:
    """Check one part's bytes and store them; ImageRefused says why not."""
    image = check_image(data, declared_type=part.get("media_type"))
    expected = part.get("sha256")
    if expected is not None and expected != image.sha256:
        raise ImageRefused(f"sha256 says {expected} but the bytes hash to {image.sha256}")
    store.put(data, image)
    return image


# --- Export ----------------------------------------------------------------------------------


class ImageWriter(Protocol):
    """How an export writes a turn image: inside the line, or beside it."""

    def part(self, image: TurnImage) -> dict: ...


def _read(image: TurnImage) -> bytes:
    with turn_image_storage().open(image.file.name, "rb") as stream:
        return stream.read()


def _head(image: TurnImage) -> dict:
    return {"type": "image", "media_type": image.media_type}


def _tail(image: TurnImage) -> dict:
    return {"alt": image.alt, "sha256": image.sha256}


def embedded_part(image: ImagePart) -> dict:
    """An image part with its bytes as base64 ``data``, in the line (a curated dialogue's
    images, and ``EmbedImages``)."""
    return {
        "type": "image",
        "media_type": image.media_type,
        "data": base64.b64encode(image.data).decode("ascii"),
        "alt": image.alt,
        "sha256": image.sha256,
    }


class EmbedImages:
    """``data``: the image's bytes as base64, in the line."""

    def part(self, image: TurnImage) -> dict:
        return embedded_part(ImagePart(image.media_type, _read(image), image.sha256, image.alt))


def member_name(image: TurnImage) -> str:
    return "images/" + image.file.name.removeprefix("original/")


class FolderImages:
    """``path``: ``images/<sha256>.<ext>`` in a folder (beside the JSON Lines file)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def part(self, image: TurnImage) -> dict:
        name = member_name(image)
        target = self.root / name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(_read(image))
        return {**_head(image), "path": name, **_tail(image)}


class ZipImages:
    """``path``: ``images/<sha256>.<ext>`` in a zip archive; each content written once."""

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self.archive = archive
        self.written: set[str] = set()

    def part(self, image: TurnImage) -> dict:
        name = member_name(image)
        if name not in self.written:
            # Images are compressed already: stored, not deflated again.
            self.archive.writestr(name, _read(image), compress_type=zipfile.ZIP_STORED)
            self.written.add(name)
        return {**_head(image), "path": name, **_tail(image)}


def image_parts(turn_images: list[tuple[int, list[TurnImage]]], writer: ImageWriter) -> dict:
    """``x_workbench.turn_images``: turn number → its parts, for the turns that have images."""
    return {
        str(index): [writer.part(image) for image in images]
        for index, images in turn_images
        if images
    }


# --- Pruning ---------------------------------------------------------------------------------

PRUNED_FOLDERS = ("original", "display")


@dataclass
class PruneSummary:
    """What ``turn_images_prune`` found (and, unless a dry run, removed)."""

    orphaned: dict[str, int]  # file name → bytes: referenced by no TurnImage or ScenarioTurnImage
    recent: int = 0  # orphaned but newer than the minimum age: kept (an import may be writing)
    referenced: int = 0  # files kept because a row names them (or their original)
    deleted: bool = False

    @property
    def orphaned_bytes(self) -> int:
        return sum(self.orphaned.values())

    def by_folder(self) -> dict[str, int]:
        return {
            folder: sum(1 for name in self.orphaned if name.startswith(folder + "/"))
            for folder in PRUNED_FOLDERS
        }


def _referenced(names: set[str]) -> set[str]:
    """Of ``names`` (storage names), those a TurnImage or a ScenarioTurnImage names: its
    original, or that original's metadata-free copy."""
    originals = {"original/" + name.split("/", 1)[1] for name in names}
    named = {
        *TurnImage.objects.filter(file__in=originals).values_list("file", flat=True),
        *ScenarioTurnImage.objects.filter(file__in=originals).values_list("file", flat=True),
    }
    return {name for name in names if "original/" + name.split("/", 1)[1] in named}


def turn_images_prune(*, delete: bool = False, min_age: timedelta) -> PruneSummary:
    """Find the files in the turn-image storage that no TurnImage and no ScenarioTurnImage
    references (its original under ``original/``, or that original's copy under ``display/``)
    — left behind when their dialogues or scenario images were deleted — and, with ``delete``,
    remove them. Idempotent: a second run finds
    nothing to remove.

    Never removes a referenced file: each candidate is checked against the rows again right
    before it is deleted, so a dialogue imported meanwhile keeps its images. A file newer than
    ``min_age`` is left alone: an import (or an admin upload of a scenario image) writes its
    files before its rows commit (and a dry run writes no file)."""
    storage = turn_image_storage()
    cutoff = timezone.now() - min_age
    names: set[str] = set()
    for folder in PRUNED_FOLDERS:
        try:
            _, files = storage.listdir(folder)
        except FileNotFoundError:  # nothing stored yet
            continue
        names.update(f"{folder}/{name}" for name in files)
    referenced = _referenced(names)
    summary = PruneSummary(orphaned={}, referenced=len(referenced), deleted=delete)
    for name in sorted(names - referenced):
        if storage.get_modified_time(name) > cutoff:
            summary.recent += 1
            continue
        summary.orphaned[name] = storage.size(name)
    if delete:
        for name in list(summary.orphaned):
            if _referenced({name}):  # imported again since the listing: kept
                del summary.orphaned[name]
                summary.referenced += 1
                continue
            storage.delete(name)
    return summary
