"""Retries: the policy on its own, then every transient and permanent failure driven through the
real OpenAI and Anthropic SDKs against a local server that speaks their wire formats."""

import email.utils
import logging
import socket
import time
from dataclasses import dataclass

import pytest

from benchmark.evaluation import aio
from benchmark.providers.anthropic_messages import AnthropicMessagesProvider
from benchmark.providers.base import ChatMessage, ChatRequest, ProviderError
from benchmark.providers.openai_chat import OpenAIChatProvider
from benchmark.providers.retry import call_with_retries, parse_retry_after, redact
from core.backoff import backoff_s
from tests.fakes.vendor_server import FakeVendorServer, Fault

API_KEY = "sk-test-retry-0123456789abcdef"


class RecordingSleep:
    """Stands in for time.sleep (and asyncio.sleep, as ``asleep``): remembers what it was asked,
    returns at once."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)

    async def asleep(self, seconds: float) -> None:
        self.calls.append(seconds)


def _request(text: str = "hello") -> ChatRequest:
    return ChatRequest(model="test-model", messages=(ChatMessage("user", text),))


# --- The policy ----------------------------------------------------------------------------------


def test_backoff_is_full_jitter_on_a_capped_exponential():
    top = [backoff_s(n, base_s=0.5, cap_s=3.0, rng=lambda: 1.0) for n in range(1, 6)]
    assert top == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert backoff_s(4, base_s=0.5, cap_s=3.0, rng=lambda: 0.0) == 0.0


def test_a_retryable_provider_error_is_retried_and_attempts_are_counted():
    sleep = RecordingSleep()
    seen: list[int] = []

    def flaky(attempt: int) -> str:
        seen.append(attempt)
        if attempt < 3:
            raise ProviderError("truncated", status=200, retryable=True)
        return "done"

    assert call_with_retries(flaky, sleep=sleep, rng=lambda: 1.0) == "done"
    assert seen == [1, 2, 3]
    assert sleep.calls == [0.5, 1.0]


def test_giving_up_reports_the_last_failure_and_the_attempt_count():
    def always_failing(attempt: int) -> str:
        raise ProviderError("still down", status=503, retryable=True)

    with pytest.raises(ProviderError) as caught:
        call_with_retries(always_failing, max_attempts=3, sleep=RecordingSleep())
    assert (caught.value.status, caught.value.retryable, caught.value.attempts) == (503, True, 3)
    assert "still down" in str(caught.value) and "3 attempts" in str(caught.value)


def test_bugs_are_not_retried_or_disguised():
    calls = []

    def buggy(attempt: int) -> str:
        calls.append(attempt)
        raise KeyError("oops")

    with pytest.raises(KeyError):
        call_with_retries(buggy, sleep=RecordingSleep())
    assert calls == [1]


def test_retry_after_is_read_as_milliseconds_seconds_or_a_date():
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "2.5"}) == 2.5
    in_30_s = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= parse_retry_after({"retry-after": in_30_s}) <= 30
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_keys_are_scrubbed_from_messages():
    text = "Incorrect API key provided: my-own-secret-value; also sk-proj-abc***xyz1"
    scrubbed = redact(text, ["my-own-secret-value"])
    assert "my-own-secret-value" not in scrubbed and "sk-proj" not in scrubbed
    assert scrubbed.count("[redacted]") == 2


# --- Over HTTP, through both SDKs ----------------------------------------------------------------


@dataclass(frozen=True)
class Vendor:
    """Which SDK, and which of the provider's two paths: ``complete`` (blocking, as curation
    uses it) or ``acomplete`` on the evaluation engine's event loop."""

    name: str
    mode: str

    def __str__(self) -> str:
        return self.name


@pytest.fixture(
    params=[Vendor(name, mode) for name in ("openai", "anthropic") for mode in ("sync", "async")],
    ids=lambda v: f"{v.name}-{v.mode}",
)
def vendor(request):
    return request.param


class OnTheLoop:
    """``complete`` through ``acomplete`` on the event loop of aio.py, as batches call it."""

    def __init__(self, provider) -> None:
        self.provider = provider
        aio.on_exit(provider.aclose)

    def complete(self, request: ChatRequest):
        return aio.submit(self.provider.acomplete(request)).result(timeout=30)


def _provider(vendor: Vendor, base: str | FakeVendorServer, **options):
    if vendor.mode == "async" and isinstance(options.get("sleep"), RecordingSleep):
        options["asleep"] = options["sleep"].asleep
    if vendor.name == "openai":
        url = base if isinstance(base, str) else base.openai_base_url
        provider = OpenAIChatProvider(base_url=url, api_key=API_KEY, **options)
    else:
        url = base if isinstance(base, str) else base.anthropic_base_url
        provider = AnthropicMessagesProvider(base_url=url, api_key=API_KEY, **options)
    return OnTheLoop(provider) if vendor.mode == "async" else provider


def test_429_waits_at_least_as_long_as_retry_after(server, vendor):
    sleep = RecordingSleep()
    server.script(Fault.rate_limited(retry_after_s=7))

    result = _provider(vendor, server, sleep=sleep).complete(_request())

    assert result.attempts == 2 and result.text == "echo: hello"
    assert len(sleep.calls) == 1 and sleep.calls[0] >= 7
    assert [entry.status for entry in server.requests()] == [429, 200]


