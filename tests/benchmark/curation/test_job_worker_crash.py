"""A curation job on a real Celery worker (the configured broker: Redis in CI), killed with
SIGKILL in the middle of a dialogue, recovered by the sweep and a new worker — no resume.

The three agents are OpenAI-compatible endpoints on the fake vendor server, which answers each
request with what the demo recorded for that agent and turn (``benchmark/demo_data/
curation.jsonl``, the replay provider's recordings), so the dialogue is the demo's and the
server's log shows every request made. The server holds its responses at a gate while the
worker is killed, so the call in flight then is never completed. Afterwards the dialogue is
saved once, every request that had completed was never sent again, the job paid for each call
once, and the audit log shows the launch and the sweep's re-dispatch.
"""

import io
import json
import re
import signal
import time
from collections import Counter
from decimal import Decimal

import pytest
from django.core.management import call_command

from benchmark.curation import jobs
from benchmark.curation.loop import AGENTS
from benchmark.models import (
    AuditAction,
    AuditVia,
    CommunicationStyle,
    CurationJob,
    CurationTarget,
    Dialogue,
    ModelEndpoint,
    ModelPrice,
    ProviderCall,
    RunAuditEvent,
    RunStatus,
    Scenario,
    TargetState,
)
from tests.benchmark.curation.test_offline_curation import (
    NEW_ID,
    RECORDINGS,
    assert_curated_from_the_recordings,
)
from tests.benchmark.evaluation.test_worker_crash import (  # noqa: F401
    _start_worker,
    _stop,
    _wait,
    queue,
)
from tests.fakes.vendor_server import FakeVendorServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LEASE_S = 2
CALLS = 24  # 8 turns × 3 agents, every recorded answer accepted at once
MODELS = {
    "planner": "demo-atlas-large",
    "user_agent": "demo-birch-medium",
    "assistant": "demo-cedar-small",
}  # the demo's, so that the dialogue records what the demo's own curation records

PLANNER_TURN = re.compile(r"This is turn (\d+) of at most")
USER_AGENT_TURN = re.compile(r"^\[Turn \d+\]\nYOU: ", re.MULTILINE)


def _recordings() -> dict[tuple[str, int], str]:
    answers = {}
    with RECORDINGS.open(encoding="utf-8") as stream:
        for row in map(json.loads, filter(str.strip, stream)):
            answer = row["answer"]
            text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
            answers[(row["agent"], row["turn"])] = text
    return answers


ANSWERS = _recordings()


def _agent_and_turn(body: dict) -> tuple[str, int]:
    """Which agent asks, at which turn, read from what the loop sends it (its view)."""
    first = body["messages"][0]["content"]
    if first.startswith("You are the Planner"):
        match = PLANNER_TURN.search(first)
        assert match is not None
        return "planner", int(match.group(1))
    if first.startswith("You are playing a real person"):
        return "user_agent", len(USER_AGENT_TURN.findall(first)) + 1
    # The Assistant: a system prompt, then the conversation ending with the new user message.
    return "assistant", sum(message["role"] == "user" for message in body["messages"])


def _recorded_answer(body: dict) -> str:
    return ANSWERS[_agent_and_turn(body)]


