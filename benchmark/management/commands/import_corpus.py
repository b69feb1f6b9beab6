import zipfile
from contextlib import ExitStack
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchmark.corpus.images import FolderSource, ImageSource, ZipSource
from benchmark.corpus.importer import CorpusImportError, Enrichment, corpus_import
from benchmark.corpus.sidefiles import read_blueprints, read_tasks


class Command(BaseCommand):
    help = (
        "Import final_dialogues.jsonl from the ProactBench release (or an export of this app). "
        "The whole file is checked first: any structural error rejects it and nothing is written."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="final_dialogues.jsonl")
        parser.add_argument("--tasks", type=Path, help="tasks.jsonl, to enrich scenarios")
        parser.add_argument(
            "--blueprints", type=Path, help="blueprints.jsonl, for roadmaps and known anchors"
        )
        parser.add_argument(
            "--images",
            type=Path,
            help="folder or .zip that image parts' paths are relative to (default: the "
            "dialogues file's folder)",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="check and report, write nothing"
        )
        parser.add_argument(
            "--strict", action="store_true", help="treat protocol findings as errors"
        )

    def handle(self, *args, path: Path, tasks, blueprints, images, dry_run, strict, **options):
        enrichment = Enrichment()
        try:
            stack = ExitStack()
            if tasks:
                with tasks.open("rb") as stream:
                    n = read_tasks(stream, enrichment, source=str(tasks))
                self.stdout.write(f"Read {n} scenario(s) from {tasks}")
            if blueprints:
                with blueprints.open("rb") as stream:
                    n = read_blueprints(stream, enrichment, source=str(blueprints))
                self.stdout.write(f"Read {n} blueprint(s) from {blueprints}")
            source: ImageSource
            if images is not None and images.suffix.lower() == ".zip":
                try:
                    source = ZipSource(stack.enter_context(zipfile.ZipFile(images)), str(images))
                except zipfile.BadZipFile as exc:
                    raise CommandError(f"{images} is not a zip archive: {exc}") from None
            elif images is not None and not images.is_dir():
                raise CommandError(f"--images {images}: not a folder or a .zip file")
            else:
                source = FolderSource(images or path.parent)
            with stack, path.open("rb") as stream:
                summary = corpus_import(
                    stream=stream,
                    source=str(path),
                    dry_run=dry_run,
                    strict=strict,
                    enrichment=enrichment,
                    images=source,
                )
        except FileNotFoundError as exc:
            raise CommandError(f"No such file: {exc.filename}") from None
        except CorpusImportError as exc:
            raise CommandError(str(exc)) from None
        for line in summary.lines_of_text():
            self.stdout.write(line)
