"""Data for the annotation tests: a small corpus, a finished run with secret-sounding model and
judge names (so a blinding test can look for them), and studies built by the real service."""

import itertools

import pytest
from django.contrib.auth.models import Group

from annotation.models import Rater, Study
from annotation.services.studies import StudySpec, study_create
from benchmark.corpus.importer import corpus_import
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
from core.roles import ANNOTATOR
from tests.factories import jsonl_bytes, records_for, stream

MODELS = (
    ("zephyr-secret-large", "Zephyr Secret Large", "zephyr-sl-2031"),
    ("quartz-hidden-mini", "Quartz Hidden Mini", "quartz-hm-0042"),
)
JUDGES = (
    ("oracle-judge-alpha", "Oracle Judge Alpha", "oracle-ja-9"),
    ("sibyl-judge-beta", "Sibyl Judge Beta", "sibyl-jb-7"),
)
UNIT_PK_BASE = 7_770_000  # unit ids no page number could be mistaken for
VERDICT_CYCLE = ("PASS", "PARTIAL", "FAIL")


def endpoint(name: str, display: str, model: str) -> ModelEndpoint:
    return ModelEndpoint.objects.create(
        name=name, display_name=display, provider="replay", model_name=model
    )


def build_run(*, dialogues: int = 4) -> EvaluationRun:
    """A finished run over ``dialogues`` test dialogues (triggers at turns 1, 4, 8): both
    models, both conditions, two judges that disagree on every third reply. Replies say
    nothing about who wrote them."""
    corpus_import(stream=stream(jsonl_bytes(records_for(dialogues))))
    models = [endpoint(*m) for m in MODELS]
    judges = [endpoint(*j) for j in JUDGES]
    run = EvaluationRun.objects.create(
        name="Test run",
        source=RunSource.IMPORTED,
        status=RunStatus.DONE,
        conditions=[Condition.VANILLA, Condition.RUBRIC_INJECTED],
        primary_judge=judges[0],
    )
    run.dialogues.set(Dialogue.objects.all())
    run.endpoints.set(models)
    run.judges.set(judges)
    pks = itertools.count(UNIT_PK_BASE)
    units = []
    for trigger in Trigger.objects.order_by("id"):
        for model in models:
            for condition in Condition.values:
                pk = next(pks)
                units.append(
                    EvaluationUnit(
                        pk=pk,
                        run=run,
                        trigger=trigger,
                        endpoint=model,
                        condition=condition,
                        state=UnitState.DONE,
                        reply=f"Reply number {pk - UNIT_PK_BASE}: book the van and pack the "
                        "projector last, since it comes out first. Good luck!",
                    )
                )
    EvaluationUnit.objects.bulk_create(units)
    judgments, disagreements = [], []
    for n, unit in enumerate(units):
        verdicts = {}
        for j, judge in enumerate(judges):
            # Every third reply: the judges disagree; every reply's primary verdict cycles.
            verdict = VERDICT_CYCLE[(n + (j if n % 3 == 0 else 0)) % 3]
            verdicts[judge.name] = verdict
            judgments.append(
                Judgment(
                    unit=unit,
                    judge=judge,
                    judge_name=judge.name,
                    state=JudgmentState.DONE,
                    verdict=verdict,
                    rationale=f"Rationale {j}: the reply books the van.",
                    evidence="book the van" if j == 0 else "pack the projector last",
                )
            )
        if len(set(verdicts.values())) > 1:
            disagreements.append(JudgeDisagreement(unit=unit, verdicts=verdicts))
    Judgment.objects.bulk_create(judgments)
    JudgeDisagreement.objects.bulk_create(disagreements)
    return run


@pytest.fixture
def run(db) -> EvaluationRun:
    return build_run()


@pytest.fixture
def make_annotators(django_user_model):
    group = Group.objects.get(name=ANNOTATOR)
    numbers = itertools.count(1)

    def make(n: int, prefix: str = "rater"):
        users = []
        for _ in range(n):
            number = next(numbers)
            user = django_user_model.objects.create_user(
                username=f"{prefix}{number}", password=f"pw-{prefix}{number}"
            )
            user.groups.add(group)
            users.append(user)
        return users

    return make


@pytest.fixture
def make_study(run, make_annotators):
    """make_study(kind, annotators=[...] or n_annotators=2, **spec fields) → Study."""

    def make(kind: str = "pairwise", *, annotators=None, n_annotators: int = 2, **fields):
        annotators = annotators if annotators is not None else make_annotators(n_annotators)
        defaults = {"name": "Which reply is better?", "overlap": 2, "seed": 1}
        if kind != "dialogue_audit":
            defaults["run"] = run
        defaults.update(fields)
        return study_create(spec=StudySpec(kind=kind, annotators=annotators, **defaults))

    return make


def rater(study: Study, user) -> Rater:
    return Rater.objects.get(study=study, user=user)


def form_data(run, people, /, **fields) -> dict:
    """A valid study-creation POST (a pairwise study of the run's RECOVERY triggers)."""
    data = {
        "kind": "pairwise",
        "name": "Which closing reply is better?",
        "overlap": "2",
        "lease_minutes": "30",
        "annotators": [str(p.pk) for p in people],
        "run": str(run.pk),
        "trigger_type": "RECOVERY",
    }
    data.update(fields)
    return data
