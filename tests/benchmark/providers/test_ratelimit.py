"""Rate and concurrency limits: against a real Redis (shared by every worker) and in-process.

Redis tests use REDIS_URL or redis://127.0.0.1:6379/15 and a fresh key prefix per test; they
are skipped, saying why, only when no Redis answers there."""

import socket
import threading
import time
import uuid

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from benchmark.providers.base import ChatMessage, ProviderError
from benchmark.providers.ratelimit import (
    EndpointLimiter,
    LocalConcurrencyLimiter,
    LocalRateLimiter,
    RedisConcurrencyLimiter,
    RedisRateLimiter,
    estimate_request_tokens,
    limiters_for,
)
from tests.benchmark.providers.conftest import REDIS_URL, FakeClock, redis_test_client


def _grants(limiter, count: int, tokens: int = 0) -> int:
    return sum(limiter.try_acquire(tokens) == 0 for _ in range(count))


# --- Redis: rate -----------------------------------------------------------------------------


def test_redis_requests_per_minute_allow_a_full_minute_burst_then_ask_to_wait(redis_client, prefix):
    limiter = RedisRateLimiter(redis_client, key_prefix=prefix, rpm=60)

    assert _grants(limiter, 60) == 60
    wait_s = limiter.try_acquire()
    assert 0 < wait_s <= 1.0  # one request refills every second at 60/min


def test_redis_tokens_per_minute_limit_and_a_refused_call_takes_nothing(redis_client, prefix):
    limiter = RedisRateLimiter(redis_client, key_prefix=prefix, rpm=2, tpm=1000)

    assert limiter.try_acquire(600) == 0
    wait_s = limiter.try_acquire(600)
    assert 11 < wait_s <= 12  # 200 tokens short at 1000/min
    assert limiter.try_acquire(300) == 0  # the refusal took neither a request nor tokens
    assert limiter.try_acquire(0) > 0  # now the two requests are spent


def test_redis_bucket_refills_in_the_time_it_says(redis_client, prefix):
    limiter = RedisRateLimiter(redis_client, key_prefix=prefix, tpm=60_000)  # 1000 tokens/s
    assert limiter.try_acquire(60_000) == 0

    wait_s = limiter.try_acquire(50)
    assert 0 < wait_s <= 0.05
    time.sleep(wait_s + 0.01)
    assert limiter.try_acquire(50) == 0


def test_redis_blocking_acquire_sleeps_until_it_fits(redis_client, prefix):
    limiter = RedisRateLimiter(redis_client, key_prefix=prefix, tpm=60_000)
    limiter.try_acquire(60_000)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        time.sleep(seconds)

    waited = limiter.acquire(30, sleep=sleep)

    assert slept and 0 < waited == sum(slept) < 0.2


def test_two_clients_share_one_limit(redis_client, prefix):
    other_client = redis_test_client()
    first = RedisRateLimiter(redis_client, key_prefix=prefix, rpm=10)
    second = RedisRateLimiter(other_client, key_prefix=prefix, rpm=10)

    assert _grants(first, 5) == 5 and _grants(second, 5) == 5
    assert first.try_acquire() > 0 and second.try_acquire() > 0
    other_client.close()


def test_concurrent_workers_never_overspend_the_bucket(redis_client, prefix):
    granted = []

    def worker() -> None:
        limiter = RedisRateLimiter(redis_test_client(), key_prefix=prefix, rpm=25)
        granted.append(_grants(limiter, 10))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    assert sum(granted) == 25  # 80 attempts; refill at 25/min adds nothing within a second


# --- Redis: concurrency ------------------------------------------------------------------------


