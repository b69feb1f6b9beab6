"""What the run commands (``run_eval``, ``judge_run``, ``judge_pairs``) share: a run and endpoints
by name, who is acting, and a progress bar until a run ends."""

import getpass
import time

from django.core.management.base import CommandError, OutputWrapper
from tqdm import tqdm

from benchmark.evaluation import runs
from benchmark.models import EvaluationRun, ModelEndpoint, RunStatus
from benchmark.providers.activity import activity_lines

FINAL = {RunStatus.DONE, RunStatus.CANCELLED, RunStatus.FAILED}


def endpoints_named(names: str, *, option: str) -> list[ModelEndpoint]:
    """The endpoints of a comma-separated list of names, in its order; an unknown name is a
    ``CommandError`` naming it and the option."""
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    found = {e.name: e for e in ModelEndpoint.objects.filter(name__in=wanted)}
    unknown = [n for n in wanted if n not in found]
    if unknown:
        raise CommandError(f"{option}: unknown endpoint(s): {', '.join(unknown)}")
    return [found[n] for n in wanted]


def run_named(ref: str, *, option: str = "RUN") -> EvaluationRun:
    """The run whose id or exact name is ``ref``; none, or several of that name, is a
    ``CommandError`` naming ``option``."""
    run = EvaluationRun.objects.filter(pk=int(ref)).first() if ref.isdigit() else None
    if run is None:
        named = list(EvaluationRun.objects.filter(name=ref)[:2])
        if len(named) > 1:
            raise CommandError(f"{option}: several runs are named {ref!r}: give its id")
        run = named[0] if named else None
    if run is None:
        raise CommandError(f"{option}: no run with id or name {ref!r}")
    return run


def command_user(command: str) -> str:
    """The system user running ``command``, as the audit log names them."""
    try:
        who = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (e.g. in a container)
        who = "unknown"
    return f"{who} ({command})"


def watch_run(run: EvaluationRun, stdout: OutputWrapper) -> None:
    """A progress bar (units finished, errors, calls, cost) until the run ends."""
    with tqdm(desc=f"run {run.pk}", unit="unit") as bar:
        while True:
            run.refresh_from_db()
            progress = runs.run_progress(run=run)
            bar.total = progress.total or None
            bar.n = progress.finished
            bar.set_postfix(
                errors=progress.by_state.get("error", 0),
                calls=progress.calls,
                cost=f"${progress.cost_usd:.4f}",
            )
            bar.refresh()
            if run.status in FINAL:
                break
            time.sleep(1)
    stdout.write(
        f"Run {run.pk} {run.status}: {progress.by_state} calls={progress.calls} "
        f"cost=${progress.cost_usd:.4f}"
    )
    if progress.pairwise:
        verdicts = ", ".join(f"{name} {n}" for name, n in progress.pairwise.items())
        stdout.write(f"Pairwise verdicts (of {progress.pairwise_expected} per judge): {verdicts}")
    stdout.write("Endpoints:")
    for line in activity_lines(runs.run_endpoint_activity(run=run, counts=progress.call_counts)):
        stdout.write(line)