def test_a_worker_killed_mid_dialogue_is_recovered_by_the_sweep_and_pays_nothing_twice(
    queue,  # noqa: F811
    settings,
):
    settings.CURATION_LEASE_S = LEASE_S  # this process's sweep (the workers get it by env)
    call_command("load_demo", "--no-users", stdout=io.StringIO())
    with FakeVendorServer(reply=_recorded_answer, latency_s=0.15) as server:
        endpoints = {
            agent: ModelEndpoint.objects.create(
                name=f"crash-{agent}",
                display_name=f"crash-{agent}",
                provider="openai-compatible",
                model_name=model,
                base_url=server.openai_base_url,
            )
            for agent, model in MODELS.items()
        }
        ModelPrice.objects.update_or_create(
            model_name=MODELS["planner"],
            defaults={"input_usd_per_mtok": Decimal(3), "output_usd_per_mtok": Decimal(15)},
        )
        workers = [_start_worker(queue, CURATION_LEASE_S=str(LEASE_S))]
        try:
            job = jobs.curation_job_launch(
                name="crash",
                planner=endpoints["planner"],
                user_agent=endpoints["user_agent"],
                assistant=endpoints["assistant"],
                targets=[
                    (
                        Scenario.objects.get(key="DEMO_TRAVEL_01"),
                        CommunicationStyle.objects.get(index=1),
                    )
                ],
                via=AuditVia.COMMAND,
                actor_name="tester",
            )
            target_row = CurationTarget.objects.filter(job=job)
            _wait(lambda: target_row.get().turn >= 3, 60, "turns 1 and 2 to be curated")
            server.close_gate()
            server.wait_for(lambda log: any(r.outcome == "pending" for r in log), timeout_s=30)
            # Every response the server sent has been recorded (the one window no client can
            # close, a response on its way in as the process dies, is left out: pipeline.md).
            completed = sum(r.outcome == "completed" for r in server.requests())
            paid = ProviderCall.objects.filter(curation_job=job, ok=True)
            _wait(lambda: paid.count() >= completed, 10, "completed calls to be recorded")
            workers[0].send_signal(signal.SIGKILL)  # mid-call: its response is being held
            workers[0].wait(timeout=10)
            server.open_gate()
            before = target_row.get()
            assert (before.state, before.claims, before.dialogue) == (TargetState.RUNNING, 1, None)
            assert 3 <= before.turn < 8, "the kill came too late to test anything"
            paid_before = paid.count()
            time.sleep(LEASE_S + 0.5)  # the dead worker's lease lapses
            workers.append(_start_worker(queue, CURATION_LEASE_S=str(LEASE_S)))
            assert jobs.curation_jobs_sweep().redispatched == 1
            job_row = CurationJob.objects.filter(pk=job.pk)
            _wait(lambda: job_row.get().status == RunStatus.DONE, 90, "the job to finish")
        finally:
            _stop(workers)
        log = server.requests()

    target = target_row.get()
    assert (target.state, target.claims, target.turn) == (TargetState.DONE, 2, 8)
    assert Dialogue.objects.filter(unique_id_eval=NEW_ID).count() == 1
    assert target.dialogue is not None and target.dialogue.unique_id_eval == NEW_ID
    assert_curated_from_the_recordings(target.dialogue)
    # The job paid for every call once: the turns before the kill came from the cache.
    keys = Counter(paid.values_list("cache_key", flat=True))
    assert sum(keys.values()) == CALLS and max(keys.values()) == 1
    assert paid_before < CALLS
    assert any(r.outcome == "aborted" for r in log)  # the kill really interrupted a call
    completed_at: dict[str, int] = {}
    for entry in log:
        assert entry.request_hash not in completed_at, (
            f"request {entry.request_hash[:12]} ({_agent_and_turn(entry.body)}) was sent again "
            "after it had completed"
        )
        if entry.outcome == "completed":
            completed_at[entry.request_hash] = entry.seq
    assert len(completed_at) == CALLS
    assert {agent for agent, _ in map(_agent_and_turn, (r.body for r in log))} == set(AGENTS)
    # The Planner's calls are priced; the job's page sums them.
    spend = jobs.curation_job_spend(job=job)
    planner_cost = sum(
        paid.filter(endpoint=endpoints["planner"]).values_list("cost_usd", flat=True)
    )
    assert spend.calls == CALLS and spend.cost_usd == planner_cost > 0
    events = RunAuditEvent.objects.filter(curation_job=job).order_by("id")
    assert [(e.action, e.via, e.actor_name) for e in events] == [
        (AuditAction.LAUNCH, AuditVia.COMMAND, "tester"),
        (AuditAction.RESUME, AuditVia.SWEEP, "sweep"),
    ]


def test_a_job_on_the_demos_replay_endpoints_curates_offline_on_a_real_worker(
    queue,  # noqa: F811
):
    """What an admin gets after ``make run``: the demo's replay endpoints, a real worker running
    the job's two targets at once. The style-blind Planner is asked the same first question in
    both styles; each target draws its own answer (style 2 has none recorded), not the other's
    from the cache."""
    call_command("load_demo", "--no-users", stdout=io.StringIO())
    demo = {e.name: e for e in ModelEndpoint.objects.filter(provider="replay")}
    worker = _start_worker(queue)
    try:
        job = jobs.curation_job_launch(
            name="offline",
            planner=demo["demo-atlas-large"],
            user_agent=demo["demo-birch-medium"],
            assistant=demo["demo-cedar-small"],
            targets=[
                (
                    Scenario.objects.get(key="DEMO_TRAVEL_01"),
                    CommunicationStyle.objects.get(index=i),
                )
                for i in (1, 2)
            ],
            via=AuditVia.ADMIN,
            actor_name="admin",
        )
        job_row = CurationJob.objects.filter(pk=job.pk)
        _wait(lambda: job_row.get().finished_at is not None, 60, "the job to finish")
    finally:
        _stop([worker])
    done, failed = job.targets.order_by("style__index")
    assert job_row.get().status == RunStatus.FAILED  # style 2 has no recordings
    assert (done.state, done.claims, done.dialogue.unique_id_eval) == (TargetState.DONE, 1, NEW_ID)
    assert_curated_from_the_recordings(done.dialogue)
    assert failed.state == TargetState.FAILED
    assert "nothing recorded for curation agent=planner" in failed.error
    calls = ProviderCall.objects.filter(curation_job=job)
    assert calls.filter(ok=True).count() == CALLS and calls.filter(ok=False).count() == 1
