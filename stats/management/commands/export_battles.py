from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from stats.exports import RAW_EXPORTS, jsonl_chunks


class Command(BaseCommand):
    help = (
        "Write an arena or pairwise study's battles in the public Chatbot Arena format (JSON "
        "Lines: model_a, model_b, winner, judge, question_id, turn, tstamp; and study_id), the "
        "same lines as /api/v1/exports/battles.jsonl?study=ID. import_battles reads them back."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", type=int, required=True, help="the study's id")
        parser.add_argument(
            "--include-excluded",
            action="store_true",
            help="count the raters the study excludes (default: left out)",
        )
        parser.add_argument("--out", type=Path, help="write here instead of standard output")

    def handle(self, *args, study, include_excluded, out, **options):
        export = RAW_EXPORTS["battles"]
        filters = {"study": study, "include_excluded": include_excluded}
        try:
            if export.check is not None:
                export.check(filters)
        except (LookupError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        chunks = jsonl_chunks(export.header, export.rows(filters))
        if out is None:
            for chunk in chunks:
                self.stdout.write(chunk, ending="")
            return
        try:
            with out.open("w", encoding="utf-8", newline="\n") as stream:
                for chunk in chunks:
                    stream.write(chunk)
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc.strerror}") from exc
        self.stderr.write(f"Wrote the battles of study {study} to {out}")
