"""Two worker processes, one limit: with nothing configured, both learn the server's limit from
its headers and share it through Redis, and the server refuses (almost) nothing."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.benchmark.providers.conftest import REDIS_URL
from tests.fakes.vendor_server import FakeVendorServer, RateLimits

ROOT = Path(__file__).resolve().parents[3]
RPM = 240
CALLS_PER_PROCESS = 130
"""260 calls: the minute's burst of 240, then 20 more that must wait for the refill."""


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_two_processes_share_a_learnt_limit_with_few_429s(redis_client, api):
    endpoint = f"ep-{uuid.uuid4().hex[:12]}"
    with FakeVendorServer(rate_limits=RateLimits(rpm=RPM)) as server:
        if api == "openai":
            provider, base_url, key_env = "openai-compatible", server.openai_base_url, ""
        else:
            provider, base_url, key_env = "anthropic", server.anthropic_base_url, "TEST_API_KEY"
        env = {**os.environ, "REDIS_URL": REDIS_URL, "TEST_API_KEY": "k"}
        argv = [
            sys.executable,
            "-m",
            "tests.benchmark.providers.limited_caller",
            f"--provider={provider}",
            f"--base-url={base_url}",
            f"--endpoint={endpoint}",
            "--model=m",
            f"--api-key-env={key_env}",
            f"--calls={CALLS_PER_PROCESS}",
            "--in-flight=16",
        ]
        try:
            workers = [
                subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
                for _ in range(2)
            ]
            outputs = [worker.communicate(timeout=120)[0] for worker in workers]
            learnt = redis_client.hgetall(f"proactbench:limits:{endpoint}:learnt")
        finally:
            prefix = f"proactbench:limits:{endpoint}"
            redis_client.delete(f"{prefix}:learnt", f"{prefix}:rate")
        log = server.requests()

    assert [output.split()[-3:] for output in outputs] == [["OK", str(CALLS_PER_PROCESS), "0"]] * 2
    assert learnt == {b"rpm": str(RPM).encode()}
    refused = sum(entry.fault == "rate_limit" for entry in log)
    admitted = sum(entry.status == 200 for entry in log)
    assert admitted == 2 * CALLS_PER_PROCESS
    # Without a shared limit the 20 calls beyond the minute's burst are all refused at least
    # once (they are sent well within a second, the refill is 4 a second). Shared, the target
    # is 0 and bench/ratelimit.py holds the 1 % on a whole run; here, on a loaded CI
    # machine where one process can be scheduled late between a response and its learning,
    # a full CI run once saw 5: the bound is half the unshared floor.
    assert refused <= 10, f"{refused} of {len(log)} requests answered 429"


def test_two_processes_never_hold_more_calls_than_the_shared_cap(redis_client):
    """What bench/hosts.py relies on: separate processes (as on separate hosts), each wanting
    more calls in flight than the endpoint's ``max_concurrency``, hold at most that many
    between them at the server."""
    endpoint = f"ep-{uuid.uuid4().hex[:12]}"
    cap = 3
    with FakeVendorServer(latency_s=0.3) as server:
        argv = [
            sys.executable,
            "-m",
            "tests.benchmark.providers.limited_caller",
            "--provider=openai-compatible",
            f"--base-url={server.openai_base_url}",
            f"--endpoint={endpoint}",
            "--model=m",
            "--calls=12",
            "--in-flight=8",
            f"--max-concurrency={cap}",
        ]
        env = {**os.environ, "REDIS_URL": REDIS_URL}
        try:
            workers = [
                subprocess.Popen(
                    argv,
                    cwd=ROOT,
                    env=env,
                    stdout=subprocess.PIPE,
                    text=True,
                    start_new_session=True,
                )
                for _ in range(2)
            ]
            outputs = [worker.communicate(timeout=120)[0] for worker in workers]
        finally:
            for key in redis_client.scan_iter(f"proactbench:limits:{endpoint}:*"):
                redis_client.delete(key)
        most_at_once = server.max_in_flight

    assert [output.split()[-3:] for output in outputs] == [["OK", "12", "0"]] * 2
    # Each process alone would hold 8; unshared caps would let 2 x 3 through.
    assert most_at_once == cap
