"""The INTERVENTION trigger type (ProactiveBench: asks for the intervention that would make the
input sufficient) through the whole pipeline on a tiny dataset: corpus import → a replayed run →
judging → the leaderboard, and back out through the corpus export and the results file."""

import io
import json

import pytest

from benchmark.corpus.exporter import dialogue_to_record
from benchmark.corpus.importer import corpus_import
from benchmark.curation.rubrics import intervention_rubric
from benchmark.evaluation import engine, runs
from benchmark.evaluation.requests import judge_request, reply_request
from benchmark.evaluation.results_format import results_export
from benchmark.models import (
    Condition,
    Dialogue,
    EvaluationUnit,
    Judgment,
    ModelEndpoint,
    Trigger,
)
from benchmark.providers import replay
from benchmark.providers.replay import ReplayStore
from benchmark.vocabulary import TriggerType
from proactweb.celery import app as celery_app
from stats import tables
from stats.selectors import TableRequest
from tests.factories import dialogue_record, jsonl_bytes, stream

pytestmark = pytest.mark.django_db

UID = "BP_VISION_01_Q__style4__0123456789abcdef0123456789abcdef"
TRIGGERS = ((2, "INTERVENTION"), (3, "EMERGENT"), (5, "CRITICAL"), (8, "RECOVERY"))
MODELS = ("vision-asks", "vision-guesses")
JUDGE = "vision-judge"
ASKS = "Could you move your hand away from the label so I can read it?"
GUESSES = "That is clearly a bottle of olive oil."
# Per model, the verdict its reply earns at each trigger turn.
VERDICTS = {
    "vision-asks": {2: "PASS", 3: "PASS", 5: "PARTIAL", 8: "FAIL"},
    "vision-guesses": {2: "FAIL", 3: "PARTIAL", 5: "PASS", 8: "PASS"},
}


@pytest.fixture(autouse=True)
def eager_celery():
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


def _record() -> dict:
    record = dialogue_record(UID, triggers=TRIGGERS, blueprint_id="BP_VISION_01_Q")
    criteria = intervention_rubric(
        problem="a hand hides the bottle's label", intervention="move the hand away from the label"
    )
    for point in record["trigger_points"]:
        if point["evaluation_rubric"]["type"] == "INTERVENTION":
            point["evaluation_rubric"].update(
                pass_criteria=criteria.pass_criteria,
                partial_criteria=criteria.partial_criteria,
                fail_criteria=criteria.fail_criteria,
            )
    return record


def _reply(model: str, turn: int) -> str:
    if turn == 2:
        return ASKS if model == "vision-asks" else GUESSES
    return f"Reply of {model} at turn {turn}: pack the spare cable first."


