"""Limits learnt from the vendors' headers: stored in the shared limiter (Redis) so every worker
obeys them, configured limits winning, a 429 re-syncing the buckets; and the providers handing
their responses' headers to the limiter, for both wire formats."""

import asyncio
import time

import pytest

from benchmark.providers.factory import provider_for
from benchmark.providers.ratelimit import EndpointLimiter, LocalRateLimiter, RedisRateLimiter
from benchmark.providers.ratelimit_headers import ObservedLimits
from tests.benchmark.providers.conftest import (
    REDIS_URL,
    FakeClock,
    hello,
    redis_test_client,
    unsaved_endpoint,
)
from tests.fakes.vendor_server import FakeVendorServer, RateLimits


def _grants(limiter, count: int, tokens: int = 0) -> int:
    return sum(limiter.try_acquire(tokens) == 0 for _ in range(count))


def test_nothing_learnt_means_no_limit_and_no_redis_state(redis_client, prefix):
    limiter = RedisRateLimiter(redis_client, key_prefix=prefix, learn=True)
    assert _grants(limiter, 50) == 50
    assert not list(redis_client.scan_iter(f"{prefix}:*"))


def test_a_learnt_limit_is_shared_and_starts_from_what_the_server_said_remains(
    redis_client, prefix
):
    worker_a = RedisRateLimiter(redis_client, key_prefix=prefix, learn=True)
    worker_b = RedisRateLimiter(redis_test_client(), key_prefix=prefix, learn=True)

    worker_a.observe(ObservedLimits(rpm=30, tpm=9000, remaining_requests=3, remaining_tokens=900))

    assert redis_client.hgetall(worker_a.learnt_key) == {b"rpm": b"30", b"tpm": b"9000"}
    assert 0 < redis_client.pttl(worker_a.learnt_key) <= 3_600_000
    # Worker b never saw a header: it looks the learnt limits up and shares the buckets.
    assert worker_b.try_acquire(100) == 0
    assert worker_a.try_acquire(100) == 0
    assert worker_b.try_acquire(800) > 0  # 700 tokens left
    assert worker_a.try_acquire(100) == 0
    assert worker_b.try_acquire(100) == pytest.approx(2.0, abs=0.05)  # 3 requests spent, 30/min


def test_requests_sent_unmetered_after_the_observed_one_are_charged(redis_client, prefix):
    limiter = RedisRateLimiter(redis_client, key_prefix=prefix, learn=True)
    assert _grants(limiter, 1) == 1  # unmetered: no limit known yet
    first_sent = time.monotonic()
    time.sleep(0.01)
    assert _grants(limiter, 4) == 4  # sent after the first: the server may not count them
    # The first one's response: 10 remained when the server admitted it.
    limiter.observe(ObservedLimits(rpm=60, remaining_requests=10), sent_at=first_sent)
    assert _grants(limiter, 7) == 6
    # Another process had sent 2 unmetered requests; it learns an already stored limit from
    # the response to its first, and is charged for its second.
    other = RedisRateLimiter(redis_test_client(), key_prefix=prefix, learn=True)
    other._looked_up_at = time.monotonic()  # it looked before the limit was stored
    assert _grants(other, 1) == 1
    other_first_sent = time.monotonic()
    time.sleep(0.01)
    assert _grants(other, 1) == 1
    seconds, microseconds = redis_client.time()
    now_ms = seconds * 1000 + microseconds // 1000
    redis_client.hset(limiter.key, mapping={"req": "5", "ts": str(now_ms)})
    other.observe(ObservedLimits(rpm=60, remaining_requests=30), sent_at=other_first_sent)
    assert _grants(other, 5) == 4  # 5 - 1; the limit did not change, so no reset to 30


def test_in_process_learning_charges_the_unmetered_requests_too():
    limiter = LocalRateLimiter(rpm=None, tpm=None, learn=True, clock=FakeClock())
    assert _grants(limiter, 3) == 3
    limiter.observe(ObservedLimits(rpm=60, remaining_requests=10), sent_at=None)  # all 3
    assert _grants(limiter, 10) == 7


def test_an_unchanged_limit_does_not_reset_the_buckets(redis_client, prefix):
    limiter = RedisRateLimiter(redis_client, key_prefix=prefix, learn=True)
    limiter.observe(ObservedLimits(rpm=60, remaining_requests=2))
    assert _grants(limiter, 3) == 2
    # Later responses report the server's (stale, full) remaining: the buckets keep their own.
    limiter.observe(ObservedLimits(rpm=60, remaining_requests=60))
    assert limiter.try_acquire() > 0
    # A new limit restarts them from what remains.
    limiter.observe(ObservedLimits(rpm=120, remaining_requests=5))
    assert _grants(limiter, 6) == 5


def test_a_429_resyncs_the_buckets_even_with_configured_limits(redis_client, prefix):
    limiter = RedisRateLimiter(redis_client, key_prefix=prefix, rpm=600, learn=True)
    assert _grants(limiter, 5) == 5
    limiter.observe(ObservedLimits(rpm=6, remaining_requests=100))  # configured rpm wins
    assert _grants(limiter, 5) == 5
    limiter.observe(ObservedLimits(rpm=6, remaining_requests=0), refused=True)
    assert limiter.try_acquire() == pytest.approx(0.1, abs=0.01)  # 600/min: 0.1 s a request


