"""The fake vendor server enforces rate limits as the vendors do: per model, 429 with
``retry-after`` when over, and the vendor's rate-limit headers on every response."""

import json
import threading
import time
import urllib.error
import urllib.request

from benchmark.providers.ratelimit_headers import anthropic_limits, openai_limits
from tests.fakes.vendor_server import FakeVendorServer, RateLimits, counted_tokens


def _post(url: str, body: dict) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}


def _openai(server: FakeVendorServer, model: str = "m", **extra) -> tuple[int, dict[str, str]]:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], **extra}
    return _post(f"{server.openai_base_url}/chat/completions", body)


def _stats(server: FakeVendorServer) -> dict:
    with urllib.request.urlopen(f"{server.base_url}/_fake/stats", timeout=10) as response:
        return json.load(response)


def test_requests_per_minute_headers_count_down_then_429_with_retry_after():
    with FakeVendorServer(rate_limits=RateLimits(rpm=3)) as server:
        answers = [_openai(server) for _ in range(4)]

        assert [status for status, _ in answers] == [200, 200, 200, 429]
        remaining = [openai_limits(headers).remaining_requests for _, headers in answers]
        assert remaining == [2, 1, 0, 0]
        for _, headers in answers:
            assert headers["x-ratelimit-limit-requests"] == "3"
            assert "x-ratelimit-limit-tokens" not in headers  # no token limit set
        # One request refills in 20 s: the 429 says so in whole seconds; a full budget in ~60 s.
        status, refused = answers[-1]
        assert refused["retry-after"] == "20"
        reset_s = openai_limits(refused).reset_requests_s
        assert reset_s is not None and 55 < reset_s <= 60
        stats = _stats(server)
        assert stats["rate_limited"] == 1
        assert stats["by_status"] == {"200": 3, "429": 1}
        assert [row.fault for row in server.requests()] == ["", "", "", "rate_limit"]


def test_the_request_budget_refills_continuously():
    with FakeVendorServer(rate_limits=RateLimits(rpm=60)) as server:
        statuses = [_openai(server)[0] for _ in range(61)]
        assert statuses.count(200) == 60 and statuses[-1] == 429
        time.sleep(1.1)  # one request's worth at 60/min
        assert _openai(server)[0] == 200


def test_tokens_per_minute_count_the_prompt_and_the_output_budget_anthropic():
    body = {
        "model": "claude",
        "max_tokens": 600,
        "system": "s" * 40,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "x" * 360}]}],
    }
    assert counted_tokens("anthropic", body) == (40 + 360) // 4 + 600
    with FakeVendorServer(rate_limits=RateLimits(tpm=1000)) as server:
        url = f"{server.anthropic_base_url}/v1/messages"
        first_status, first = _post(url, body)
        second_status, second = _post(url, body)

    assert (first_status, second_status) == (200, 429)
    limits = anthropic_limits(first)
    assert (limits.rpm, limits.tpm, limits.remaining_tokens) == (None, 1000, 300)
    assert limits.reset_tokens_s is not None and 0 < limits.reset_tokens_s <= 43
    assert "anthropic-ratelimit-requests-limit" not in first
    # 400 more tokens needed at 1000/min: 24 s.
    assert int(second["retry-after"]) == 24
    assert anthropic_limits(second).remaining_tokens == 300


def test_openai_counts_max_completion_tokens_or_1024_by_default():
    assert counted_tokens("openai", {"messages": [{"content": "abcdefgh"}]}) == 2 + 1024
    assert counted_tokens("openai", {"messages": [], "max_completion_tokens": 5}) == 5
    assert counted_tokens("openai", {"messages": [], "max_tokens": 7}) == 7


def test_limits_are_per_model_and_only_for_the_models_named():
    limits = RateLimits(rpm=1, models=frozenset({"a", "b"}))
    with FakeVendorServer(rate_limits=limits) as server:
        assert _openai(server, "a")[0] == 200
        assert _openai(server, "b")[0] == 200  # a bucket of its own
        assert _openai(server, "a")[0] == 429
        status, headers = _openai(server, "judge")
        assert status == 200 and "x-ratelimit-limit-requests" not in headers
        assert _openai(server, "judge")[0] == 200


def test_the_server_records_its_most_requests_in_flight():
    with FakeVendorServer() as server:
        server.close_gate()
        threads = [threading.Thread(target=_openai, args=(server,)) for _ in range(3)]
        for thread in threads:
            thread.start()
        server.wait_for(lambda log: len(log) == 3)
        server.open_gate()
        for thread in threads:
            thread.join(10)
        _openai(server)
        assert _stats(server)["max_in_flight"] == 3


def test_buckets_that_start_empty_refill_from_the_servers_start_not_the_first_request():
    with FakeVendorServer(rate_limits=RateLimits(rpm=60, start_empty=True)) as server:
        time.sleep(1.5)  # one request's worth at 60/min (and a half), before any request
        answers = [_openai(server) for _ in range(2)]
    # Full at the start would admit both; empty from the first request would refuse both.
    assert [status for status, _ in answers] == [200, 429]
    assert answers[0][1]["x-ratelimit-remaining-requests"] == "0"
    assert answers[1][1]["retry-after"] == "1"
