"""The fake vendor server itself: the behaviours other tests and the benchmarks rely on."""

import contextlib
import json
import subprocess
import sys
import threading
import time
import urllib.request

import openai
import pytest
from django.conf import settings

from tests.fakes.vendor_server import FakeVendorServer, FaultRates, request_hash


def _client(server_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server_url, api_key="k", max_retries=0, timeout=5)


def _ask(client: openai.OpenAI, text: str = "hi") -> str | None:
    completion = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": text}]
    )
    return completion.choices[0].message.content


def test_the_gate_holds_every_response_until_opened():
    with FakeVendorServer() as server:
        client = _client(server.openai_base_url)
        server.close_gate()
        answers: list[str | None] = []
        thread = threading.Thread(target=lambda: answers.append(_ask(client)))
        thread.start()

        server.wait_for(lambda log: len(log) == 1)
        thread.join(0.1)
        assert thread.is_alive() and answers == []
        assert server.requests()[0].outcome == "pending"

        server.open_gate()
        thread.join(5)
        assert answers == ["echo: hi"]


def test_requests_are_served_concurrently():
    with FakeVendorServer(latency_s=0.2) as server:
        client = _client(server.openai_base_url)
        threads = [threading.Thread(target=_ask, args=(client, str(i))) for i in range(32)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        elapsed = time.monotonic() - started

        assert len(server.requests()) == 32
        assert elapsed < 1.5  # 32 × 0.2 s one after another would take 6.4 s


def test_probabilistic_faults_repeat_with_the_seed():
    rates = FaultRates(rate_429=0.2, rate_500=0.2, retry_after_s=0, seed=42)

    def statuses() -> list[int | None]:
        with FakeVendorServer(fault_rates=rates) as server:
            client = _client(server.openai_base_url)
            for _ in range(30):
                with contextlib.suppress(openai.APIStatusError):
                    _ask(client)
            return [entry.status for entry in server.requests()]

    first = statuses()
    assert first == statuses()
    assert {200, 429, 500} <= set(first)


def test_judge_outputs_are_spoiled_at_the_seeded_rates():
    from benchmark.evaluation.judge_output import JudgeOutputError, parse_judge_output
    from tests.fakes.vendor_server import ABSENT_QUOTE, BENCH_QUOTE, bench_reply

    rates = FaultRates(rate_malformed_judge=0.25, rate_absent_evidence=0.25, seed=3)
    with FakeVendorServer(reply=bench_reply, fault_rates=rates) as server:
        client = _client(server.openai_base_url)
        model_reply = _ask_model(client, "a-model", "plan the trip")
        outputs = [_ask_model(client, "the-judge", f"judge reply {i}") for i in range(40)]
        log = server.requests()
    assert BENCH_QUOTE in model_reply and log[0].fault == ""  # models are never spoiled
    faults = [entry.fault for entry in log[1:]]
    assert {"malformed_judge", "absent_evidence", ""} == set(faults)
    for fault, output in zip(faults, outputs, strict=True):
        if fault == "absent_evidence":
            assert json.loads(output)["evidence"] == ABSENT_QUOTE
        if fault:
            with pytest.raises(JudgeOutputError):
                parse_judge_output(output, reply=model_reply)
        else:
            parse_judge_output(output, reply=model_reply)


def _ask_model(client: openai.OpenAI, model: str, text: str) -> str:
    completion = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": text}]
    )
    return completion.choices[0].message.content


def test_request_hash_identifies_model_messages_and_params():
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 0.1}

    assert request_hash(body) == request_hash(dict(reversed(body.items())))
    assert request_hash(body) != request_hash({**body, "temperature": 0.2})
    assert request_hash(body) != request_hash({**body, "model": "n"})


@pytest.mark.slow
def test_it_runs_as_a_separate_process_for_benchmarks():
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.vendor_server", "--port", "0", "--latency-ms", "5"],
        cwd=settings.BASE_DIR,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("FakeVendorServer listening on http://127.0.0.1:")
        base_url = line.rsplit(" ", 1)[1].strip()

        assert _ask(_client(f"{base_url}/v1")) == "echo: hi"
        with urllib.request.urlopen(f"{base_url}/_fake/stats", timeout=5) as response:
            stats = json.load(response)
        assert stats["requests"] == 1 and stats["by_status"] == {"200": 1}
    finally:
        process.terminate()
        process.wait(10)
    assert process.returncode == 0