def _store(tmp_path) -> ReplayStore:
    replies, judgments = [], []
    for model in MODELS:
        for turn, verdict in VERDICTS[model].items():
            key = {"unique_id_eval": UID, "turn": turn, "model": model, "condition": "vanilla"}
            text = _reply(model, turn)
            replies.append({**key, "reply": text})
            judgments.append(
                {
                    **key,
                    "judge": JUDGE,
                    "verdict": verdict,
                    "rationale": "Judged against the rubric.",
                    "evidence": text[:30],
                }
            )
    for name, rows in (("replies.jsonl", replies), ("judgments.jsonl", judgments)):
        (tmp_path / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    return ReplayStore.from_jsonl(tmp_path / "replies.jsonl", tmp_path / "judgments.jsonl")


@pytest.fixture
def replayed(tmp_path, monkeypatch):
    """The replay provider serves this file's recordings in place of the demo's."""
    store = _store(tmp_path)
    monkeypatch.setattr(replay, "_demo_store", lambda: store)
    # The engine keeps one provider per endpoint per process, keyed by the endpoint's id, and
    # SQLite hands an earlier test's ids out again: start from none, so no replay provider
    # built on the demo's recordings answers for this file's endpoints.
    monkeypatch.setattr(engine, "_providers", {})
    return store


def _endpoint(name: str) -> ModelEndpoint:
    return ModelEndpoint.objects.create(
        name=name, display_name=name.title(), provider="replay", model_name=name
    )


def test_an_intervention_trigger_is_imported_without_a_phase_window_finding():
    summary = corpus_import(stream=stream(jsonl_bytes([_record()])))

    trigger = Trigger.objects.get(type=TriggerType.INTERVENTION)
    assert trigger.turn.index == 2 and trigger.in_phase_window
    assert "asks the user for the specific action" in trigger.pass_criteria
    assert "move the hand away from the label" in trigger.pass_criteria
    dialogue = Dialogue.objects.get()
    assert not [f for f in dialogue.findings if f["code"] == "trigger_outside_window"]
    assert summary is not None


def test_the_corpus_export_writes_the_intervention_trigger_back_unchanged():
    record = _record()
    corpus_import(stream=stream(jsonl_bytes([record])))

    exported = dialogue_to_record(Dialogue.objects.get())

    assert exported["trigger_points"] == record["trigger_points"]
    assert exported["turn_records"] == record["turn_records"]


def test_an_intervention_trigger_is_run_judged_and_ranked_like_the_others(replayed):
    corpus_import(stream=stream(jsonl_bytes([_record()])))
    models = [_endpoint(name) for name in MODELS]
    run = runs.run_create(
        name="vision",
        endpoints=models,
        judges=[_endpoint(JUDGE)],
        dialogues=Dialogue.objects.all(),
    )
    runs.run_launch(run_id=run.pk)
    run.refresh_from_db()

    assert run.status == "done"
    units = EvaluationUnit.objects.filter(run=run)
    assert units.count() == 8 and set(units.values_list("state", flat=True)) == {"done"}
    at_intervention = units.filter(trigger__type=TriggerType.INTERVENTION)
    assert {u.endpoint.model_name: u.reply for u in at_intervention} == {
        "vision-asks": ASKS,
        "vision-guesses": GUESSES,
    }
    judged = Judgment.objects.filter(unit__run=run, state="done")
    assert {(j.unit.endpoint.model_name, j.unit.trigger.turn.index, j.verdict) for j in judged} == {
        (model, turn, verdict)
        for model, by_turn in VERDICTS.items()
        for turn, verdict in by_turn.items()
    }

    table = tables.build("leaderboard", TableRequest(run=run))
    cells = {(row["model"], row["trigger_type"]): row for row in table.rows}
    assert [t for m, t in cells if m == "vision-asks"] == [
        "ALL",
        "EMERGENT",
        "CRITICAL",
        "RECOVERY",
        "INTERVENTION",
    ]
    assert cells[("vision-asks", "INTERVENTION")]["pass_rate"] == 1.0
    assert cells[("vision-guesses", "INTERVENTION")]["pass_rate"] == 0.0
    assert cells[("vision-asks", "INTERVENTION")]["n"] == 1
    # The overall row counts the new category with the others: 2 PASS, 1 PARTIAL, 1 FAIL.
    assert cells[("vision-asks", "ALL")]["weighted_score"] == pytest.approx(2.5 / 4)

    out = io.StringIO()
    results_export(run=run, endpoint=models[0], out=out)
    exported = json.loads(out.getvalue().splitlines()[0])
    assert exported["trigger_stats"]["INTERVENTION"]["PASS"] == 1
    assert set(exported["trigger_stats"]) == {"EMERGENT", "CRITICAL", "RECOVERY", "INTERVENTION"}


def test_the_judge_and_the_injected_instruction_explain_the_intervention_type(replayed):
    corpus_import(stream=stream(jsonl_bytes([_record()])))
    model, judge = _endpoint(MODELS[0]), _endpoint(JUDGE)
    run = runs.run_create(
        name="vision", endpoints=[model], judges=[judge], dialogues=Dialogue.objects.all()
    )
    trigger = Trigger.objects.get(type=TriggerType.INTERVENTION)
    turns = list(trigger.turn.dialogue.turns.order_by("index"))
    unit = EvaluationUnit(
        run=run, trigger=trigger, endpoint=model, condition=Condition.RUBRIC_INJECTED, reply=ASKS
    )

    (prompt,) = judge_request(unit, turns, judge).messages
    instruction = reply_request(unit, turns).messages[0]

    assert "## The trigger type of this reply: INTERVENTION" in prompt.content
    assert "- INTERVENTION: the user's input (typically an image" in prompt.content
    assert "PASS: The reply notices that the input is not enough" in prompt.content
    assert instruction.role == "system"
    assert "The INTERVENTION principle applies to your next reply." in instruction.content
    assert "- INTERVENTION: when what the user gave you" in instruction.content
