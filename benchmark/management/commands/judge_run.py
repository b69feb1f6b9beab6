from django.core.management.base import BaseCommand, CommandError

from benchmark.evaluation import runs
from benchmark.management.run_commands import (
    command_user,
    endpoints_named,
    run_named,
    watch_run,
)
from benchmark.models import AuditVia


class Command(BaseCommand):
    help = (
        "Re-judge a finished, cancelled, failed or imported run without generating a single "
        "reply: add judges (--judge), repeat every judge K times on each reply (--epochs, for "
        "self-consistency) and/or label the failure mode of every RECOVERY reply the primary "
        "judge failed (--classifier). Only missing answers are asked for. Units run on the "
        "Celery workers; this command shows a progress bar until the run ends (or returns at "
        "once with --no-wait)."
    )

    def add_arguments(self, parser):
        parser.add_argument("run", help="the run's id or its exact name")
        parser.add_argument(
            "--judge",
            action="append",
            default=[],
            metavar="ENDPOINT",
            help="a judge's endpoint name (repeat the option, or comma-separate, for several)",
        )
        parser.add_argument(
            "--epochs", type=int, help="verdicts per judge per reply (1-20; default: unchanged)"
        )
        parser.add_argument(
            "--classifier", metavar="ENDPOINT", help="the failure-mode classifier's endpoint"
        )
        parser.add_argument("--no-wait", action="store_true")

    def handle(self, *args, **o):
        run = run_named(o["run"])
        judges = endpoints_named(",".join(o["judge"]), option="--judge") if o["judge"] else []
        classifier = None
        if o["classifier"]:
            (classifier,) = endpoints_named(o["classifier"], option="--classifier")
        try:
            outcome = runs.run_rejudge(
                run_id=run.pk,
                judges=judges,
                epochs=o["epochs"],
                classifier=classifier,
                via=AuditVia.COMMAND,
                actor_name=command_user("judge_run"),
            )
        except runs.RunActionError as exc:
            raise CommandError(f"Not re-judged: {exc}.") from None
        added = ", ".join(outcome.judges_added) or "none"
        self.stdout.write(
            f"Run {run.pk}: {outcome.units} replies enqueued (judges added: {added}; "
            f"epochs: {outcome.epochs}; classifier: {outcome.classifier or 'unchanged'})."
        )
        if not o["no_wait"]:
            watch_run(run, self.stdout)
