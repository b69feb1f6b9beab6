"""LLM pairwise judging as a run step: choose pairs of a finished run's replies at the same
trigger, and have every pairwise judge compare each pair in both orders (docs/pipeline.md,
"Pairwise judging").

The step mirrors the re-judge (``runs.run_rejudge``): the run becomes judging-only and running
again, the side-A units of comparisons still lacking a verdict go back to pending, and the
engine (``engine._Batch``) asks, for each unit it claims, what its comparisons lack — so claims,
the response cache, resume, the sweep, cost accounting and fault tolerance are the evaluation
units' own.
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from benchmark.evaluation.engine import run_finish_if_complete
from benchmark.evaluation.runs import (
    REJUDGEABLE,
    RunActionError,
    _enqueue,
    run_audit_record,
)
from benchmark.models import (
    AuditAction,
    AuditVia,
    Condition,
    EvaluationRun,
    EvaluationUnit,
    ModelEndpoint,
    PairOrder,
    PairwiseComparison,
    RunStatus,
    UnitState,
)

PAIR_SCHEMES = {
    "models": "every two models at each trigger, within a condition",
    "conditions": "each model's vanilla reply against its rubric-injected one",
}
"""The pairs a run offers by itself; a study's pairs are given explicitly (``judge_pairs
--pairs study=ID`` reads them)."""

MAX_PAIRS_LIMIT = 1_000_000


@dataclass(frozen=True)
class Candidate:
    """A pair of a run's replies at one trigger: side A's and side B's unit, and the pair of
    sources they come from (the sampling's strata)."""

    unit_a: int
    unit_b: int
    trigger: int
    sources: tuple[str, str]


@dataclass(frozen=True)
class _Reply:
    pk: int
    trigger: int
    endpoint: str
    condition: str
    sample: int

    @property
    def source(self) -> str:
        return f"{self.endpoint} · {self.condition}"


def _replies(run: EvaluationRun) -> list[_Reply]:
    """The run's finished replies: a comparison needs both of its replies, and a reply still
    being judged (pending, running) or lost (missing) is none."""
    rows = (
        EvaluationUnit.objects.filter(run=run, state=UnitState.DONE)
        .exclude(reply="")
        .order_by("id")
        .values_list("pk", "trigger_id", "endpoint__name", "condition", "sample_index")
    )
    return [_Reply(*row) for row in rows]


def pair_candidates(*, run: EvaluationRun, scheme: str) -> list[Candidate]:
    """Every pair ``scheme`` (a key of ``PAIR_SCHEMES``) offers on ``run``'s finished replies.
    ``models``: at each trigger, condition and sample, every two models, side A the model whose
    name sorts first. ``conditions``: at each trigger, model and sample, the vanilla reply
    (side A) against the rubric-injected one (side B)."""
    if scheme not in PAIR_SCHEMES:
        raise RunActionError(
            f"unknown pairs {scheme!r}: choose one of {', '.join(PAIR_SCHEMES)} (or a study's)"
        )
    groups: dict[tuple, list[_Reply]] = defaultdict(list)
    for reply in _replies(run):
        if scheme == "models":
            groups[(reply.trigger, reply.condition, reply.sample)].append(reply)
        else:
            groups[(reply.trigger, reply.endpoint, reply.sample)].append(reply)
    rank = {condition: i for i, condition in enumerate(Condition.values)}
    out = []
    for _, replies in sorted(groups.items()):
        if scheme == "models":
            replies.sort(key=lambda r: r.endpoint)
        else:
            replies.sort(key=lambda r: rank.get(r.condition, len(rank)))
        for a, b in itertools.combinations(replies, 2):
            out.append(Candidate(a.pk, b.pk, a.trigger, (a.source, b.source)))
    return out


def explicit_candidates(
    *, run: EvaluationRun, pairs: Sequence[tuple[int, int]], what: str = "pair"
) -> list[Candidate]:
    """Given pairs of unit ids (side A, side B) as candidates, each checked: two distinct
    finished replies of ``run`` at the same trigger. A bad pair is a ``RunActionError`` naming
    it (``what`` says what the caller calls a pair) and nothing is written."""
    ids = {unit_id for pair in pairs for unit_id in pair}
    replies = {
        reply.pk: reply
        for reply in _replies(run)
        if reply.pk in ids  # (the run's replies are few next to a query per pair)
    }
    out = []
    for number, (a_id, b_id) in enumerate(pairs, start=1):
        where = f"{what} {number} (units {a_id}, {b_id})"
        if a_id == b_id:
            raise RunActionError(f"{where}: a reply cannot be compared with itself")
        missing = [unit_id for unit_id in (a_id, b_id) if unit_id not in replies]
        if missing:
            raise RunActionError(
                f"{where}: unit {missing[0]} is not a finished reply of run {run.pk}"
            )
        a, b = replies[a_id], replies[b_id]
        if a.trigger != b.trigger:
            raise RunActionError(f"{where}: the two replies answer different triggers")
        out.append(Candidate(a.pk, b.pk, a.trigger, (a.source, b.source)))
    return out


def sample_balanced(candidates: list[Candidate], *, max_pairs: int, seed: int) -> list[Candidate]:
    """At most ``max_pairs`` candidates, so that every pair of sources gets a comparable number
    (they differ by one at most, unless a pair of sources runs out): each stratum (pair of
    sources) is shuffled, then strata are drawn round-robin, one candidate each per round, in
    a shuffled order each round. Seeded: the same seed draws the same sample, so asking again
    adds no comparison."""
    if len(candidates) <= max_pairs:
        return candidates
    rng = random.Random(seed)
    strata: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        strata[candidate.sources].append(candidate)
    queues = []
    for key in sorted(strata):
        members = strata[key]
        rng.shuffle(members)
        queues.append(members)
    taken: list[Candidate] = []
    for round_ in itertools.count():
        live = [queue for queue in queues if round_ < len(queue)]
        rng.shuffle(live)
        for queue in live:
            taken.append(queue[round_])
            if len(taken) == max_pairs:
                return taken
    raise AssertionError("unreachable: fewer candidates than max_pairs were handled above")


@dataclass(frozen=True)
class PairwiseJudging:
    """What a pairwise judging step did."""

    judges_added: tuple[str, ...]
    candidates: int  # pairs the choice offered (before any sampling)
    chosen: int  # pairs kept (after ``max_pairs``)
    created: int  # comparisons new to the run
    comparisons: int  # the run's comparisons in all
    units: int  # side-A replies enqueued (their comparisons lack a verdict)


def run_pairwise_judge(
    *,
    run_id: int,
    judges: Iterable[ModelEndpoint] = (),
    pairs: str | Sequence[tuple[int, int]] = "models",
    max_pairs: int | None = None,
    seed: int = 0,
    pairs_label: str = "",
    via: AuditVia,
    actor=None,
    actor_name: str = "",
) -> PairwiseJudging:
    """Add pairwise judges and comparisons to a finished, cancelled, failed or imported run, and
    have every pairwise judge of the run compare every comparison of the run in both orders —
    without generating a single reply.

    ``pairs``: a scheme of ``PAIR_SCHEMES``, or explicit (side A, side B) unit ids (a study's
    pairs, so that LLM and human verdicts exist on the same pairs); ``max_pairs`` keeps a
    seeded, balanced sample of them (``sample_balanced``). Idempotent: a comparison the run
    already has is kept (unique per unordered pair), and only (judge, order) verdicts missing
    are asked for. The run becomes judging-only and running again (``started_at`` stamped
    afresh: the engine's per-run judge lists follow it); the side-A units of comparisons still
    lacking a verdict go back to pending and are enqueued once the transaction commits.
    Audited as PAIRWISE."""
    judges = list(judges)
    if max_pairs is not None and not 1 <= max_pairs <= MAX_PAIRS_LIMIT:
        raise RunActionError(
            f"max pairs must be between 1 and {MAX_PAIRS_LIMIT:,} (got {max_pairs})"
        )
    with transaction.atomic():
        run = EvaluationRun.objects.select_for_update().get(pk=run_id)
        if run.status not in REJUDGEABLE:
            raise RunActionError(
                "only a done, cancelled or failed run can be judged pairwise; this one is "
                f"{run.status}"
            )
        if not judges and not run.pairwise_judges.exists():
            raise RunActionError("nothing to do: name a pairwise judge")
        if isinstance(pairs, str):
            candidates = pair_candidates(run=run, scheme=pairs)
            label = pairs
        else:
            candidates = explicit_candidates(run=run, pairs=pairs)
            label = pairs_label or "given"
        if not candidates:
            raise RunActionError(
                f"run {run.pk} has no two finished replies to compare for pairs {label!r}"
            )
        chosen = (
            sample_balanced(candidates, max_pairs=max_pairs, seed=seed)
            if max_pairs is not None
            else candidates
        )
        before = run.pairwise_comparisons.count()
        PairwiseComparison.objects.bulk_create(
            [
                PairwiseComparison(
                    run=run, trigger_id=c.trigger, unit_a_id=c.unit_a, unit_b_id=c.unit_b
                )
                for c in chosen
            ],
            batch_size=2000,
            ignore_conflicts=True,  # the pair (either way round) is already one of the run's
        )
        comparisons = run.pairwise_comparisons.count()
        existing = set(run.pairwise_judges.values_list("pk", flat=True))
        added = [judge for judge in dict.fromkeys(judges) if judge.pk not in existing]
        run.pairwise_judges.add(*added)
        run.judging_only = True
        run.status = RunStatus.RUNNING
        run.started_at = timezone.now()
        run.finished_at = None
        run.save(update_fields=["judging_only", "status", "started_at", "finished_at"])
        unit_ids = _units_lacking_a_verdict(run)
        EvaluationUnit.objects.filter(pk__in=unit_ids).update(
            state=UnitState.PENDING, error="", claim_token="", claimed_at=None, dispatched_at=None
        )
        outcome = PairwiseJudging(
            judges_added=tuple(judge.name for judge in added),
            candidates=len(candidates),
            chosen=len(chosen),
            created=comparisons - before,
            comparisons=comparisons,
            units=len(unit_ids),
        )
        sampled = f", max {max_pairs}, seed {seed}" if max_pairs is not None else ""
        names = ", ".join(run.pairwise_judges.order_by("name").values_list("name", flat=True))
        run_audit_record(
            run=run,
            action=AuditAction.PAIRWISE,
            via=via,
            actor=actor,
            actor_name=actor_name,
            note=(
                f"pairs {label}{sampled}: {outcome.chosen} chosen, {outcome.created} new, "
                f"{comparisons} in all; pairwise judges {names}; {outcome.units} replies"
            ),
        )
    transaction.on_commit(lambda: _enqueue(unit_ids))
    if not unit_ids:
        transaction.on_commit(lambda: run_finish_if_complete(run_id=run_id))
    return outcome


def _units_lacking_a_verdict(run: EvaluationRun) -> list[int]:
    """Side-A units of the run's comparisons that lack a verdict of some pairwise judge in some
    order (a ``judge_error`` counts as given, as a judge's does), and that may be run:
    finished, errored (a provider error; asking again is what the caller wants), or left
    pending by a cancel."""
    names = list(run.pairwise_judges.values_list("name", flat=True))
    lacking = (
        PairwiseComparison.objects.filter(run=run)
        .annotate(n=Count("judgments", filter=Q(judgments__judge_name__in=names)))
        .filter(n__lt=len(names) * len(PairOrder.values))
        .values("unit_a_id")
    )
    return list(
        EvaluationUnit.objects.filter(
            pk__in=lacking, state__in=[UnitState.DONE, UnitState.ERROR, UnitState.PENDING]
        )
        .exclude(reply="")
        .order_by("id")
        .values_list("id", flat=True)
    )