def test_redis_concurrency_caps_and_a_release_frees_a_slot(redis_client, prefix):
    slots = RedisConcurrencyLimiter(redis_client, key_prefix=prefix, limit=2)
    first, second = slots.try_acquire(), slots.try_acquire()

    assert first is not None and second is not None
    assert slots.try_acquire() is None and slots.in_use() == 2
    first.release()
    first.release()  # idempotent: must not free someone else's slot
    third = slots.try_acquire()
    assert third is not None and slots.in_use() == 2
    second.release()
    third.release()
    assert slots.in_use() == 0


def test_redis_an_expired_lease_frees_its_slot(redis_client, prefix):
    slots = RedisConcurrencyLimiter(redis_client, key_prefix=prefix, limit=1, lease_s=0.1)
    abandoned = slots.try_acquire()  # a worker killed mid-call never releases
    assert abandoned is not None and slots.try_acquire() is None

    time.sleep(0.15)

    assert slots.try_acquire() is not None


def test_redis_a_waiter_gets_the_slot_when_another_client_releases(redis_client, prefix):
    holder = RedisConcurrencyLimiter(redis_client, key_prefix=prefix, limit=1)
    waiter = RedisConcurrencyLimiter(redis_test_client(), key_prefix=prefix, limit=1)
    held = holder.acquire()
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(waiter.acquire()))
    thread.start()

    thread.join(0.15)
    assert thread.is_alive() and got == []
    held.release()
    thread.join(2)
    assert len(got) == 1


