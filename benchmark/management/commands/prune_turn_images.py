from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from benchmark.corpus.images import turn_images_prune


class Command(BaseCommand):
    help = (
        "Find the files in the turn-image storage that no turn image and no scenario image "
        "references any more (both the original/ and the display/ copies; left behind when "
        "dialogues or scenario images are deleted) and "
        "report how many and how many bytes. A dry run unless --delete. A file still "
        "referenced is never removed, nor one younger than --min-age-minutes (an import may "
        "be writing it)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--delete", action="store_true", help="remove the orphaned files (default: report)"
        )
        parser.add_argument(
            "--min-age-minutes",
            type=int,
            default=60,
            help="leave files younger than this alone (default 60)",
        )

    def handle(self, *args, delete, min_age_minutes, **options):
        if min_age_minutes < 0:
            raise CommandError("--min-age-minutes must be 0 or more.")
        summary = turn_images_prune(delete=delete, min_age=timedelta(minutes=min_age_minutes))
        folders = ", ".join(
            f"{count} in {folder}/" for folder, count in summary.by_folder().items()
        )
        verb = "Deleted" if delete else "Would delete (dry run; --delete to act)"
        self.stdout.write(
            f"{verb}: {len(summary.orphaned)} orphaned file(s), {summary.orphaned_bytes:,} "
            f"bytes ({folders})"
        )
        self.stdout.write(
            f"Kept: {summary.referenced} referenced file(s), {summary.recent} orphaned file(s) "
            f"younger than {min_age_minutes} minute(s)"
        )
