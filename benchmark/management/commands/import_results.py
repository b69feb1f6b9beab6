from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchmark.corpus.parsing import CorpusImportError
from benchmark.evaluation.results_format import results_import


class Command(BaseCommand):
    help = (
        "Import the release's {model}_proactivity_bench_results.jsonl files as one completed "
        "evaluation run (the corpus must be imported first). Prints the new run's id."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument("--judge", default="GPT-5.4", help="the judge that scored them")
        parser.add_argument("--name", default="", help="run name")
        parser.add_argument(
            "--only-listed",
            action="store_true",
            help="coverage over the dialogues in the files only (default: the whole corpus)",
        )

    def handle(self, *args, paths, judge, name, only_listed, **options):
        handles = []
        try:
            handles = [(path.name, path.open("rb")) for path in paths]
            summary = results_import(
                files=handles, judge_name=judge, run_name=name, only_listed=only_listed
            )
        except FileNotFoundError as exc:
            raise CommandError(f"No such file: {exc.filename}") from None
        except CorpusImportError as exc:
            raise CommandError(str(exc)) from None
        finally:
            for _, handle in handles:
                handle.close()
        for line in summary.lines_of_text():
            self.stdout.write(line)
