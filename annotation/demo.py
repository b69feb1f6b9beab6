"""Demo studies, one of each kind, for the demo annotators (``load_demo`` calls this): what
``make run`` shows annotator1 and annotator2 on their work page."""

from __future__ import annotations

from annotation.kinds import adjudication, dialogue_audit, direct_rating, failure_mode, pairwise
from annotation.models import Study
from annotation.services.studies import StudySpec, study_create
from benchmark.models import (
    Condition,
    DialogueStatus,
    EvaluationRun,
    JudgeDisagreement,
    Judgment,
    JudgmentState,
    TriggerType,
)

SEED = 20261129


def _agreed_unit_key(run: EvaluationRun) -> tuple[str, str] | None:
    """A vanilla RECOVERY reply both judges agreed on: a fair gold item for the demo."""
    disputed = JudgeDisagreement.objects.filter(unit__run=run).values("unit_id")
    judgment = (
        Judgment.objects.filter(
            unit__run=run,
            unit__condition=Condition.VANILLA,
            unit__trigger__type=TriggerType.RECOVERY,
            judge=run.primary_judge,
            state=JudgmentState.DONE,
        )
        .exclude(unit_id__in=disputed)
        .select_related("unit__endpoint", "unit__trigger__turn__dialogue")
        .order_by("unit_id")
        .first()
    )
    if judgment is None:
        return None
    unit = judgment.unit
    turn = unit.trigger.turn
    key = f"{turn.dialogue.unique_id_eval}#t{turn.index}#{unit.endpoint.name}#{unit.condition}"
    return key, judgment.verdict


def demo_specs(*, run: EvaluationRun, annotators, adjudicators) -> list[StudySpec]:
    gold = _agreed_unit_key(run)
    common = {"annotators": annotators, "seed": SEED}
    return [
        StudySpec(
            kind=pairwise.KIND.key,
            name="Demo: which closing reply helps more?",
            instructions=(
                "The user is wrapping up. Read the conversation, then both replies. Which one "
                "would help this user more from here on? Judge the content, not the length."
            ),
            overlap=2,
            run=run,
            trigger_type=TriggerType.RECOVERY,
            max_items=12,
            **common,
        ),
        StudySpec(
            kind=dialogue_audit.KIND.key,
            name="Demo: audit curated dialogues",
            instructions=(
                "Check each dialogue against the protocol. Answer every row, add a note where "
                "the answer is no, then decide: would you keep this dialogue in the benchmark?"
            ),
            overlap=2,
            adjudicators=adjudicators,
            dialogue_status=DialogueStatus.DRAFT,
            max_items=4,
            **common,
        ),
        StudySpec(
            kind=adjudication.KIND.key,
            name="Demo: settle judge disagreements",
            instructions=(
                "Two judges scored this reply differently. Read the rubric and the reply, weigh "
                "their rationales and evidence, and set the verdict you would defend."
            ),
            overlap=1,
            run=run,
            **common,
        ),
        StudySpec(
            kind=direct_rating.KIND.key,
            name="Demo: rate single replies",
            instructions=(
                "Rate the reply against the rubric: Pass, Partial or Fail, with how sure you "
                "are and why. You will see the judge's verdict after you answer."
            ),
            overlap=2,
            run=run,
            condition=Condition.VANILLA,
            max_items=10,
            gold=f"{gold[0]} {gold[1]}" if gold else "",
            **common,
        ),
        StudySpec(
            kind=failure_mode.KIND.key,
            name="Demo: why did these closing replies fail?",
            instructions=(
                "Each reply failed its RECOVERY rubric. Pick the failure mode that fits best; "
                "the suggestion is a simple rule's guess, so change it whenever it is wrong."
            ),
            overlap=2,
            run=run,
            condition=Condition.VANILLA,
            **common,
        ),
    ]


def demo_studies_load(*, run: EvaluationRun, annotators, adjudicators, created_by) -> list[str]:
    """Create the demo studies that do not exist yet (by name); returns the names created."""
    created = []
    for spec in demo_specs(run=run, annotators=annotators, adjudicators=adjudicators):
        if Study.objects.filter(name=spec.name).exists():
            continue
        study_create(spec=spec, created_by=created_by)
        created.append(spec.name)
    return created
