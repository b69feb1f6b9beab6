from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.services.battles import battles_import
from annotation.services.importer import StudyImportError


class Command(BaseCommand):
    help = (
        "Import battles in the public Chatbot Arena format (JSONL: model_a, model_b, winner, "
        "optional judge, question_id, turn, tstamp) as a closed arena study. Every bad line is "
        "reported and nothing is written. Prints the new study's id."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="the battles file (JSON Lines)")
        parser.add_argument("--name", default="", help="study name (default: from the file)")

    def handle(self, *args, file, name, **options):
        try:
            with file.open("rb") as stream:
                result = battles_import(stream=stream, source_name=file.name, name=name)
        except FileNotFoundError as exc:
            raise CommandError(f"No such file: {exc.filename}") from None
        except StudyImportError as exc:
            raise CommandError(str(exc)) from None
        study = result.study
        superseded = f", {result.superseded} superseded" if result.superseded else ""
        self.stdout.write(
            f"Imported study {study.pk} (arena, closed): {result.battles} battles{superseded}, "
            f"{result.items} items, {result.judges} judges"
        )
        self.stdout.write(str(study.pk))  # last line: the id alone, for scripts
