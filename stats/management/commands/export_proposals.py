from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from stats.proposal_exports import FORMATS, ExportInputError, check_study, reward_lines


class Command(BaseCommand):
    help = (
        "Write a proposal-review study's labels as reward-model training data, JSON Lines "
        "(docs/exports.md): labels (one line per proposal: context, proposal, majority label, "
        "votes, number of annotators) or pairs (an accepted and a rejected proposal of the "
        "same context). Streamed: memory stays flat whatever the study's size."
    )

    def add_arguments(self, parser):
        parser.add_argument("what", choices=FORMATS, help="labels or pairs")
        parser.add_argument("--study", type=int, help="one study (default: every one)")
        parser.add_argument(
            "--include-excluded",
            action="store_true",
            help="count the decisions of raters the study excludes (default: left out)",
        )
        parser.add_argument("--out", type=Path, help="write here instead of standard output")

    def handle(self, *args, what, study, include_excluded, out, **options):
        try:
            check_study(study)
        except (LookupError, ExportInputError) as exc:
            raise CommandError(str(exc)) from None
        lines = reward_lines(what, study_id=study, include_excluded=include_excluded)
        if out is None:
            for chunk in lines:
                self.stdout.write(chunk, ending="")
            return
        with out.open("w", encoding="utf-8", newline="\n") as handle:
            for chunk in lines:
                handle.write(chunk)
