from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmark.curation.jobs import (
    curation_job_call_counts,
    curation_job_cancel,
    curation_job_endpoint_activity,
    curation_job_resume,
    curation_job_spend,
)
from benchmark.evaluation.runs import RunActionError
from benchmark.management.run_commands import command_user
from benchmark.models import AuditVia, CurationJob
from benchmark.providers.activity import activity_lines


class Command(BaseCommand):
    help = (
        "Show, cancel or resume a curation job (launch one with manage.py curate --job NAME, "
        "or from the admin). Cancel stops each running dialogue before its next call and saves "
        "nothing of it; resume re-enqueues every dialogue that is not done (the calls already "
        "paid for come from the cache). Both are recorded in the run audit log. A dialogue whose "
        "worker died needs neither: the sweep (Celery beat) dispatches it again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("job_id", type=int, help="the curation job's id")
        action = parser.add_mutually_exclusive_group()
        action.add_argument("--cancel", action="store_true", help="cancel the job")
        action.add_argument("--resume", action="store_true", help="resume the job")

    def handle(self, *args, **options) -> None:
        job_id = options["job_id"]
        if not CurationJob.objects.filter(pk=job_id).exists():
            raise CommandError(f"No curation job {job_id}.")
        who = command_user("curation_job")
        try:
            if options["cancel"]:
                curation_job_cancel(job_id=job_id, via=AuditVia.COMMAND, actor_name=who)
            elif options["resume"]:
                count = curation_job_resume(job_id=job_id, via=AuditVia.COMMAND, actor_name=who)
                self.stdout.write(f"Re-enqueued {count} dialogue(s).")
        except RunActionError as exc:
            raise CommandError(str(exc)) from None
        job = CurationJob.objects.get(pk=job_id)
        self.stdout.write(f"Curation job {job.id} {job.name!r}: {job.status}")
        counts = curation_job_call_counts(job=job)
        spend = curation_job_spend(job=job, counts=counts)
        self.stdout.write(
            f"  {spend.calls} call(s) made ({spend.failed_calls} failed), tokens in "
            f"{spend.input_tokens} / out {spend.output_tokens}, cost ${spend.cost_usd:.4f}"
        )
        for line in activity_lines(curation_job_endpoint_activity(job=job, counts=counts)):
            self.stdout.write(line)
        for target in job.targets.select_related("scenario", "style", "dialogue"):
            line = (
                f"  {target.scenario.key} style {target.style.index}: {target.state}, "
                f"turn {target.turn} of {target.max_turns}, claimed {target.claims} time(s)"
            )
            if target.dialogue:
                line += f", dialogue {target.dialogue.unique_id_eval}"
            if target.error:
                line += f", error: {target.error.splitlines()[0]}"
            self.stdout.write(line)
