from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotation.kinds.proposal_review import DEFAULT_OVERLAP
from annotation.services.importer import StudyImportError
from annotation.services.proposals import proposal_study_import
from annotation.services.studies import StudyInputError


class Command(BaseCommand):
    help = (
        "Create an open proposal-review study from a JSONL file of contexts (events, proposed "
        "tasks with their source, models that stayed silent; docs/annotation.md) for the given "
        "annotators. Every bad line is named and nothing is written. Prints the new study's id."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="the contexts, one JSON object per line")
        parser.add_argument("--name", required=True, help="study name (annotators see it)")
        parser.add_argument(
            "--annotators", required=True, help="comma-separated usernames of the annotators"
        )
        parser.add_argument(
            "--overlap", type=int, default=DEFAULT_OVERLAP, help="annotators per context (k)"
        )
        parser.add_argument("--instructions", default="", help="shown above every context")
        parser.add_argument("--lease-minutes", type=int, default=30)
        parser.add_argument("--reason-required", action="store_true")
        parser.add_argument("--seed", type=int, default=None, help="for the hand-out order")

    def handle(self, *args, file, annotators, **options):
        names = [n.strip() for n in annotators.split(",") if n.strip()]
        users = list(get_user_model().objects.filter(username__in=names, is_active=True))
        unknown = sorted(set(names) - {u.username for u in users})
        if unknown:
            raise CommandError(f"No active user named {', '.join(unknown)}")
        try:
            with file.open("rb") as stream:
                study = proposal_study_import(
                    stream=stream,
                    source_name=file.name,
                    name=options["name"],
                    annotators=users,
                    overlap=options["overlap"],
                    instructions=options["instructions"],
                    lease_minutes=options["lease_minutes"],
                    reason_required=options["reason_required"],
                    seed=options["seed"],
                )
        except FileNotFoundError as exc:
            raise CommandError(f"No such file: {exc.filename}") from None
        except (StudyImportError, StudyInputError) as exc:
            raise CommandError(str(exc)) from None
        selection = study.selection
        self.stdout.write(
            f"Created study {study.pk} (Proposal review, open): {selection['contexts']} contexts, "
            f"{selection['proposals']} proposals, {selection['silent']} silent decisions, "
            f"k = {study.overlap}, {study.raters.count()} annotators"
        )
        self.stdout.write(str(study.pk))  # last line: the id alone, for scripts
