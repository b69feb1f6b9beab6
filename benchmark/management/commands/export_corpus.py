import sys
import zipfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchmark.corpus.exporter import corpus_export
from benchmark.corpus.images import EmbedImages, FolderImages, ImageWriter, ZipImages
from benchmark.models import Dialogue


def images_zip_path(out: Path) -> Path:
    """Where ``--images zip`` writes: ``corpus.jsonl`` → ``corpus.images.zip`` beside it."""
    return out.with_name(out.stem + ".images.zip")


class Command(BaseCommand):
    help = (
        "Write dialogues in the release's final_dialogues.jsonl format (to stdout, or --out). "
        "Workbench additions travel under the x_workbench key unless --official-only; turn "
        "images are embedded as base64, or written beside --out (--images folder|zip)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--out", type=Path, help="output file (default: stdout)")
        parser.add_argument(
            "--status",
            choices=["draft", "in_audit", "accepted", "rejected"],
            help="only dialogues with this audit status",
        )
        parser.add_argument("--official-only", action="store_true", help="omit the x_workbench key")
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
        if not out:
            count = corpus_export(out=sys.stdout, queryset=queryset, official_only=official_only)
            self.stderr.write(f"Wrote {count} dialogue(s)")
            return
        # Write to temporary names, then rename: a failed export never leaves half a file.
        partial = out.with_name(out.name + ".partial")
        archive_path = images_zip_path(out)
        archive_partial = archive_path.with_name(archive_path.name + ".partial")
        with partial.open("w", encoding="utf-8") as stream:
            writer: ImageWriter
            if images == "zip":
                with zipfile.ZipFile(archive_partial, "w") as archive:
                    writer = ZipImages(archive)
                    count = corpus_export(
                        out=stream, queryset=queryset, official_only=official_only, images=writer
                    )
            else:
                # Folder files are named by their content: one already there is the same image.
                writer = FolderImages(out.parent) if images == "folder" else EmbedImages()
                count = corpus_export(
                    out=stream, queryset=queryset, official_only=official_only, images=writer
                )
        if images == "zip":
            archive_partial.replace(archive_path)
        partial.replace(out)
        where = {
            "zip": f" (images in {archive_path})",
            "folder": f" (images in {out.parent / 'images'})",
        }
        self.stderr.write(f"Wrote {count} dialogue(s) to {out}{where.get(images, '')}")
