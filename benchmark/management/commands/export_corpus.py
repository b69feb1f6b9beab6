import sys
from pathlib import Path

from django.core.management.base import BaseCommand

from benchmark.corpus.exporter import corpus_export
from benchmark.models import Dialogue


class Command(BaseCommand):
    help = (
        "Write dialogues in the release's final_dialogues.jsonl format (to stdout, or --out). "
        "Workbench additions travel under the x_workbench key unless --official-only."
    )

    def add_arguments(self, parser):
        parser.add_argument("--out", type=Path, help="output file (default: stdout)")
        parser.add_argument(
            "--status",
            choices=["draft", "in_audit", "accepted", "rejected"],
            help="only dialogues with this audit status",
        )
        parser.add_argument("--official-only", action="store_true", help="omit the x_workbench key")

    def handle(self, *args, out, status, official_only, **options):
        queryset = Dialogue.objects.all()
        if status:
            queryset = queryset.filter(status=status)
        if out:
            # Write to a temporary name, then rename: a failed export never leaves half a file.
            partial = out.with_name(out.name + ".partial")
            with partial.open("w", encoding="utf-8") as stream:
                count = corpus_export(out=stream, queryset=queryset, official_only=official_only)
            partial.replace(out)
            self.stderr.write(f"Wrote {count} dialogue(s) to {out}")
        else:
            count = corpus_export(out=sys.stdout, queryset=queryset, official_only=official_only)
            self.stderr.write(f"Wrote {count} dialogue(s)")