def test_a_429_without_headers_does_not_refill_the_buckets(redis_client, prefix):
    limiter = RedisRateLimiter(redis_client, key_prefix=prefix, rpm=60, learn=True)
    assert _grants(limiter, 60) == 60
    limiter.observe(ObservedLimits(), refused=True)  # e.g. a proxy's 429
    assert limiter.try_acquire() > 0
    local = LocalRateLimiter(rpm=60, tpm=None, learn=True, clock=FakeClock())
    assert _grants(local, 60) == 60
    local.observe(ObservedLimits(), refused=True)
    assert local.try_acquire() > 0


def test_the_unconfigured_limit_is_learnt_beside_a_configured_one(redis_client, prefix):
    limiter = RedisRateLimiter(redis_client, key_prefix=prefix, rpm=1000, learn=True)
    limiter.observe(ObservedLimits(rpm=1, tpm=100, remaining_tokens=100))
    assert redis_client.hgetall(limiter.learnt_key) == {b"tpm": b"100"}
    assert limiter.try_acquire(60) == 0 and limiter.try_acquire(60) > 0


def test_in_process_learning():
    clock = FakeClock()
    limiter = LocalRateLimiter(rpm=None, tpm=None, learn=True, clock=clock)
    assert _grants(limiter, 100) == 100
    # The response to the last of them: none was sent after it, nothing to charge.
    limiter.observe(ObservedLimits(rpm=60, remaining_requests=1), sent_at=time.monotonic())
    assert _grants(limiter, 2) == 1
    limiter.observe(ObservedLimits(rpm=60, remaining_requests=60))  # unchanged: kept
    assert limiter.try_acquire() == pytest.approx(1.0)
    clock.now += 1
    assert limiter.try_acquire() == 0
    limiter.observe(ObservedLimits(rpm=60, remaining_requests=0), refused=True)
    assert limiter.try_acquire() == pytest.approx(1.0)
    configured = LocalRateLimiter(rpm=2, tpm=None, learn=True, clock=clock)
    configured.observe(ObservedLimits(rpm=1000, remaining_requests=1000))
    assert configured.rpm == 2 and _grants(configured, 3) == 2


def test_waiters_on_one_loop_queue_so_only_one_polls():
    class CountingRate(LocalRateLimiter):
        tries = 0

        def try_acquire(self, tokens: int = 0) -> float:
            CountingRate.tries += 1
            return super().try_acquire(tokens)

    # 600/min: one grant per 0.1 s once the burst of 600 is spent.
    rate = CountingRate(rpm=600, tpm=None)
    assert _grants(rate, 600) == 600
    CountingRate.tries = 0
    limiter = EndpointLimiter(rate=rate)

    async def many() -> None:
        await asyncio.gather(*(limiter.aacquire(0) for _ in range(20)))

    asyncio.run(many())
    # 20 grants, each after about one wait: 20 granted tries and ~20 refused ones, not the
    # ~200 that 20 waiters polling together would make.
    assert 20 <= CountingRate.tries <= 50


@pytest.mark.parametrize(("provider", "api"), [("openai", "openai"), ("anthropic", "anthropic")])
def test_providers_learn_the_limits_from_the_headers_into_redis(
    settings, redis_client, monkeypatch, provider, api
):
    settings.REDIS_URL = REDIS_URL
    monkeypatch.setenv("TEST_API_KEY", "k")
    with FakeVendorServer(rate_limits=RateLimits(rpm=3, tpm=100_000)) as server:
        base_url = server.openai_base_url if api == "openai" else server.anthropic_base_url
        endpoint = unsaved_endpoint(
            provider, model_name="m", base_url=base_url, api_key_env="TEST_API_KEY"
        )
        key_prefix = f"proactbench:limits:{endpoint.name}"
        try:
            built = provider_for(endpoint)
            built.complete(hello("m"))
            assert redis_client.hgetall(f"{key_prefix}:learnt") == {
                b"rpm": b"3",
                b"tpm": b"100000",
            }
            asyncio.run(_acomplete(built))
            # 2 of the server's 3 requests are spent: one left, then the limiter says wait.
            rate = built._limiter.rate
            assert rate.try_acquire(10) == 0
            assert rate.try_acquire(10) > 0
            assert [entry.status for entry in server.requests()] == [200, 200]
        finally:
            redis_client.delete(f"{key_prefix}:learnt", f"{key_prefix}:rate")


async def _acomplete(provider) -> None:
    try:
        await provider.acomplete(hello("m"))
    finally:
        await provider.aclose()


def test_a_429_teaches_the_limiter_too(settings, redis_client, monkeypatch):
    settings.REDIS_URL = REDIS_URL
    monkeypatch.setenv("TEST_API_KEY", "k")
    with FakeVendorServer(rate_limits=RateLimits(rpm=1)) as server:
        endpoint = unsaved_endpoint(
            "openai", model_name="m", base_url=server.openai_base_url, api_key_env="TEST_API_KEY"
        )
        key_prefix = f"proactbench:limits:{endpoint.name}"
        # Another client spent the budget on the same key: the server refuses our first call.
        other = unsaved_endpoint(
            "openai", model_name="m", base_url=server.openai_base_url, api_key_env="TEST_API_KEY"
        )
        try:
            provider_for(other).complete(hello("m"))
            built = provider_for(endpoint)
            built.max_attempts = 1
            with pytest.raises(Exception, match="429"):
                built.complete(hello("m"))
            assert redis_client.hgetall(f"{key_prefix}:learnt") == {b"rpm": b"1"}
            assert built._limiter.rate.try_acquire() > 0  # remaining 0: wait, do not send
        finally:
            for name in (endpoint.name, other.name):
                prefix = f"proactbench:limits:{name}"
                redis_client.delete(f"{prefix}:learnt", f"{prefix}:rate")
