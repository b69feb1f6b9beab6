import io
import secrets

import pytest
from django.core.management import call_command

from annotation import kinds
from annotation.models import Answer, Rater, Study, StudyItem
from annotation.services.assignments import answer_submit, assignment_next
from annotation.services.studies import StudySpec, rater_exclusion_set, study_create
from benchmark.evaluation.demo_run import DEMO_RUN_NAME
from benchmark.models import (
    EvaluationRun,
    Judgment,
    JudgmentState,
    PairwiseComparison,
    PairwiseJudgment,
)
from stats.compute.pairwise_consistency import ERROR, NOT_ASKED
from stats.interfaces import BATTLE_OUTCOME_CODES as WINNER_CODES
from tests.annotation.conftest import (
    JUDGES,
    build_run,
    make_annotators,  # noqa: F401  (a fixture, shared)
)

PRIMARY_JUDGE = JUDGES[0][0]


@pytest.fixture
def demo_run(db):
    """The demo corpus and its completed run: 3 models × 2 conditions × every trigger, judged
    by two judges that sometimes disagree."""
    call_command("load_demo", "--no-users", stdout=io.StringIO())
    return EvaluationRun.objects.get(name=DEMO_RUN_NAME)


# --- Human studies, built through the annotation app's own services ---------------------------


@pytest.fixture
def study_run(db) -> EvaluationRun:
    """A finished run (tests/annotation/conftest.py): 4 dialogues with triggers at turns 1, 4,
    8 (EMERGENT, CRITICAL, RECOVERY), two models, both conditions, two judges."""
    return build_run()


def create_study(run, kind: str, annotators, **fields) -> Study:
    spec = {"name": "Which reply helps more?", "overlap": 2, "seed": 1, "run": run, **fields}
    return study_create(spec=StudySpec(kind=kind, annotators=annotators, **spec))


def unit_key(unit) -> str:
    """A reply's item key, as docs/annotation.md gives it (for gold lines)."""
    turn = unit.trigger.turn
    return f"{turn.dialogue.unique_id_eval}#t{turn.index}#{unit.endpoint.name}#{unit.condition}"


def items_in_order(study: Study) -> list[StudyItem]:
    return list(study.items.order_by("position"))


def set_primary_verdict(unit_id: int, verdict: str) -> None:
    Judgment.objects.filter(unit_id=unit_id, judge_name=PRIMARY_JUDGE).update(verdict=verdict)


def rater_of(study: Study, user) -> Rater:
    return Rater.objects.select_related("study").get(study=study, user=user)


def exclude(rater: Rater, by) -> None:
    rater_exclusion_set(rater=rater, excluded=True, by=by, reason="clicks through")


def answer(rater: Rater, assignment, decide, *, seconds: float = 20.0, now=None) -> Answer:
    """Answer ``assignment`` as the workspace's form would: ``decide(assignment)`` gives the
    posted fields (e.g. ``{"choice": "1", "confidence": 3}``)."""
    data = {"idempotency_key": secrets.token_hex(8), **decide(assignment)}
    form = kinds.get(rater.study.kind).answer_form(data, study=rater.study, assignment=assignment)
    assert form.is_valid(), form.errors
    return answer_submit(
        rater=rater,
        item_token=assignment.item.token,
        answer=form.to_input(),
        idempotency_key=data["idempotency_key"],
        elapsed_ms=int(seconds * 1000),
        now=now,
    ).answer


def answer_next(rater: Rater, decide, *, seconds: float = 20.0, now=None) -> Answer:
    """Press Next, then answer the item it gives (see ``answer``)."""
    assignment = assignment_next(rater=rater, now=now)
    assert assignment is not None, f"nothing left for {rater}"
    return answer(rater, assignment, decide, seconds=seconds, now=now)


def pick_case(case: str):
    """A pairwise decision by case (A vanilla, B rubric-injected, tie): the screen position
    follows from the order this rater was shown."""

    def decide(assignment) -> dict:
        order = assignment.display["order"]
        choice = "tie" if case == "tie" else str(order.index(case) + 1)
        return {"choice": choice, "confidence": 3}

    return decide


# --- LLM pairwise verdicts, written as rows ----------------------------------------------------

A, B = WINNER_CODES["model_a"], WINNER_CODES["model_b"]
TIE, BAD = WINNER_CODES["tie"], WINNER_CODES["tie (bothbad)"]
# One judge's verdicts on eight comparisons: (A shown first, B shown first).
PAIRWISE_VERDICTS = (
    (A, A),  # consistent
    (A, B),  # flips: the first-shown reply wins both times (a side reversal)
    (B, A),  # flips: the second-shown reply wins both times (a side reversal)
    (TIE, TIE),  # consistent
    (BAD, TIE),  # flips, between two kinds of tie
    (A, TIE),  # flips
    (ERROR, A),  # one order only (a judge error)
    (A, NOT_ASKED),  # one order only (not asked yet)
)
WINNERS = {code: winner for winner, code in WINNER_CODES.items()}


def judge_verdicts(comparisons, name: str, verdicts) -> None:
    """Write judge ``name``'s verdicts on ``comparisons``: one (A shown first, B shown first)
    pair of winner codes each (``NOT_ASKED``: no row; ``ERROR``: a judge error)."""
    rows = []
    for comparison, pair in zip(comparisons, verdicts, strict=True):
        for order, code in zip(("ab", "ba"), pair, strict=True):
            if code == NOT_ASKED:
                continue
            done = code != ERROR
            rows.append(
                PairwiseJudgment(
                    comparison=comparison,
                    judge_name=name,
                    order=order,
                    state=JudgmentState.DONE if done else JudgmentState.JUDGE_ERROR,
                    winner=WINNERS[code] if done else "",
                )
            )
    PairwiseJudgment.objects.bulk_create(rows)


def compare_models(run: EvaluationRun, n: int) -> list[PairwiseComparison]:
    """``n`` vanilla comparisons of ``run``: its first model (by name) against its second, at
    its first ``n`` triggers (by id)."""
    units = {
        (u.trigger_id, u.endpoint.name, u.condition): u
        for u in run.units.select_related("endpoint")
    }
    models = sorted({name for _, name, _ in units})
    triggers = sorted({trigger for trigger, _, _ in units})[:n]
    return PairwiseComparison.objects.bulk_create(
        PairwiseComparison(
            run=run,
            trigger_id=t,
            unit_a=units[(t, models[0], "vanilla")],
            unit_b=units[(t, models[1], "vanilla")],
        )
        for t in triggers
    )


@pytest.fixture
def judged(study_run):
    """Eight vanilla comparisons (the first model against the second at eight triggers): judge
    "pj-one" answers as PAIRWISE_VERDICTS, "pj-two" picks side A every time."""
    comparisons = compare_models(study_run, 8)
    judge_verdicts(comparisons, "pj-one", PAIRWISE_VERDICTS)
    judge_verdicts(comparisons, "pj-two", [(A, A)] * 8)
    study_run.models = sorted(study_run.endpoints.values_list("name", flat=True))
    return study_run
