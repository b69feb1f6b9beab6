from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from benchmark.evaluation import runs
from benchmark.management.run_commands import command_user, endpoints_named, watch_run
from benchmark.models import (
    AuditAction,
    AuditVia,
    Dialogue,
    EvaluationRun,
    ModelEndpoint,
    RunStatus,
)
from benchmark.tasks import launch_run


class Command(BaseCommand):
    help = (
        "Create and launch an evaluation run: every trigger of the chosen dialogues x models x "
        "conditions x samples, judged by every judge. Units run on the Celery workers; this "
        "command shows a progress bar until the run ends (or returns at once with --no-wait)."
    )

    def add_arguments(self, parser):
        # --name, --models and --judges are required unless --resume (checked in handle).
        parser.add_argument("--name")
        parser.add_argument("--models", help="comma-separated endpoint names")
        parser.add_argument("--judges", help="comma-separated endpoint names; the first is primary")
        parser.add_argument("--conditions", default="vanilla", help="vanilla,rubric_injected")
        parser.add_argument("--samples", type=int, default=1)
        parser.add_argument(
            "--dialogues",
            default="accepted",
            help="'accepted' (default), 'all', or comma-separated unique_id_eval values",
        )
        parser.add_argument("--no-cache", action="store_true", help="fresh sampling")
        parser.add_argument("--no-wait", action="store_true")
        parser.add_argument("--resume", type=int, metavar="RUN_ID", help="resume a run instead")
        parser.add_argument(
            "--cancel",
            type=int,
            metavar="RUN_ID",
            help="cancel a queued or running run instead: no new calls are made",
        )

    def _endpoints(self, names: str, option: str) -> list[ModelEndpoint]:
        return endpoints_named(names, option=option)

    def handle(self, *args, **o):
        if o["resume"] and o["cancel"]:
            raise CommandError("--resume and --cancel cannot be given together")
        if o["cancel"]:
            run = EvaluationRun.objects.filter(pk=o["cancel"]).first()
            if run is None:
                raise CommandError(f"No run with id {o['cancel']}")
            try:
                runs.run_cancel(run_id=run.pk)
            except runs.RunActionError as exc:
                raise CommandError(f"Not cancelled: {exc}.") from None
            self._audit(run, AuditAction.CANCEL)
            self.stdout.write(f"Run {run.pk} cancelling: no new calls are made.")
            return
        if o["resume"]:
            run = EvaluationRun.objects.filter(pk=o["resume"]).first()
            if run is None:
                raise CommandError(f"No run with id {o['resume']}")
            try:
                if run.status == RunStatus.QUEUED:  # resuming it launches it
                    runs.run_check_launchable(run=run)
                runs.run_resume(run_id=run.pk)
            except runs.RunActionError as exc:
                raise CommandError(f"Not resumed: {exc}.") from None
            self._audit(run, AuditAction.RESUME)
        else:
            missing = [f"--{k}" for k in ("name", "models", "judges") if not o[k]]
            if missing:
                raise CommandError(f"{', '.join(missing)} required (or --resume / --cancel RUN_ID)")
            if o["dialogues"] == "accepted":
                dialogues = runs.dialogues_default()
                if not dialogues.exists():
                    raise CommandError(
                        f"{runs.NO_ACCEPTED_DIALOGUES} with --dialogues all or "
                        "--dialogues ID,ID (unique_id_eval values)."
                    )
            elif o["dialogues"] == "all":
                dialogues = Dialogue.objects.all()
            else:
                ids = [d.strip() for d in o["dialogues"].split(",")]
                dialogues = Dialogue.objects.filter(unique_id_eval__in=ids)
                if dialogues.count() != len(set(ids)):
                    raise CommandError("Some dialogues were not found")
            if not dialogues.exists():
                raise CommandError("No dialogues in the corpus: import some first (import_corpus).")
            judges = self._endpoints(o["judges"], "--judges")
            try:
                # A run that would evaluate nothing is not kept: it would end "done, 0 units".
                with transaction.atomic():
                    run = runs.run_create(
                        name=o["name"],
                        endpoints=self._endpoints(o["models"], "--models"),
                        judges=judges,
                        dialogues=dialogues,
                        conditions=o["conditions"].split(","),
                        samples=o["samples"],
                        use_cache=not o["no_cache"],
                    )
                    runs.run_check_launchable(run=run)
            except runs.RunActionError as exc:
                raise CommandError(f"Not launched: {exc}.") from None
            self._audit(run, AuditAction.LAUNCH)
            launch_run.delay(run.pk)
        self.stdout.write(f"Run {run.pk} launched.")
        if o["no_wait"]:
            return
        self._watch(run)

    def _audit(self, run: EvaluationRun, action: AuditAction) -> None:
        runs.run_audit_record(
            run=run, action=action, via=AuditVia.COMMAND, actor_name=command_user("run_eval")
        )

    def _watch(self, run: EvaluationRun) -> None:
        watch_run(run, self.stdout)
