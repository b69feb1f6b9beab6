import sys
import zipfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchmark.corpus.exporter import ExportSummary, NotOfficial, corpus_export
from benchmark.corpus.images import EmbedImages, FolderImages, ImageWriter, ZipImages
from benchmark.models import Dialogue


def images_zip_path(out: Path) -> Path:
    """Where ``--images zip`` writes: ``corpus.jsonl`` → ``corpus.images.zip`` beside it."""
    return out.with_name(out.stem + ".images.zip")


class Command(BaseCommand):
    help = (
        "Write dialogues in the release's final_dialogues.jsonl format (to stdout, or --out). "
        "Workbench additions travel under the x_workbench key; turn images are embedded as "
        "base64, or written beside --out (--images folder|zip). --official-only writes what "
        "the official tools accept: no x_workbench (so no images) and no INTERVENTION triggers "
        "(a dialogue with no other trigger is left out), counted on stderr."
    )

    def add_arguments(self, parser):
        parser.add_argument("--out", type=Path, help="output file (default: stdout)")
        parser.add_argument(
            "--status",
            choices=["draft", "in_audit", "accepted", "rejected"],
            help="only dialogues with this audit status",
        )
        parser.add_argument(
            "--official-only",
            action="store_true",
            help="a file the official tools accept: without the x_workbench key (turn images "
            "go with it) and without INTERVENTION triggers; what is left out is counted on stderr",
        )
        parser.add_argument(
            "--images",
            choices=["embed", "folder", "zip"],
            default="embed",
            help="turn images: base64 in the line (embed, default); files under images/ in "
            "--out's folder (folder); or images/… inside <out stem>.images.zip beside --out "
            "(zip: import it with import_corpus --images that.zip)",
        )

    def handle(self, *args, out, status, official_only, images, **options):
        queryset = Dialogue.objects.all()
        if status:
            queryset = queryset.filter(status=status)
        if images != "embed" and not out:
            raise CommandError(f"--images {images} writes files beside --out: give --out.")
        if images != "embed" and official_only:
            raise CommandError(
                "--official-only writes no images (the official format has none): "
                f"leave out --images {images}."
            )
        if not out:
            summary = self._export(sys.stdout, queryset, official_only, EmbedImages())
            self._report(summary, "")
            return
        # Write to temporary names, then rename: a failed export never leaves half a file.
        partial = out.with_name(out.name + ".partial")
        archive_path = images_zip_path(out)
        archive_partial = archive_path.with_name(archive_path.name + ".partial")
        try:
            with partial.open("w", encoding="utf-8") as stream:
                writer: ImageWriter
                if images == "zip":
                    with zipfile.ZipFile(archive_partial, "w") as archive:
                        writer = ZipImages(archive)
                        summary = self._export(stream, queryset, official_only, writer)
                else:
                    # Folder files are named by their content: one already there is the same.
                    writer = FolderImages(out.parent) if images == "folder" else EmbedImages()
                    summary = self._export(stream, queryset, official_only, writer)
        except CommandError:
            partial.unlink(missing_ok=True)
            archive_partial.unlink(missing_ok=True)
            raise
        if images == "zip":
            archive_partial.replace(archive_path)
        partial.replace(out)
        where = {
            "zip": f" (images in {archive_path})",
            "folder": f" (images in {out.parent / 'images'})",
        }
        self._report(summary, f" to {out}{where.get(images, '')}")

    def _export(self, stream, queryset, official_only: bool, writer: ImageWriter) -> ExportSummary:
        try:
            return corpus_export(
                out=stream, queryset=queryset, official_only=official_only, images=writer
            )
        except NotOfficial as error:
            # To --out nothing is left (handle removes the partial files); to stdout the lines
            # before this dialogue are out already.
            done = "Stopped after the lines above" if stream is sys.stdout else "Nothing written"
            raise CommandError(f"{done}: {error}") from None

    def _report(self, summary: ExportSummary, where: str) -> None:
        self.stderr.write(f"Wrote {summary.dialogues} dialogue(s){where}")
        if left_out := summary.left_out_text():
            self.stderr.write(f"Official format: {left_out}.")
