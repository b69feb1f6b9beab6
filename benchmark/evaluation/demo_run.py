"""The demo's completed run, written straight from the recorded replies and verdicts in
``benchmark/demo_data`` — what a replay run of every demo model, both conditions and both demo
judges produces (tests/benchmark/evaluation/test_engine.py checks that the pipeline reproduces
these recordings), without waiting for a worker. It gives the researcher dashboard something to
show on a fresh ``make run``.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from benchmark.evaluation.evidence import grade_evidence
from benchmark.models import (
    Condition,
    Dialogue,
    EvaluationRun,
    EvaluationUnit,
    JudgeDisagreement,
    Judgment,
    JudgmentState,
    ModelEndpoint,
    RunSource,
    RunStatus,
    Trigger,
    UnitState,
)

DEMO_DIR = Path(__file__).resolve().parent.parent / "demo_data"
DEMO_RUN_NAME = "Demo run (recorded replies)"
PRIMARY_JUDGE = "demo-judge-primary"


def _lines(name: str) -> list[dict]:
    with (DEMO_DIR / name).open(encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


@transaction.atomic
def demo_run_load() -> EvaluationRun:
    """Create the demo run once (idempotent: an existing run of that name is returned as is).
    Needs the demo corpus and endpoints loaded first (``load_demo`` does both)."""
    existing = EvaluationRun.objects.filter(name=DEMO_RUN_NAME).first()
    if existing is not None:
        return existing
    replies = _lines("replies.jsonl")
    judgments = _lines("judgments.jsonl")
    endpoints = {e.name: e for e in ModelEndpoint.objects.filter(name__startswith="demo-")}
    triggers = {
        (uid, turn): pk
        for pk, uid, turn in Trigger.objects.filter(turn__dialogue__is_demo=True).values_list(
            "id", "turn__dialogue__unique_id_eval", "turn__index"
        )
    }
    now = timezone.now()
    run = EvaluationRun.objects.create(
        name=DEMO_RUN_NAME,
        source=RunSource.IMPORTED,
        status=RunStatus.DONE,
        conditions=[Condition.VANILLA, Condition.RUBRIC_INJECTED],
        primary_judge=endpoints[PRIMARY_JUDGE],
        started_at=now,
        finished_at=now,
        notes="Loaded by load_demo from benchmark/demo_data (recorded replies and verdicts).",
    )
    models = sorted({r["model"] for r in replies})
    judges = sorted({j["judge"] for j in judgments})
    run.endpoints.set([endpoints[m] for m in models])
    run.judges.set([endpoints[j] for j in judges])
    run.dialogues.set(Dialogue.objects.filter(is_demo=True))
    units = EvaluationUnit.objects.bulk_create(
        [
            EvaluationUnit(
                run=run,
                trigger_id=triggers[(r["unique_id_eval"], r["turn"])],
                endpoint=endpoints[r["model"]],
                condition=r["condition"],
                state=UnitState.DONE,
                reply=r["reply"],
                finished_at=now,
            )
            for r in replies
        ]
    )
    unit_by_key = {
        (r["unique_id_eval"], r["turn"], r["model"], r["condition"]): unit
        for r, unit in zip(replies, units, strict=True)
    }
    rows, verdicts_by_unit = [], {}
    for j in judgments:
        unit = unit_by_key[(j["unique_id_eval"], j["turn"], j["model"], j["condition"])]
        grade = grade_evidence(j["evidence"], unit.reply)
        rows.append(
            Judgment(
                unit=unit,
                judge=endpoints[j["judge"]],
                judge_name=j["judge"],
                state=JudgmentState.DONE,
                verdict=j["verdict"],
                rationale=j["rationale"],
                evidence=j["evidence"],
                evidence_status=grade.status,
                evidence_found_share=grade.found_share,
            )
        )
        verdicts_by_unit.setdefault(unit, {})[j["judge"]] = j["verdict"]
    Judgment.objects.bulk_create(rows)
    JudgeDisagreement.objects.bulk_create(
        [
            JudgeDisagreement(unit=unit, verdicts=verdicts)
            for unit, verdicts in verdicts_by_unit.items()
            if len(set(verdicts.values())) > 1
        ]
    )
    return run