def test_a_redis_outage_is_a_retryable_provider_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    unreachable = redis.Redis(port=port, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    limiter = EndpointLimiter(rate=RedisRateLimiter(unreachable, key_prefix="x", rpm=5))

    with pytest.raises(ProviderError, match="Redis") as caught:
        limiter.acquire(10)

    assert caught.value.retryable


def _poison(client: redis.Redis) -> None:
    """Close the read buffer of every idle pooled connection, as a Redis handshake that timed
    out leaves it: redis-py then raises ``ValueError: I/O operation on closed file`` (issue
    #14), not one of its own errors, and keeps the connection in its pool."""
    client.ping()
    for connection in list(client.connection_pool._available_connections):
        connection._parser._buffer._buffer.close()


@pytest.mark.parametrize("kind", ["rate", "concurrency"])
def test_a_connection_closed_under_the_client_is_retryable_and_then_dropped(
    redis_client, prefix, kind
):
    if kind == "rate":
        limiter = EndpointLimiter(rate=RedisRateLimiter(redis_client, key_prefix=prefix, rpm=50))
    else:
        slots = RedisConcurrencyLimiter(redis_client, key_prefix=prefix, limit=5)
        limiter = EndpointLimiter(concurrency=slots)
    _poison(redis_client)
    with pytest.raises(ProviderError, match="Redis") as caught:
        limiter.acquire(10)
    assert caught.value.retryable  # the provider's backoff applies, as to an outage
    with limiter.acquire(10):  # the broken connection is gone: the next try works
        pass


# --- In-process --------------------------------------------------------------------------------


def test_local_requests_per_minute_burst_then_wait_then_refill():
    clock = FakeClock()
    limiter = LocalRateLimiter(rpm=60, tpm=None, clock=clock)

    assert _grants(limiter, 60) == 60
    assert limiter.try_acquire() == pytest.approx(1.0)
    clock.now += 1.0
    assert limiter.try_acquire() == 0


def test_local_tokens_per_minute_and_oversized_requests():
    clock = FakeClock()
    limiter = LocalRateLimiter(rpm=None, tpm=1000, clock=clock)

    assert limiter.try_acquire(600) == 0
    assert limiter.try_acquire(600) == pytest.approx(12.0)
    clock.now += 60
    # Bigger than a minute's budget: allowed once the bucket is full, or it never would be.
    assert limiter.try_acquire(5000) == 0


def test_local_rate_limiter_is_thread_safe():
    limiter = LocalRateLimiter(rpm=25, tpm=None)
    granted = []
    threads = [
        threading.Thread(target=lambda: granted.append(_grants(limiter, 10))) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    assert sum(granted) == 25


def test_local_concurrency_caps_releases_and_expires():
    clock = FakeClock()
    slots = LocalConcurrencyLimiter(2, lease_s=30, clock=clock)
    first, second = slots.try_acquire(), slots.try_acquire()
    assert first and second and slots.try_acquire() is None

    with first:
        pass
    assert slots.in_use() == 1
    assert slots.try_acquire() is not None and slots.try_acquire() is None

    clock.now += 31  # every lease expired
    assert slots.in_use() == 0 and slots.try_acquire() is not None


def test_local_concurrency_waiter_wakes_on_release():
    slots = LocalConcurrencyLimiter(1)
    held = slots.acquire()
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(slots.acquire()))
    thread.start()

    thread.join(0.1)
    assert thread.is_alive()
    held.release()
    thread.join(2)
    assert len(got) == 1


# --- Per endpoint --------------------------------------------------------------------------------


def test_endpoint_limiter_waits_for_rate_then_holds_a_slot_until_release():
    clock = FakeClock()
    rate = LocalRateLimiter(rpm=1, tpm=None, clock=clock)
    slots = LocalConcurrencyLimiter(1)
    limiter = EndpointLimiter(rate=rate, concurrency=slots)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    with limiter.acquire(100, sleep=sleep):
        assert slots.in_use() == 1
    with limiter.acquire(100, sleep=sleep):
        pass

    assert slept == [pytest.approx(60.0)] and slots.in_use() == 0


def test_no_limits_means_no_waiting():
    with EndpointLimiter().acquire(10**9):
        pass


def test_limiters_are_per_endpoint_singletons_and_local_without_redis(settings):
    settings.REDIS_URL = None
    name = f"endpoint-{uuid.uuid4().hex}"

    limiter = limiters_for(name, rpm=60, tpm=None, max_concurrency=4)

    assert limiter is limiters_for(name, rpm=60, tpm=None, max_concurrency=4)
    assert limiter is not limiters_for(f"{name}-other", rpm=60, tpm=None, max_concurrency=4)
    assert isinstance(limiter.rate, LocalRateLimiter)
    assert isinstance(limiter.concurrency, LocalConcurrencyLimiter)
    unlimited = limiters_for(name, rpm=None, tpm=None, max_concurrency=None)
    assert unlimited.rate is None and unlimited.concurrency is None


def test_limiters_are_shared_through_redis_when_configured(settings, redis_client):
    settings.REDIS_URL = REDIS_URL
    name = f"test-endpoint-{uuid.uuid4().hex}"
    limiter = limiters_for(name, rpm=2, tpm=None, max_concurrency=1)
    assert isinstance(limiter.rate, RedisRateLimiter)
    assert isinstance(limiter.concurrency, RedisConcurrencyLimiter)
    assert limiter.rate.key_prefix == f"proactbench:limits:{name}"
    try:
        # Another process builds its own limiter over the same keys:
        elsewhere = RedisRateLimiter(redis_test_client(), key_prefix=limiter.rate.key_prefix, rpm=2)
        assert limiter.rate.try_acquire() == 0 and elsewhere.try_acquire() == 0
        assert limiter.rate.try_acquire() > 0
    finally:
        redis_client.delete(limiter.rate.key, limiter.concurrency.key)


def test_limits_must_be_positive_integers():
    with pytest.raises(ValueError, match="rpm"):
        limiters_for("bad", rpm=0, tpm=None, max_concurrency=None)
    with pytest.raises(ValueError, match="max_concurrency"):
        limiters_for("bad", rpm=None, tpm=None, max_concurrency=2.5)


def test_token_estimate_counts_prompt_characters_and_the_output_budget():
    messages = [ChatMessage("user", "x" * 400)]

    assert estimate_request_tokens(messages, max_output_tokens=50) == 150
    assert estimate_request_tokens(messages, max_output_tokens=None) == 100 + 1024
