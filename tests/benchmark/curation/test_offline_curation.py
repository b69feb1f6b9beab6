"""Offline curation: after ``load_demo``, ``manage.py curate`` with the demo's replay endpoints
writes a new dialogue from the recordings in ``benchmark/demo_data/curation.jsonl`` — no key,
no network. Run both inline and through the Celery task (eager mode)."""

import io
import json

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from benchmark.curation.loop import AGENTS
from benchmark.models import Dialogue, DialogueStatus, ModelEndpoint, Trigger
from benchmark.providers.base import ChatRequest, ReplayKey
from benchmark.providers.replay import ReplayProvider, ReplayStore
from proactweb.celery import app as celery_app

pytestmark = pytest.mark.django_db

RECORDINGS = settings.BASE_DIR / "benchmark" / "demo_data" / "curation.jsonl"
NEW_ID = "BP_DEMO_TRAVEL_01_NONE__style1__43acf4d798a24639b4d159dbb41edbfd"
COMMAND = (
    "--scenario", "DEMO_TRAVEL_01", "--style", "1",
    "--planner", "demo-atlas-large", "--user-agent", "demo-birch-medium",
    "--assistant", "demo-cedar-small",
)  # fmt: skip


@pytest.fixture
def demo():
    call_command("load_demo", "--no-users", stdout=io.StringIO())
    assert not Dialogue.objects.filter(unique_id_eval=NEW_ID).exists()


@pytest.fixture
def eager_celery():
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


def _recorded() -> list[dict]:
    with RECORDINGS.open(encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


def assert_curated_from_the_recordings(dialogue: Dialogue) -> None:
    rows = _recorded()
    by_key = {(r["agent"], r["turn"]): r["answer"] for r in rows}
    turns = list(dialogue.turns.order_by("index"))
    assert len(turns) == dialogue.num_turns_completed == max(r["turn"] for r in rows)
    for turn in turns:
        assert turn.user_message == by_key[("user_agent", turn.index)]
        assert turn.assistant_response == by_key[("assistant", turn.index)]
    types = sorted(Trigger.objects.filter(turn__dialogue=dialogue).values_list("type", flat=True))
    assert types == ["CRITICAL", "EMERGENT", "RECOVERY"]
    assert dialogue.status == DialogueStatus.DRAFT
    # The recordings respect the protocol: no finding for the new dialogue.
    assert dialogue.findings == []
    assert dialogue.anchors.count() == 5
    # Every recording passed the checks at once: one call per agent and turn, no re-ask.
    assert {agent: dialogue.token_usage[agent]["calls"] for agent in AGENTS} == dict.fromkeys(
        AGENTS, len(turns)
    )
    assert dialogue.curation_model == "demo-atlas-large"
    assert dialogue.curated_at is not None


def test_curate_with_replay_endpoints_writes_a_new_dialogue_offline(demo):
    assert all(e.provider == "replay" for e in ModelEndpoint.objects.all())
    out = io.StringIO()
    call_command("curate", *COMMAND, stdout=out)
    dialogue = Dialogue.objects.get(unique_id_eval=NEW_ID)
    assert f"Dialogue {dialogue.id}: {NEW_ID} (8 turns; triggers EMERGENT 1, CRITICAL 1, " in (
        out.getvalue()
    )
    assert "Curated 1 of 1 dialogue(s) as drafts" in out.getvalue()
    assert_curated_from_the_recordings(dialogue)
    # The id is taken now, and curation never overwrites a dialogue.
    with pytest.raises(CommandError, match="have no style-1 dialogue yet"):
        call_command("curate", *COMMAND, stdout=io.StringIO())


def test_the_celery_task_curates_offline_too(demo, eager_celery):
    out = io.StringIO()
    call_command("curate", *COMMAND, "--enqueue", stdout=out)
    assert "Queued 1 curation task(s)." in out.getvalue()
    assert_curated_from_the_recordings(Dialogue.objects.get(unique_id_eval=NEW_ID))


def test_a_scenario_without_recordings_fails_naming_the_missing_key(demo):
    with pytest.raises(CommandError) as caught:
        call_command("curate", *COMMAND[:2], "--style", "2", *COMMAND[4:], stdout=io.StringIO())
    message = str(caught.value)
    assert "nothing recorded for curation agent=planner" in message
    assert "unique_id_eval=BP_DEMO_TRAVEL_01_IM__style2__" in message and "turn=1" in message
    assert not Dialogue.objects.filter(unique_id_eval__contains="__style2__").exists()


def test_the_recordings_cover_every_agent_at_every_turn():
    rows = _recorded()
    turns = {r["turn"] for r in rows}
    assert turns == set(range(1, max(turns) + 1))
    assert {(r["agent"], r["turn"]) for r in rows} == {(a, t) for a in AGENTS for t in turns}


def test_replay_serves_a_curation_answer_by_agent_dialogue_and_turn_for_any_model(tmp_path):
    path = tmp_path / "curation.jsonl"
    path.write_text(
        json.dumps({"agent": "planner", "unique_id_eval": "D1", "turn": 2, "answer": {"a": 1}})
        + "\n"
        + json.dumps({"agent": "user_agent", "unique_id_eval": "D1", "turn": 2, "answer": "Hi."})
        + "\n",
        encoding="utf-8",
    )
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    provider = ReplayProvider(ReplayStore.from_jsonl(empty, empty, None, path))

    def ask(agent: str, model: str = "any-model") -> str:
        key = ReplayKey("curation", "D1", 2, model, "", agent=agent)
        return provider.complete(ChatRequest(model=model, messages=(), replay_key=key)).text

    assert json.loads(ask("planner")) == {"a": 1}
    assert ask("user_agent", model="another-model") == "Hi."


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"agent": "judge", "turn": 1, "answer": "x"}, "agent must be"),
        ({"agent": "assistant", "turn": 1, "answer": " "}, "answer must be"),
        ({"agent": "user_agent", "turn": 1, "answer": {}}, "answer must be"),
    ],
)
def test_bad_curation_recordings_are_refused_naming_the_line(tmp_path, row, message):
    path = tmp_path / "curation.jsonl"
    path.write_text(json.dumps({**row, "unique_id_eval": "D1"}) + "\n", encoding="utf-8")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match=f"curation.jsonl line 1: {message}"):
        ReplayStore.from_jsonl(empty, empty, None, path)


def test_a_curation_answer_recorded_twice_is_refused(tmp_path):
    row = json.dumps({"agent": "assistant", "unique_id_eval": "D1", "turn": 1, "answer": "x"})
    path = tmp_path / "curation.jsonl"
    path.write_text(row + "\n" + row + "\n", encoding="utf-8")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2: answer recorded twice"):
        ReplayStore.from_jsonl(empty, empty, None, path)
