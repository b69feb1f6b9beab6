"""Client-side limits per endpoint: requests/min, tokens/min and concurrent calls.

Why: a vendor enforces its limits per key, across every worker we run; if each worker throttled
only itself, N workers would send N times the budget and spend their time in 429 back-offs. So
with ``settings.REDIS_URL`` set the limits live in Redis and are shared by every worker process
on every machine; without it (the embedded mode: one process) in-process equivalents do the job.

- Rate: two token buckets per endpoint (requests and tokens), each holding up to one minute's
  budget and refilling continuously; a call takes 1 request and its estimated tokens from both
  or, if either is short, nothing (and learns how long to wait). In Redis the check-and-take is
  one Lua script, so concurrent workers cannot both spend the last token, and it reads the clock
  of the Redis server, so the machines' clocks need not agree.
- Concurrency: a semaphore whose slots are leases with an expiry, so a slot held by a worker
  that was killed mid-call frees itself once its lease runs out.
- Learnt limits: a limit the endpoint does not configure is learnt from the vendor's rate-limit
  headers (ratelimit_headers.py), which providers hand to ``EndpointLimiter.observe``. A newly
  seen limit is stored beside the buckets (``{prefix}:learnt``, so every worker obeys it) and
  the buckets restart from what the server said remains; after that the client's buckets run
  on their own (re-syncing on every response would throw away the fractions of a request they
  have refilled, and lag the server by a round trip). A 429 re-syncs them down to the server's
  remaining budget, since it proves they were out of step (another client on the same key).
  Until a process has seen a limit it sends unthrottled (and charges those calls when it learns
  one: ``_unmetered_after``), and an endpoint whose server sends no such headers (most
  OpenAI-compatible servers) never costs a Redis round trip for its rate.
- Waiting: in a process, the coroutines (or threads) waiting on one endpoint's rate queue on a
  lock, so only the head of the queue polls the buckets; otherwise every waiter would wake
  and ask Redis each time one request's budget refills (hundreds of calls per grant).

``limiters_for`` hands out one ``EndpointLimiter`` per endpoint and process; providers call
``with limiter.acquire(estimated_tokens): <one HTTP attempt>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
import uuid
import weakref
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol, Self

import redis
from django.conf import settings

from benchmark.providers.base import ChatMessage, ImagePart, ProviderError
from benchmark.providers.images import openai_image_tokens
from benchmark.providers.ratelimit_headers import ObservedLimits

logger = logging.getLogger(__name__)

Sleep = Callable[[float], None]
Clock = Callable[[], float]

DEFAULT_LEASE_S = 300.0
"""Longer than any single attempt (the default call timeout is 120 s)."""
DEFAULT_OUTPUT_TOKENS_ESTIMATE = 1024
_POLL_S = 0.05
"""How often a Redis concurrency waiter looks again: releases are not pushed to waiters."""
_UNMETERED_KEPT = 4096
"""Send times kept of requests let through before any limit was known (``_unmetered_after``);
bounded, since a server that never sends limits would otherwise grow the list forever."""
LEARNT_TTL_S = 3600.0
"""How long a learnt limit is kept in Redis after it was last confirmed."""
LEARNT_RECHECK_S = 60.0
"""How often a process confirms (in Redis) a learnt limit it keeps seeing unchanged."""


def estimate_request_tokens(
    messages: Iterable[ChatMessage],
    *,
    max_output_tokens: int | None,
    image_tokens: Callable[[ImagePart], int] | None = None,
) -> int:
    """Tokens a call may use, for the tokens/min bucket: prompt characters / 4 (OpenAI's rule of
    thumb for English), plus each image's tokens by the vendor's formula (``image_tokens``, from
    ``benchmark.providers.images``; OpenAI's when not given), plus the output budget, which is
    also how OpenAI counts a request against its own tokens/min limit before it knows the real
    output."""
    messages = tuple(messages)
    prompt = sum(len(message.content) for message in messages) // 4
    images = [image for message in messages for image in message.images]
    if images:
        count = image_tokens or openai_image_tokens
        prompt += sum(count(image) for image in images)
    return prompt + (max_output_tokens or DEFAULT_OUTPUT_TOKENS_ESTIMATE)


def _unmetered_after(sent: deque[float], sent_at: float | None) -> int:
    """Requests let through unmetered that the server's remaining budget, reported with the
    response to a request sent at ``sent_at``, may not count: the vendors count a request when
    it is admitted, so those sent after it (all of them, if ``sent_at`` is unknown). Charging
    them when a limit is first learnt keeps processes that start at once from overspending by
    about their calls in flight (tests/benchmark/providers/test_ratelimit_processes.py); a
    request sent after it but admitted before it is charged twice, on the safe side."""
    if sent_at is None:
        return len(sent)
    return sum(1 for when in sent if when > sent_at)


class Lease:
    """A held concurrency slot. ``release()`` is idempotent; use it as a context manager."""

    __slots__ = ("_release",)

    def __init__(self, release: Callable[[], None] | None = None) -> None:
        self._release = release

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class RateLimiter(Protocol):
    def try_acquire(self, tokens: int = 0) -> float:
        """Take 1 request and ``tokens`` if both fit (returns 0.0); else take nothing and return
        the seconds to wait before they will."""
        ...

    def acquire(self, tokens: int = 0, *, sleep: Sleep = time.sleep) -> float:
        """Wait until the call fits, take it, and return the seconds waited."""
        ...

    def observe(
        self, limits: ObservedLimits, *, refused: bool = False, sent_at: float | None = None
    ) -> None:
        """Learn from a response's rate-limit headers (``refused``: it was a 429; ``sent_at``:
        when its request left, ``time.monotonic``)."""
        ...


class ConcurrencyLimiter(Protocol):
    def try_acquire(self) -> Lease | None: ...

    def acquire(self, *, sleep: Sleep = time.sleep) -> Lease: ...

    def in_use(self) -> int:
        """Slots held by unexpired leases."""
        ...


def _check_limit(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be a positive integer or None, not {value!r}")


class _BlockingAcquire(ABC):
    """``acquire`` in terms of ``try_acquire``: wait as long as told, then try again (another
    worker may have taken the refill meanwhile)."""

    @abstractmethod
    def try_acquire(self, tokens: int = 0) -> float:
        """Take ``tokens`` now and return 0, or return how many seconds to wait first."""

    def acquire(self, tokens: int = 0, *, sleep: Sleep = time.sleep) -> float:
        waited = 0.0
        while (wait_s := self.try_acquire(tokens)) > 0:
            sleep(wait_s)
            waited += wait_s
        return waited


# --- In-process ------------------------------------------------------------------------------


class LocalRateLimiter(_BlockingAcquire):
    """Thread-safe token buckets for one process. ``None`` limits are unlimited (or, with
    ``learn``, learnt by ``observe``); a request for more tokens than a whole minute's budget is
    treated as a full bucket (it could never fit)."""

    def __init__(
        self,
        *,
        rpm: int | None,
        tpm: int | None,
        learn: bool = False,
        clock: Clock = time.monotonic,
    ) -> None:
        _check_limit("rpm", rpm)
        _check_limit("tpm", tpm)
        self.rpm, self.tpm = rpm, tpm
        self.learns_rpm, self.learns_tpm = learn and rpm is None, learn and tpm is None
        self._clock = clock
        self._lock = threading.Lock()
        self._unmetered: deque[float] = deque(maxlen=_UNMETERED_KEPT)
        """As ``RedisRateLimiter._unmetered``."""
        self._requests = float(rpm or 0)
        self._tokens = float(tpm or 0)
        self._updated = clock()

    def try_acquire(self, tokens: int = 0) -> float:
        with self._lock:
            if (self.learns_rpm or self.learns_tpm) and not (self.rpm or self.tpm):
                self._unmetered.append(time.monotonic())
                return 0.0
            self._refill_locked()
            wait_s = 0.0
            if self.rpm and self._requests < 1:
                wait_s = (1 - self._requests) * 60 / self.rpm
            if self.tpm:
                tokens = min(tokens, self.tpm)
                if self._tokens < tokens:
                    wait_s = max(wait_s, (tokens - self._tokens) * 60 / self.tpm)
            if wait_s > 0:
                return wait_s
            if self.rpm:
                self._requests -= 1
            if self.tpm:
                self._tokens -= tokens
            return 0.0

    def observe(
        self, limits: ObservedLimits, *, refused: bool = False, sent_at: float | None = None
    ) -> None:
        with self._lock:
            self._refill_locked()
            changed = False
            if self.learns_rpm and limits.rpm and limits.rpm != self.rpm:
                self.rpm, changed = limits.rpm, True
            if self.learns_tpm and limits.tpm and limits.tpm != self.tpm:
                self.tpm, changed = limits.tpm, True
            charge = 0
            if changed and self._unmetered:
                charge = _unmetered_after(self._unmetered, sent_at)
                self._unmetered.clear()
            if not (changed or refused):
                return
            requests, tokens = limits.remaining_requests, limits.remaining_tokens
            if changed:
                # A new limit: start from what the server said remains (full if it did not).
                if self.rpm:
                    self._requests = float(
                        self.rpm if requests is None else min(requests, self.rpm)
                    )
                    self._requests -= charge
                if self.tpm:
                    self._tokens = float(self.tpm if tokens is None else min(tokens, self.tpm))
            else:
                # A 429: never more than the server said remains.
                if requests is not None:
                    self._requests = min(self._requests, float(requests))
                if tokens is not None:
                    self._tokens = min(self._tokens, float(tokens))

    def _refill_locked(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._updated)
        self._updated = now
        if self.rpm:
            self._requests = min(self.rpm, self._requests + elapsed * self.rpm / 60)
        if self.tpm:
            self._tokens = min(self.tpm, self._tokens + elapsed * self.tpm / 60)


class LocalConcurrencyLimiter:
    """Thread-safe semaphore with expiring leases (the in-process twin of the Redis one)."""

    def __init__(
        self, limit: int, *, lease_s: float = DEFAULT_LEASE_S, clock: Clock = time.monotonic
    ) -> None:
        _check_limit("limit", limit)
        self.limit, self.lease_s = limit, lease_s
        self._clock = clock
        self._leases: dict[int, float] = {}
        self._ids = itertools.count()
        self._changed = threading.Condition()

    def try_acquire(self) -> Lease | None:
        with self._changed:
            return self._try_acquire_locked()

    def acquire(self, *, sleep: Sleep = time.sleep) -> Lease:
        """Blocks on a condition (woken by releases), so ``sleep`` is not needed here."""
        with self._changed:
            while (lease := self._try_acquire_locked()) is None:
                next_expiry = min(self._leases.values()) - self._clock()
                self._changed.wait(timeout=max(next_expiry, 0.001))
            return lease

    def in_use(self) -> int:
        with self._changed:
            self._reap_locked()
            return len(self._leases)

    def _try_acquire_locked(self) -> Lease | None:
        self._reap_locked()
        if len(self._leases) >= self.limit:
            return None
        lease_id = next(self._ids)
        self._leases[lease_id] = self._clock() + self.lease_s
        return Lease(lambda: self._release(lease_id))

    def _reap_locked(self) -> None:
        now = self._clock()
        for lease_id in [i for i, expiry in self._leases.items() if expiry <= now]:
            del self._leases[lease_id]

    def _release(self, lease_id: int) -> None:
        with self._changed:
            if self._leases.pop(lease_id, None) is not None:
                self._changed.notify()


# --- Redis (shared by every process on every machine) ------------------------------------------


def _key_prefix(endpoint_name: str) -> str:
    return f"proactbench:limits:{endpoint_name}"


def _learnt_key(key_prefix: str) -> str:
    return f"{key_prefix}:learnt"


def _leases_key(key_prefix: str) -> str:
    return f"{key_prefix}:leases"


@contextlib.contextmanager
def _client_failures(client: redis.Redis) -> Iterator[None]:
    """Whatever the Redis client raises leaves as a ``redis.RedisError`` (which the limiter's
    callers turn into a retryable ``ProviderError``), and the pool's idle connections are
    dropped. redis-py reports a connection lost during its handshake as ``ValueError: I/O
    operation on closed file`` and hands that connection back to the pool as it is, where every
    later command would meet the same error (issue #14)."""
    try:
        yield
    except Exception as exc:
        try:
            client.connection_pool.disconnect(inuse_connections=False)
        except Exception:  # a broken connection may fail to close, too: drop it anyway
            client.connection_pool.reset()
        if isinstance(exc, redis.RedisError):
            raise
        raise redis.ConnectionError(f"{type(exc).__name__}: {exc}") from exc


# KEYS[1]: hash {req, tok, ts}; KEYS[2]: hash {rpm, tpm} of learnt limits. ARGV: rpm, tpm
# (0 = unlimited, -1 = the learnt one, unlimited while none is), tokens wanted.
# Returns 0 when granted (and taken), else the milliseconds to wait (nothing taken).
# Buckets start full and hold one minute's budget; state is written only when a call is granted.
_RATE_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rpm, tpm, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if rpm < 0 or tpm < 0 then
  local learnt = redis.call('HMGET', KEYS[2], 'rpm', 'tpm')
  if rpm < 0 then rpm = tonumber(learnt[1]) or 0 end
  if tpm < 0 then tpm = tonumber(learnt[2]) or 0 end
end
local state = redis.call('HMGET', KEYS[1], 'req', 'tok', 'ts')
local elapsed = math.max(0, now - (tonumber(state[3]) or now))
local wait, req, tok = 0, 0, 0
if rpm > 0 then
  req = math.min(rpm, (tonumber(state[1]) or rpm) + elapsed * rpm / 60000)
  if req < 1 then wait = (1 - req) * 60000 / rpm end
end
if tpm > 0 then
  want = math.min(want, tpm)
  tok = math.min(tpm, (tonumber(state[2]) or tpm) + elapsed * tpm / 60000)
  if tok < want then wait = math.max(wait, (want - tok) * 60000 / tpm) end
end
if wait > 0 then return math.max(1, math.ceil(wait)) end
redis.call('HSET', KEYS[1], 'req', tostring(req - 1), 'tok', tostring(tok - want), 'ts', now)
redis.call('PEXPIRE', KEYS[1], 61000)
return 0
"""

# KEYS[1]: the buckets' hash, KEYS[2]: the learnt limits' hash. ARGV: rpm, tpm (0: not
# seen), remaining requests, remaining tokens (-1: not seen), 1 to re-sync the buckets even if
# no limit changed (after a 429), the learnt hash's expiry in ms, the configured rpm and tpm
# (0: none; they bound the buckets in place of a learnt limit), and requests to charge: ones
# this process sent before it knew any limit that the server's count may miss (``observe``).
# A limit seen for the first time (or changed) is stored, and the buckets restart from what
# the server said remains. Returns 1 if the buckets were written.
_LEARN_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local rem_req, rem_tok, resync = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == '1'
local charge = tonumber(ARGV[9])
local old = redis.call('HMGET', KEYS[2], 'rpm', 'tpm')
local changed = false
if rpm > 0 and tonumber(old[1]) ~= rpm then
  redis.call('HSET', KEYS[2], 'rpm', rpm)
  changed = true
end
if tpm > 0 and tonumber(old[2]) ~= tpm then
  redis.call('HSET', KEYS[2], 'tpm', tpm)
  changed = true
end
if rpm > 0 or tpm > 0 then redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[6])) end
if not (changed or resync or charge > 0) then return 0 end
local cap_rpm, cap_tpm = tonumber(ARGV[7]), tonumber(ARGV[8])
if cap_rpm > 0 then rpm = cap_rpm elseif rpm <= 0 then rpm = tonumber(old[1]) or 0 end
if cap_tpm > 0 then tpm = cap_tpm elseif tpm <= 0 then tpm = tonumber(old[2]) or 0 end
-- the buckets as they stand now (the rate script's refill)
local state = redis.call('HMGET', KEYS[1], 'req', 'tok', 'ts')
local elapsed = math.max(0, now - (tonumber(state[3]) or now))
local req = math.min(rpm, (tonumber(state[1]) or rpm) + elapsed * rpm / 60000)
local tok = math.min(tpm, (tonumber(state[2]) or tpm) + elapsed * tpm / 60000)
if changed then
  -- a new limit: start from what the server said remains (a full bucket if it did not say)
  req = rpm
  if rem_req >= 0 then req = math.min(rem_req, rpm) end
  tok = tpm
  if rem_tok >= 0 then tok = math.min(rem_tok, tpm) end
elseif resync then
  -- a 429: never more than the server said remains (nothing changes if it did not say)
  if rem_req >= 0 then req = math.min(rem_req, req) end
  if rem_tok >= 0 then tok = math.min(rem_tok, tok) end
end
if rpm > 0 then req = req - charge end
redis.call('HSET', KEYS[1], 'req', tostring(req), 'tok', tostring(tok), 'ts', now)
redis.call('PEXPIRE', KEYS[1], 61000)
return 1
"""

# KEYS[1]: sorted set of lease id -> expiry (ms, Redis clock). ARGV: limit, lease id, lease ms.
# Returns 0 when the lease was granted, else the ms until the earliest lease expires.
_LEASE_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(last[2]) - now) + 1000)
  return 0
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.max(1, math.ceil(tonumber(first[2]) - now))
"""


class RedisRateLimiter(_BlockingAcquire):
    """The token buckets of ``LocalRateLimiter``, kept in Redis under ``{key_prefix}:rate``.

    Configured limits travel with every call rather than living in Redis, so an edited endpoint
    takes effect at once and two processes never disagree about which limits are stored. Learnt
    ones (``learn``: the limits not configured) live under ``{key_prefix}:learnt``, shared."""

    def __init__(
        self,
        redis_client: redis.Redis,
        *,
        key_prefix: str,
        rpm: int | None = None,
        tpm: int | None = None,
        learn: bool = False,
        clock: Clock = time.monotonic,
    ) -> None:
        _check_limit("rpm", rpm)
        _check_limit("tpm", tpm)
        self.rpm, self.tpm = rpm, tpm
        self.learns_rpm, self.learns_tpm = learn and rpm is None, learn and tpm is None
        self.key_prefix = key_prefix
        self.key = f"{key_prefix}:rate"
        self.learnt_key = _learnt_key(key_prefix)
        self._redis = redis_client
        self._script = redis_client.register_script(_RATE_SCRIPT)
        self._learn_script = redis_client.register_script(_LEARN_SCRIPT)
        self._clock = clock
        self._seen: tuple[int | None, int | None] | None = None
        """The learnt limits this process last stored or confirmed, and when."""
        self._seen_at = 0.0
        self._looked_up_at: float | None = None
        self._unmetered: deque[float] = deque(maxlen=_UNMETERED_KEPT)
        """When (``time.monotonic``) the requests let through while no limit was known left."""

    def try_acquire(self, tokens: int = 0) -> float:
        if self.rpm is None and self.tpm is None and not self._knows_learnt_limits():
            self._unmetered.append(time.monotonic())
            return 0.0  # nothing configured, nothing learnt yet: no Redis round trip
        rpm = self.rpm or (-1 if self.learns_rpm else 0)
        tpm = self.tpm or (-1 if self.learns_tpm else 0)
        with _client_failures(self._redis):
            wait_ms = self._script(keys=[self.key, self.learnt_key], args=[rpm, tpm, int(tokens)])
        return int(wait_ms) / 1000

    def _knows_learnt_limits(self) -> bool:
        """Whether any limit was learnt, by this process or (looked up once a recheck period
        while none is known) by another one."""
        if self._seen is not None:
            return True
        now = self._clock()
        if self._looked_up_at is not None and now - self._looked_up_at < LEARNT_RECHECK_S:
            return False
        self._looked_up_at = now
        with _client_failures(self._redis):
            rpm, tpm = self._redis.hmget(self.learnt_key, ["rpm", "tpm"])
        if rpm is not None or tpm is not None:
            self._seen = (int(rpm) if rpm else None, int(tpm) if tpm else None)
            self._seen_at = now
        return self._seen is not None

    def observe(
        self, limits: ObservedLimits, *, refused: bool = False, sent_at: float | None = None
    ) -> None:
        rpm = limits.rpm if self.learns_rpm else None
        tpm = limits.tpm if self.learns_tpm else None
        if rpm is None and tpm is None and not refused:
            return
        seen = (rpm, tpm)
        now = self._clock()
        if not refused and seen == self._seen and now - self._seen_at < LEARNT_RECHECK_S:
            return  # the common case: nothing new, no round trip
        charge = _unmetered_after(self._unmetered, sent_at) if self._seen is None else 0
        with _client_failures(self._redis):
            self._learn_script(
                keys=[self.key, self.learnt_key],
                args=[
                    rpm or 0,
                    tpm or 0,
                    -1 if limits.remaining_requests is None else limits.remaining_requests,
                    -1 if limits.remaining_tokens is None else limits.remaining_tokens,
                    1 if refused else 0,
                    int(LEARNT_TTL_S * 1000),
                    self.rpm or 0,
                    self.tpm or 0,
                    charge,
                ],
            )
        if rpm is not None or tpm is not None:
            self._seen, self._seen_at = seen, now
            self._unmetered.clear()


class RedisConcurrencyLimiter:
    """A semaphore in Redis (a sorted set of leases under ``{key_prefix}:leases``) whose leases
    expire after ``lease_s``, so a killed worker's slot frees itself."""

    def __init__(
        self,
        redis_client: redis.Redis,
        *,
        key_prefix: str,
        limit: int,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> None:
        _check_limit("limit", limit)
        self.limit, self.lease_s = limit, lease_s
        self.key_prefix = key_prefix
        self.key = _leases_key(key_prefix)
        self._redis = redis_client
        self._script = redis_client.register_script(_LEASE_SCRIPT)

    def try_acquire(self) -> Lease | None:
        lease, _ = self._try_acquire()
        return lease

    def acquire(self, *, sleep: Sleep = time.sleep) -> Lease:
        while True:
            lease, wait_s = self._try_acquire()
            if lease is not None:
                return lease
            sleep(min(wait_s, _POLL_S))

    def in_use(self) -> int:
        with _client_failures(self._redis):
            seconds, microseconds = self._redis.time()
            now_ms = seconds * 1000 + microseconds // 1000
            return int(self._redis.zcount(self.key, f"({now_ms}", "+inf"))

    def _try_acquire(self) -> tuple[Lease | None, float]:
        lease_id = uuid.uuid4().hex
        lease_ms = max(1, int(self.lease_s * 1000))
        with _client_failures(self._redis):
            wait_ms = int(self._script(keys=[self.key], args=[self.limit, lease_id, lease_ms]))
        if wait_ms > 0:
            return None, wait_ms / 1000
        return Lease(lambda: self._release(lease_id)), 0.0

    def _release(self, lease_id: str) -> None:
        try:
            with _client_failures(self._redis):
                self._redis.zrem(self.key, lease_id)
        except redis.RedisError as exc:
            # The call itself is done; the lease will expire on its own.
            logger.warning("could not release concurrency lease %s: %s", self.key, exc)


# --- Per endpoint ------------------------------------------------------------------------------


@dataclass(frozen=True)
class EndpointLimiter:
    """Every limit of one endpoint; ``None`` parts are unlimited."""

    rate: RateLimiter | None = None
    concurrency: ConcurrencyLimiter | None = None
    # The rate's waiting queue in this process (the module docstring says why): a lock for
    # threads, and one per event loop for coroutines (an asyncio lock belongs to one loop).
    _thread_queue: threading.Lock = field(default_factory=threading.Lock, compare=False)
    _loop_queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = field(
        default_factory=weakref.WeakKeyDictionary, compare=False
    )

    def acquire(self, estimated_tokens: int, *, sleep: Sleep = time.sleep) -> Lease:
        """Wait for the rate budget, then for a slot; release the returned lease after the call.

        Rate first: a slot is then held only while a request is actually in flight. A Redis
        outage becomes a retryable ``ProviderError``, so the caller's backoff applies to it."""
        try:
            if self.rate is not None:
                with self._thread_queue:
                    self.rate.acquire(estimated_tokens, sleep=sleep)
            if self.concurrency is not None:
                return self.concurrency.acquire(sleep=sleep)
        except redis.RedisError as exc:
            raise ProviderError(
                f"the shared rate limiter (Redis) is unavailable: {type(exc).__name__}",
                retryable=True,
            ) from exc
        return Lease()

    async def aacquire(self, estimated_tokens: int) -> Lease:
        """``acquire`` for an event loop: waits with ``asyncio.sleep`` instead of blocking.

        Each try is one short Redis round trip (or a lock, in-process) made on the loop; the
        waiting between tries is where other calls run."""
        try:
            if self.rate is not None:
                async with self._loop_queue():
                    while (wait_s := self.rate.try_acquire(estimated_tokens)) > 0:
                        await asyncio.sleep(wait_s)
            if self.concurrency is not None:
                while (lease := self.concurrency.try_acquire()) is None:
                    await asyncio.sleep(_POLL_S)
                return lease
        except redis.RedisError as exc:
            raise ProviderError(
                f"the shared rate limiter (Redis) is unavailable: {type(exc).__name__}",
                retryable=True,
            ) from exc
        return Lease()

    def observe(
        self, limits: ObservedLimits, *, refused: bool = False, sent_at: float | None = None
    ) -> None:
        """Hand the rate limiter what a response's headers said (``refused``: a 429;
        ``sent_at``: when its request left, ``time.monotonic``). Best effort: the call itself
        is over, so a Redis outage here is logged, not raised."""
        if self.rate is None or (limits.empty and not refused):
            return
        try:
            self.rate.observe(limits, refused=refused, sent_at=sent_at)
        except redis.RedisError as exc:
            logger.warning("could not store the limits learnt for %s: %s", self.rate, exc)

    def _loop_queue(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        queue = self._loop_queues.get(loop)
        if queue is None:
            queue = self._loop_queues[loop] = asyncio.Lock()
        return queue


_limiters: dict[tuple[object, ...], EndpointLimiter] = {}
_redis_clients: dict[str, redis.Redis] = {}
_registry_lock = threading.Lock()


def limiters_for(
    endpoint_name: str,
    *,
    rpm: int | None,
    tpm: int | None,
    max_concurrency: int | None,
    lease_s: float = DEFAULT_LEASE_S,
    learn: bool = False,
) -> EndpointLimiter:
    """The process-wide limiter of an endpoint: Redis-backed when ``settings.REDIS_URL`` is set
    (shared with every other worker), in-process otherwise. With ``learn``, the rate limits not
    given here are learnt from the vendor's headers (``EndpointLimiter.observe``).

    One instance per (endpoint, limits): local buckets must be shared by every thread to mean
    anything, and an edited limit gets a fresh limiter instead of a stale one."""
    _check_limit("rpm", rpm)
    _check_limit("tpm", tpm)
    _check_limit("max_concurrency", max_concurrency)
    redis_url = getattr(settings, "REDIS_URL", None) or None
    key = (redis_url, endpoint_name, rpm, tpm, max_concurrency, lease_s, learn)
    with _registry_lock:
        limiter = _limiters.get(key)
        if limiter is None:
            limiter = _build_limiter(
                endpoint_name, redis_url, rpm, tpm, max_concurrency, lease_s, learn
            )
            _limiters[key] = limiter
        return limiter


def _build_limiter(
    endpoint_name: str,
    redis_url: str | None,
    rpm: int | None,
    tpm: int | None,
    max_concurrency: int | None,
    lease_s: float,
    learn: bool,
) -> EndpointLimiter:
    has_rate = rpm is not None or tpm is not None or learn
    if redis_url is None:
        return EndpointLimiter(
            rate=LocalRateLimiter(rpm=rpm, tpm=tpm, learn=learn) if has_rate else None,
            concurrency=(
                LocalConcurrencyLimiter(max_concurrency, lease_s=lease_s)
                if max_concurrency
                else None
            ),
        )
    client = _redis_clients.get(redis_url)
    if client is None:
        # redis-py clients are thread-safe and re-create their pool after a fork.
        client = _redis_clients[redis_url] = redis.Redis.from_url(redis_url)
    prefix = _key_prefix(endpoint_name)
    return EndpointLimiter(
        rate=(
            RedisRateLimiter(client, key_prefix=prefix, rpm=rpm, tpm=tpm, learn=learn)
            if has_rate
            else None
        ),
        concurrency=(
            RedisConcurrencyLimiter(
                client, key_prefix=prefix, limit=max_concurrency, lease_s=lease_s
            )
            if max_concurrency
            else None
        ),
    )


# --- What a page may read of the shared limits ------------------------------------------------


@dataclass(frozen=True)
class SharedLimits:
    """What every worker shares of one endpoint's limits, as Redis holds them now."""

    learnt_rpm: int | None
    """The requests per minute learnt from the vendor's headers (None: none learnt, or none
    confirmed for ``LEARNT_TTL_S``)."""
    learnt_tpm: int | None
    in_flight: int
    """Calls holding one of the endpoint's concurrency slots (0 where it has no cap)."""


READ_TIMEOUT_S = 2.0
"""How long a page waits for Redis before it says it could not read the limits: a page that
watches a run must not hang on a Redis that does not answer (the workers' clients wait)."""
_readers: dict[str, redis.Redis] = {}


def shared_limits(endpoint_names: Iterable[str]) -> dict[str, SharedLimits] | None:
    """Each endpoint's learnt limits and calls in flight, in one round trip to Redis; None
    without ``settings.REDIS_URL`` (the embedded default), where each worker keeps its limiter
    in its own process and no page can read it. Raises ``redis.RedisError`` when Redis cannot
    be read within ``READ_TIMEOUT_S``."""
    redis_url = getattr(settings, "REDIS_URL", None) or None
    if redis_url is None:
        return None
    names = list(endpoint_names)
    if not names:
        return {}
    with _registry_lock:
        client = _readers.get(redis_url)
        if client is None:
            client = _readers[redis_url] = redis.Redis.from_url(
                redis_url, socket_timeout=READ_TIMEOUT_S, socket_connect_timeout=READ_TIMEOUT_S
            )
    with _client_failures(client):
        pipe = client.pipeline(transaction=False)
        pipe.time()  # the leases expire on Redis's clock
        for name in names:
            prefix = _key_prefix(name)
            pipe.hmget(_learnt_key(prefix), ["rpm", "tpm"])
            # Every lease with its expiry: no more than the cap, and the lapsed ones the next
            # acquire removes (counted out below, against Redis's clock).
            pipe.zrange(_leases_key(prefix), 0, -1, withscores=True)
        replies = pipe.execute()
    seconds, microseconds = replies[0]
    now_ms = seconds * 1000 + microseconds // 1000
    shared = {}
    for i, name in enumerate(names):
        rpm, tpm = replies[1 + 2 * i]
        leases = replies[2 + 2 * i]
        shared[name] = SharedLimits(
            learnt_rpm=int(rpm) if rpm else None,
            learnt_tpm=int(tpm) if tpm else None,
            in_flight=sum(1 for _, expiry in leases if expiry > now_ms),
        )
    return shared
