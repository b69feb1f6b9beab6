"""``judge_pairs``: LLM pairwise judging of a run's replies, in both orders.

It lives in the annotation app because one of its choices of pairs is a human study's (the
benchmark app below cannot read studies); everything else is the benchmark's
(``benchmark.evaluation.pairwise``) and the run commands' (``benchmark.management``)."""

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Study
from annotation.selectors import study_unit_pairs
from benchmark.evaluation import pairwise
from benchmark.evaluation.runs import RunActionError
from benchmark.management.run_commands import (
    command_user,
    endpoints_named,
    run_named,
    watch_run,
)
from benchmark.models import AuditVia, EvaluationRun

PAIRS_HELP = ", ".join(f"{key} ({what})" for key, what in pairwise.PAIR_SCHEMES.items())


class Command(BaseCommand):
    help = (
        "Have pairwise judges compare pairs of a finished, cancelled, failed or imported run's "
        "replies at the same trigger against its rubric, each pair in both orders (a verdict "
        "that flips with the order is reported as inconsistent), without generating a single "
        "reply. Only verdicts the run lacks are asked for. Units run on the Celery workers; "
        "this command shows a progress bar until the run ends (or returns at once with "
        "--no-wait)."
    )

    def add_arguments(self, parser):
        parser.add_argument("run", help="the run's id or its exact name")
        parser.add_argument(
            "--judge",
            action="append",
            default=[],
            metavar="ENDPOINT",
            help="a pairwise judge's endpoint name (repeat the option, or comma-separate, for "
            "several; none: the run's pairwise judges)",
        )
        parser.add_argument(
            "--pairs",
            default="models",
            help=f"which replies to pair: {PAIRS_HELP}, or study=ID (the pairs of a study's "
            "items, so that LLM and human verdicts exist on the same pairs); default: models",
        )
        parser.add_argument(
            "--max-pairs",
            type=int,
            metavar="N",
            help="at most N pairs: a seeded sample balanced over pairs of sources",
        )
        parser.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
        parser.add_argument("--no-wait", action="store_true")

    def handle(self, *args, **o):
        run = run_named(o["run"])
        judges = endpoints_named(",".join(o["judge"]), option="--judge") if o["judge"] else []
        if o["max_pairs"] is not None and not 1 <= o["max_pairs"] <= pairwise.MAX_PAIRS_LIMIT:
            raise CommandError(
                f"--max-pairs: must be between 1 and {pairwise.MAX_PAIRS_LIMIT:,} "
                f"(got {o['max_pairs']})"
            )
        pairs, label = self._pairs(o["pairs"], run)
        try:
            outcome = pairwise.run_pairwise_judge(
                run_id=run.pk,
                judges=judges,
                pairs=pairs,
                pairs_label=label,
                max_pairs=o["max_pairs"],
                seed=o["seed"],
                via=AuditVia.COMMAND,
                actor_name=command_user("judge_pairs"),
            )
        except RunActionError as exc:
            raise CommandError(f"Not judged: {exc}.") from None
        added = ", ".join(outcome.judges_added) or "none"
        self.stdout.write(
            f"Run {run.pk}: {outcome.chosen} of {outcome.candidates} pairs ({outcome.created} "
            f"new, {outcome.comparisons} in all); {outcome.units} replies enqueued (pairwise "
            f"judges added: {added})."
        )
        if not o["no_wait"]:
            watch_run(run, self.stdout)

    def _pairs(self, text: str, run: EvaluationRun) -> tuple[str | list[tuple[int, int]], str]:
        """A scheme, or a study's pairs within ``run`` (those outside it are left out, and
        said so; a study with none in the run is an error)."""
        if text in pairwise.PAIR_SCHEMES:
            return text, text
        key, _, value = text.partition("=")
        if key != "study":
            raise CommandError(
                f"--pairs: {text!r} is none of {', '.join(pairwise.PAIR_SCHEMES)} or study=ID"
            )
        if not value.isdigit():
            raise CommandError(f"--pairs: study=ID needs a numeric study id (got {value!r})")
        try:
            pairs = study_unit_pairs(study_id=int(value))
        except Study.DoesNotExist:
            raise CommandError(f"--pairs: no study with id {value}") from None
        kept = [(p.unit_a, p.unit_b) for p in pairs if p.run_a == p.run_b == run.pk]
        if not kept:
            raise CommandError(
                f"--pairs: study {value} has no pair of replies of run {run.pk} "
                f"({len(pairs)} pair(s) in all)"
            )
        if len(kept) < len(pairs):
            self.stdout.write(
                f"Study {value}: {len(pairs) - len(kept)} of its {len(pairs)} pairs are not "
                f"replies of run {run.pk}: left out."
            )
        return kept, f"study={value}"
