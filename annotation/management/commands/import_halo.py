from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotation.services.checkpoints import checkpoints_import
from annotation.services.importer import StudyImportError
from annotation.services.studies import StudyInputError
from core.roles import ANNOTATOR


class Command(BaseCommand):
    help = (
        "Create an open HALO diagnosis study from a checkpoints file (JSON Lines: checkpoint_id, "
        "context, responses; docs/annotation.md, 'HALO checkpoints file') for the given "
        "annotators, k per checkpoint. Any problem rejects the whole file, every one listed "
        "as 'line N, <json path>: <message>'; nothing is written. Prints the new study's id."
    )

    def add_arguments(self, parser):
        parser.add_argument("checkpoints", type=Path, help="the checkpoints JSONL file")
        parser.add_argument("--name", required=True, help="study name (annotators see it)")
        parser.add_argument(
            "--annotators", required=True, help="usernames, comma-separated (annotators)"
        )
        parser.add_argument("--overlap", type=int, default=2, help="k: annotators per checkpoint")
        parser.add_argument("--instructions", default="", help="shown above every checkpoint")
        parser.add_argument("--max-items", type=int, default=None, help="a seeded sample")
        parser.add_argument("--seed", type=int, default=None, help="for the sample and order")

    def handle(self, *args, checkpoints, name, annotators, overlap, **options):
        usernames = [u.strip() for u in annotators.split(",") if u.strip()]
        users = list(
            get_user_model().objects.filter(
                username__in=usernames, is_active=True, groups__name=ANNOTATOR
            )
        )
        missing = sorted(set(usernames) - {u.username for u in users})
        if missing:
            raise CommandError(f"Not an active annotator: {', '.join(missing)}")
        try:
            with checkpoints.open("rb") as stream:
                study = checkpoints_import(
                    stream=stream,
                    file_name=checkpoints.name,
                    name=name,
                    annotators=users,
                    overlap=overlap,
                    instructions=options["instructions"],
                    max_items=options["max_items"],
                    seed=options["seed"],
                )
        except FileNotFoundError as exc:
            raise CommandError(f"No such file: {exc.filename}") from None
        except StudyImportError as exc:
            raise CommandError(str(exc)) from None
        except StudyInputError as exc:
            raise CommandError(f"study refused: {exc}") from None
        self.stdout.write(
            f"Created study {study.pk} ({study.get_kind_display()}, open): "
            f"{study.items.count()} checkpoints for {study.raters.count()} annotators"
        )
        self.stdout.write(str(study.pk))  # last line: the id alone, for scripts
