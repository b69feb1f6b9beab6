"""The demo recordings as one completed evaluation run, so that every results page and every
human study has something to show on a fresh machine.

The recordings (``benchmark/demo_data/replies.jsonl`` and ``judgments.jsonl``) are exactly what
the offline ``replay`` provider serves: three fictional models, vanilla and rubric-injected, at
every trigger of the demo corpus, each reply judged by two demo judges. ``failure_modes.jsonl``
is the demo failure-mode classifier's label for every RECOVERY reply the primary judge failed
(written by ``make_failure_modes.py``, a few keyword rules). ``pairwise_verdicts.jsonl`` is
the two demo judges' pairwise verdicts at every trigger, in both orders — every two models in
each condition, and each model's vanilla reply against its rubric-injected one — with position
bias planted (``make_pairwise_verdicts.py``). Loading them as rows
(rather than replaying them through Celery) keeps ``load_demo`` fast and needs no worker; a run
launched over the same dialogues with the replay provider produces the same replies and verdicts.

The multimodal demo's recordings (``image_replies.jsonl``, ``image_judgments.jsonl``, written by
``make_images.py``) are a second run of their own (``demo_image_run_load``): the same models and
judges at the image dialogues' INTERVENTION triggers, which a demo study shows with their photos.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from benchmark.evaluation.evidence import grade_evidence
from benchmark.evaluation.judge_output import pairwise_winner
from benchmark.evaluation.runs import run_pin
from benchmark.models import (
    ClassificationState,
    Condition,
    Dialogue,
    EvaluationRun,
    EvaluationUnit,
    FailureModeClassification,
    JudgeDisagreement,
    Judgment,
    JudgmentState,
    ModelEndpoint,
    PairOrder,
    PairwiseComparison,
    PairwiseJudgment,
    RunSource,
    RunStatus,
    Trigger,
    TriggerType,
    UnitState,
)
from benchmark.providers.replay import ReplayStore, estimate_tokens, pairwise_key

DEMO_RUN_NAME = "Demo run (recorded replies)"
DEMO_IMAGE_RUN_NAME = "Demo run: photos (recorded replies)"
DEMO_MODELS = ("demo-atlas-large", "demo-birch-medium", "demo-cedar-small")
DEMO_JUDGES = ("demo-judge-primary", "demo-judge-crossfamily")  # the first is primary
DEMO_CLASSIFIER = "demo-classifier"
DEMO_DATA = Path(__file__).resolve().parent.parent / "demo_data"
FAILURE_MODES_FILE = DEMO_DATA / "failure_modes.jsonl"
PAIRWISE_FILE = DEMO_DATA / "pairwise_verdicts.jsonl"


@transaction.atomic
def demo_run_load() -> EvaluationRun:
    """Create the demo run once (idempotent: an existing demo run is returned unchanged),
    pinned so that the dashboard opens on it (README, "The first five minutes") unless another
    run is pinned already; an unpinned demo run stays unpinned. Needs the demo corpus and the
    demo endpoints (``load_demo`` creates both first)."""
    existing = EvaluationRun.objects.filter(name=DEMO_RUN_NAME).first()
    if existing is not None:
        return existing
    store = ReplayStore.from_demo_data()
    endpoints = _demo_endpoints()
    dialogues = list(Dialogue.objects.filter(is_demo=True))
    run = _recorded_run(
        DEMO_RUN_NAME,
        dialogues,
        endpoints,
        failure_mode_classifier=endpoints[DEMO_CLASSIFIER],
    )
    units = _recorded_replies(run, store, dialogues, endpoints)
    FailureModeClassification.objects.bulk_create(
        _classifications(units, classifier=endpoints[DEMO_CLASSIFIER])
    )
    run.pairwise_judges.set([endpoints[name] for name in DEMO_JUDGES])
    _pairwise_load(run, units, judges=endpoints)
    if not EvaluationRun.objects.filter(pinned=True).exists():
        run_pin(run_id=run.pk)
        run.refresh_from_db()
    return run


@transaction.atomic
def demo_image_run_load() -> EvaluationRun:
    """The multimodal demo's run (``make_images.py``'s recorded replies and verdicts at the
    image dialogues' INTERVENTION triggers), created once: an existing one is returned
    unchanged. Needs the demo image dialogues and the demo endpoints (``load_demo`` creates
    them first).

    A run of its own, so the demo run's tables, studies and recordings read as they always
    have; newer than the demo run, but the dashboard still opens on the demo run, which is
    pinned (``demo_run_load``)."""
    existing = EvaluationRun.objects.filter(name=DEMO_IMAGE_RUN_NAME).first()
    if existing is not None:
        return existing
    dialogues = list(Dialogue.objects.filter(is_demo=True, turns__images__isnull=False).distinct())
    if not dialogues:
        raise ValueError("no demo image dialogues: import image_dialogues.jsonl first")
    endpoints = _demo_endpoints()
    run = _recorded_run(DEMO_IMAGE_RUN_NAME, dialogues, endpoints)
    _recorded_replies(run, ReplayStore.from_demo_data(), dialogues, endpoints)
    return run


def _demo_endpoints() -> dict[str, ModelEndpoint]:
    return {
        e.name: e
        for e in ModelEndpoint.objects.filter(
            name__in=(*DEMO_MODELS, *DEMO_JUDGES, DEMO_CLASSIFIER)
        )
    }


def _recorded_run(
    name: str,
    dialogues: list[Dialogue],
    endpoints: dict[str, ModelEndpoint],
    *,
    failure_mode_classifier: ModelEndpoint | None = None,
) -> EvaluationRun:
    """A finished run of the demo models, both conditions, judged by the demo judges."""
    now = timezone.now()
    run = EvaluationRun.objects.create(
        name=name,
        source=RunSource.IMPORTED,
        status=RunStatus.DONE,
        conditions=[Condition.VANILLA, Condition.RUBRIC_INJECTED],
        primary_judge=endpoints[DEMO_JUDGES[0]],
        failure_mode_classifier=failure_mode_classifier,
        started_at=now,
        finished_at=now,
        notes="The demo recordings (benchmark/demo_data), loaded by load_demo.",
    )
    run.dialogues.set(dialogues)
    run.endpoints.set([endpoints[name] for name in DEMO_MODELS])
    run.judges.set([endpoints[name] for name in DEMO_JUDGES])
    return run


def _recorded_replies(
    run: EvaluationRun,
    store: ReplayStore,
    dialogues: list[Dialogue],
    endpoints: dict[str, ModelEndpoint],
) -> dict[tuple[str, int, str, str], EvaluationUnit]:
    """The recorded replies at the dialogues' triggers as the run's units, the demo judges'
    recorded verdicts on them, and a disagreement for each reply they scored differently (as
    the engine does). Returns the units by (unique_id_eval, turn, model, condition)."""
    triggers = {
        (uid, turn): pk
        for pk, uid, turn in Trigger.objects.filter(turn__dialogue__in=dialogues).values_list(
            "pk", "turn__dialogue__unique_id_eval", "turn__index"
        )
    }
    now = timezone.now()
    units = {}
    for (uid, turn, model, condition, _images), reply in sorted(store.replies.items()):
        if (uid, turn) not in triggers or model not in DEMO_MODELS:
            continue
        units[(uid, turn, model, condition)] = EvaluationUnit(
            run=run,
            trigger_id=triggers[(uid, turn)],
            endpoint=endpoints[model],
            condition=condition,
            state=UnitState.DONE,
            reply=reply,
            output_tokens=estimate_tokens(reply),
            finished_at=now,
        )
    EvaluationUnit.objects.bulk_create(units.values())
    judgments = []
    verdicts: dict[int, dict[str, str]] = {}
    for (uid, turn, model, condition, judge, _images), recorded in sorted(store.judgments.items()):
        unit = units.get((uid, turn, model, condition))
        if unit is None or judge not in DEMO_JUDGES:
            continue
        grade = grade_evidence(recorded["evidence"], unit.reply)
        judgments.append(
            Judgment(
                unit=unit,
                judge=endpoints[judge],
                judge_name=judge,
                state=JudgmentState.DONE,
                verdict=recorded["verdict"],
                rationale=recorded["rationale"],
                evidence=recorded["evidence"],
                evidence_status=grade.status,
                evidence_found_share=grade.found_share,
            )
        )
        verdicts.setdefault(unit.pk, {})[judge] = recorded["verdict"]
    Judgment.objects.bulk_create(judgments)
    JudgeDisagreement.objects.bulk_create(
        JudgeDisagreement(unit_id=unit_id, verdicts=by_judge)
        for unit_id, by_judge in verdicts.items()
        if len(set(by_judge.values())) > 1
    )
    return units


def _pairwise_load(run: EvaluationRun, units: dict, *, judges: dict[str, ModelEndpoint]) -> None:
    """The recorded pairwise verdicts as comparisons (side A: the model whose name sorts first,
    or the vanilla reply of one model — as ``judge_pairs --pairs models`` and ``--pairs
    conditions`` make them) and judgments, each winner mapped back from
    the screen position to a side as the engine does. A line naming a reply the run does not
    have is an error naming the line (the whole load is then rolled back)."""
    comparisons: dict[tuple[int, int], PairwiseComparison] = {}
    rows = []
    lines = PAIRWISE_FILE.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        recorded = json.loads(line)
        uid, turn, first, first_condition, second, second_condition, judge, _images = pairwise_key(
            recorded
        )
        shown_first = units.get((uid, turn, first, first_condition))
        shown_second = units.get((uid, turn, second, second_condition))
        if shown_first is None or shown_second is None or judge not in judges:
            raise ValueError(
                f"{PAIRWISE_FILE.name} line {number}: no such pair of replies, or judge, in the "
                "demo run"
            )
        rank = Condition.values.index
        a_first = (first, rank(first_condition)) < (second, rank(second_condition))
        unit_a, unit_b = (shown_first, shown_second) if a_first else (shown_second, shown_first)
        key = (unit_a.pk, unit_b.pk)
        if key not in comparisons:
            comparisons[key] = PairwiseComparison(
                run=run, trigger_id=unit_a.trigger_id, unit_a=unit_a, unit_b=unit_b
            )
        rows.append(
            PairwiseJudgment(
                comparison=comparisons[key],
                judge=judges[judge],
                judge_name=judge,
                order=PairOrder.AB if a_first else PairOrder.BA,
                state=JudgmentState.DONE,
                winner=pairwise_winner(recorded["choice"], a_shown_first=a_first),
                rationale=recorded["rationale"],
                raw_output=json.dumps(
                    {"choice": recorded["choice"], "rationale": recorded["rationale"]}
                ),
            )
        )
    PairwiseComparison.objects.bulk_create(comparisons.values())
    PairwiseJudgment.objects.bulk_create(rows)


def _classifications(units: dict, *, classifier: ModelEndpoint) -> list[FailureModeClassification]:
    """The recorded classifications as rows, their quotes graded like judge evidence. A line
    naming a reply the run does not have, or a reply that is not RECOVERY, is an error naming
    the line (the whole load is then rolled back)."""
    recovery = set(
        EvaluationUnit.objects.filter(
            pk__in=[u.pk for u in units.values()], trigger__type=TriggerType.RECOVERY
        ).values_list("pk", flat=True)
    )
    out = []
    lines = FAILURE_MODES_FILE.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        recorded = json.loads(line)
        key = tuple(recorded[f] for f in ("unique_id_eval", "turn", "model", "condition"))
        unit = units.get(key)
        if unit is None or unit.pk not in recovery:
            raise ValueError(
                f"{FAILURE_MODES_FILE.name} line {number}: no RECOVERY reply {key} in the demo run"
            )
        grade = grade_evidence(recorded["quote"], unit.reply)
        out.append(
            FailureModeClassification(
                unit=unit,
                classifier=classifier,
                classifier_name=recorded["classifier"],
                state=ClassificationState.DONE,
                failure_mode=recorded["failure_mode"],
                quote=recorded["quote"],
                quote_status=grade.status,
                quote_found_share=grade.found_share,
                rationale=recorded["rationale"],
                raw_output=line,
            )
        )
    return out
