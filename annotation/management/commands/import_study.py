from contextlib import ExitStack
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Answer
from annotation.services.importer import KINDS, StudyImportError, study_import


class Command(BaseCommand):
    help = (
        "Import a human study of the official release as a completed (closed) study: Study 1 "
        "(--kind direct: sample_items.json + A*.jsonl) or Study 2 (--kind pairwise: "
        "pairwise/sample_items.json + P*.jsonl). Prints the new study's id."
    )

    def add_arguments(self, parser):
        parser.add_argument("--kind", required=True, choices=sorted(KINDS))
        parser.add_argument("--items", required=True, type=Path, help="the items JSON file")
        parser.add_argument("ratings", nargs="+", type=Path, help="the raters' JSONL files")
        parser.add_argument("--name", default="", help="study name")

    def handle(self, *args, kind, items, ratings, name, **options):
        try:
            with ExitStack() as stack:
                items_file = (items.name, stack.enter_context(items.open("rb")))
                rating_files = [(p.name, stack.enter_context(p.open("rb"))) for p in ratings]
                study = study_import(kind=kind, items=items_file, ratings=rating_files, name=name)
        except FileNotFoundError as exc:
            raise CommandError(f"No such file: {exc.filename}") from None
        except StudyImportError as exc:
            raise CommandError(str(exc)) from None
        answers = Answer.objects.filter(assignment__item__study=study).count()
        self.stdout.write(
            f"Imported study {study.pk} ({study.get_kind_display()}, closed): "
            f"{study.items.count()} items, {answers} ratings by {study.raters.count()} raters"
        )
        self.stdout.write(str(study.pk))  # last line: the id alone, for scripts