def test_retry_after_ms_is_honoured(server, vendor):
    sleep = RecordingSleep()
    server.script(Fault.rate_limited(retry_after_s=None, retry_after_ms=2500))

    _provider(vendor, server, sleep=sleep).complete(_request())

    assert sleep.calls[0] >= 2.5


def test_a_server_asking_for_an_hour_is_not_waited_for(server, vendor):
    sleep = RecordingSleep()
    server.script(Fault.rate_limited(retry_after_s=3600))

    with pytest.raises(ProviderError) as caught:
        _provider(vendor, server, sleep=sleep).complete(_request())

    assert caught.value.retryable and caught.value.status == 429
    assert caught.value.attempts == 1 and sleep.calls == []
    assert "3600 s" in str(caught.value)


def test_500_then_success_resends_the_same_request(server, vendor):
    server.script(Fault.server_error())

    result = _provider(vendor, server, sleep=RecordingSleep()).complete(_request())

    assert result.attempts == 2
    first, second = server.requests()
    assert (first.status, second.status) == (500, 200)
    assert first.request_hash == second.request_hash


def test_persistent_5xx_gives_up_after_max_attempts(server, vendor):
    sleep = RecordingSleep()
    server.script(*[Fault.server_error(503)] * 3)

    with pytest.raises(ProviderError) as caught:
        _provider(vendor, server, sleep=sleep, max_attempts=3).complete(_request())

    assert (caught.value.status, caught.value.retryable, caught.value.attempts) == (503, True, 3)
    assert f"{vendor} returned HTTP 503" in str(caught.value)
    assert len(sleep.calls) == 2 and len(server.requests()) == 3


def test_a_reply_slower_than_the_timeout_is_retried_then_fails_as_retryable(server, vendor):
    server.script(*[Fault.slow(0.4)] * 3)
    provider = _provider(vendor, server, sleep=RecordingSleep(), timeout_s=0.1, max_attempts=3)

    with pytest.raises(ProviderError) as caught:
        provider.complete(_request())

    assert caught.value.retryable and caught.value.attempts == 3 and caught.value.status is None
    assert "timeout" in str(caught.value)
    # The server finished each slow reply only after the client had hung up.
    log = server.wait_for(lambda log: all(e.outcome != "pending" for e in log) and len(log) == 3)
    assert [entry.outcome for entry in log] == ["aborted"] * 3


def test_one_slow_reply_then_a_fast_one_succeeds(server, vendor):
    server.script(Fault.slow(0.4))

    result = _provider(vendor, server, sleep=RecordingSleep(), timeout_s=0.1).complete(_request())

    assert result.attempts == 2 and result.text == "echo: hello"


def test_400_fails_at_once_with_the_servers_message(server, vendor):
    sleep = RecordingSleep()
    server.script(Fault.bad_request("Invalid value for 'temperature': 7 is above the maximum."))

    with pytest.raises(ProviderError) as caught:
        _provider(vendor, server, sleep=sleep).complete(_request())

    error = caught.value
    assert (error.status, error.retryable, error.attempts) == (400, False, 1)
    assert f"{vendor} returned HTTP 400" in str(error)
    assert "7 is above the maximum" in str(error)
    assert sleep.calls == [] and len(server.requests()) == 1


def test_401_fails_at_once_without_revealing_the_key(server, vendor):
    server.script(Fault.unauthorized())

    with pytest.raises(ProviderError) as caught:
        _provider(vendor, server, sleep=RecordingSleep()).complete(_request())

    error = caught.value
    assert (error.status, error.retryable, error.attempts) == (401, False, 1)
    assert "Incorrect API key provided" in str(error)
    assert API_KEY not in str(error) and API_KEY not in repr(error.args)
    assert error.__cause__ is None and error.__suppress_context__


def test_retry_log_lines_do_not_reveal_the_key(server, vendor, caplog):
    caplog.set_level(logging.DEBUG)
    server.script(Fault("status", status=503, message="upstream refused key {api_key}"))

    _provider(vendor, server, sleep=RecordingSleep()).complete(_request())

    assert "upstream refused key [redacted]" in caplog.text
    assert API_KEY not in caplog.text


def test_a_malformed_body_is_retried(server, vendor):
    server.script(Fault.malformed())

    result = _provider(vendor, server, sleep=RecordingSleep()).complete(_request())

    assert result.attempts == 2


def test_a_body_that_stays_malformed_fails_as_retryable(server, vendor):
    server.script(*[Fault.malformed()] * 2)

    with pytest.raises(ProviderError) as caught:
        _provider(vendor, server, sleep=RecordingSleep(), max_attempts=2).complete(_request())

    assert caught.value.retryable and caught.value.attempts == 2
    assert "malformed JSON" in str(caught.value)


def test_a_dropped_connection_is_retried(server, vendor):
    server.script(Fault.disconnect())

    result = _provider(vendor, server, sleep=RecordingSleep()).complete(_request())

    assert result.attempts == 2
    log = server.wait_for(lambda log: log[-1].outcome != "pending")
    assert [entry.outcome for entry in log] == ["dropped", "completed"]


def test_an_unreachable_server_fails_as_retryable(vendor):
    with socket.socket() as probe:  # a port nobody listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}" + ("/v1" if vendor.name == "openai" else "")
    provider = _provider(vendor, base, sleep=RecordingSleep(), max_attempts=2)

    with pytest.raises(ProviderError) as caught:
        provider.complete(_request())

    assert caught.value.retryable and caught.value.attempts == 2
    assert "could not be reached" in str(caught.value)
