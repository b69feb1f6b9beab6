from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchmark.evaluation.results_format import results_export
from benchmark.models import EvaluationRun


class Command(BaseCommand):
    help = (
        "Write a run's results in the release's format, one file per model: "
        "OUT_DIR/{model}_proactivity_bench_results.jsonl"
    )

    def add_arguments(self, parser):
        parser.add_argument("run", type=int, help="run id")
        parser.add_argument("--out-dir", type=Path, default=Path("."))
        parser.add_argument(
            "--condition", default="vanilla", choices=["vanilla", "rubric_injected"]
        )

    def handle(self, *args, run, out_dir, condition, **options):
        try:
            evaluation_run = EvaluationRun.objects.get(pk=run)
        except EvaluationRun.DoesNotExist:
            raise CommandError(f"No run with id {run}") from None
        out_dir.mkdir(parents=True, exist_ok=True)
        for endpoint in evaluation_run.endpoints.order_by("name"):
            target = out_dir / f"{endpoint.model_name}_proactivity_bench_results.jsonl"
            partial = target.with_name(target.name + ".partial")
            with partial.open("w", encoding="utf-8") as stream:
                count = results_export(
                    run=evaluation_run, endpoint=endpoint, out=stream, condition=condition
                )
            partial.replace(target)
            self.stdout.write(f"{target}: {count} dialogue(s)")
