"""Claims on provider calls in flight, so that two units needing the identical call at the same
moment make it once (the other waits for its cached result).

With Redis configured (production, CI) a claim is one ``SET NX EX`` — no database write; on the
embedded default it is a row in ``CallInFlight``. Either way a claim expires after the run's
lease, so a killed worker's claim blocks nobody for longer than its units are blocked anyway.

Redis hiccups: whatever the client raises on an operation (its own connection and timeout
errors, but also ``ValueError: I/O operation on closed file`` when a connection is lost during
its handshake — issue #14) is retried here with backoff on fresh connections, and after
``REDIS_TRIES`` tries becomes ``InflightUnavailable``, a transient error the batch task retries
itself for (``tasks.TRANSIENT_ERRORS``). Every operation is safe to repeat: a claim's value is
the caller's own token, so a claim whose reply was lost is recognised as ours on the retry.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from benchmark.models import CallInFlight
from core.backoff import backoff_s

if TYPE_CHECKING:
    import redis

logger = logging.getLogger(__name__)

_PREFIX = "proactbench:inflight:"
CLIENT_NAME = "proactbench-inflight"
"""The connections' name in Redis's ``CLIENT LIST`` (operators, and the fault tests, find them)."""
REDIS_TRIES = 3
REDIS_BACKOFF_BASE_S = 0.2
REDIS_BACKOFF_CAP_S = 2.0

T = TypeVar("T")


class InflightUnavailable(Exception):
    """Redis failed an in-flight operation ``REDIS_TRIES`` times, whatever the client raised."""


@functools.cache
def _redis(url: str) -> redis.Redis:
    import redis

    return redis.Redis.from_url(url, client_name=CLIENT_NAME)


def _with_redis(operation: Callable[[redis.Redis], T]) -> T:
    """``operation(client)``, tried again with backoff (``core.backoff``) on any exception.

    After a failure the pool's idle connections are closed: the one that failed was handed
    back to the pool as it was, and redis-py does not always close it (a ``ValueError`` is not
    one of its own errors), so the next try would otherwise meet it again."""
    client = _redis(settings.REDIS_URL)
    attempt = 0
    while True:
        attempt += 1
        try:
            return operation(client)
        except Exception as exc:
            try:
                client.connection_pool.disconnect(inuse_connections=False)
            except Exception:  # a broken connection may fail to close, too: drop it anyway
                client.connection_pool.reset()
            if attempt == REDIS_TRIES:
                raise InflightUnavailable(
                    f"Redis (in-flight claims) failed {REDIS_TRIES} times: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            logger.info("in-flight claims: Redis failed (%r); trying again", exc)
            time.sleep(backoff_s(attempt, base_s=REDIS_BACKOFF_BASE_S, cap_s=REDIS_BACKOFF_CAP_S))


def _claim_in_redis(client: redis.Redis, keys: list[str], *, token: bytes, lease_s: int) -> list:
    """One round trip: ``SET key token NX EX lease GET`` per key. Each reply is the value the
    key held before (``None``: it was free and is now ours) — ours too if it is our token,
    set by an earlier try whose reply was lost."""
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.set(_PREFIX + key, token, nx=True, ex=max(1, lease_s), get=True)
    return [held is None or held == token for held in pipe.execute()]


def claim(key: str, *, lease_s: int) -> bool:
    """Become the one worker making this call (or take over an expired claim)."""
    if settings.REDIS_URL:
        return bool(claim_many([key], lease_s=lease_s))
    now = timezone.now()
    expires = now + timedelta(seconds=lease_s)
    try:
        with transaction.atomic():
            CallInFlight.objects.create(key=key, expires_at=expires)
        return True
    except IntegrityError:
        taken_over = CallInFlight.objects.filter(key=key, expires_at__lt=now).update(
            expires_at=expires
        )
        return taken_over == 1


def release(key: str) -> None:
    release_many([key])


def claim_many(keys: list[str], *, lease_s: int) -> set[str]:
    """``claim`` for many keys: the ones this caller now holds (a key listed twice is held
    once). With Redis, one round trip."""
    if not keys:
        return set()
    if settings.REDIS_URL:
        token = uuid.uuid4().hex.encode()
        won = _with_redis(
            lambda client: _claim_in_redis(client, keys, token=token, lease_s=lease_s)
        )
        return {key for key, ours in zip(keys, won, strict=True) if ours}
    return {key for key in dict.fromkeys(keys) if claim(key, lease_s=lease_s)}


def renew_many(keys: list[str], *, lease_s: int) -> None:
    """Extend the claims on ``keys`` (calls this caller is still making) to ``lease_s`` from
    now, so a call slower than the lease keeps its claim. With Redis, one round trip; a claim
    that already expired is not taken again here (the call's result is cached either way)."""
    if not keys:
        return
    if settings.REDIS_URL:

        def expire(client: redis.Redis) -> None:
            pipe = client.pipeline(transaction=False)
            for key in keys:
                pipe.expire(_PREFIX + key, max(1, lease_s))
            pipe.execute()

        _with_redis(expire)
    else:
        CallInFlight.objects.filter(key__in=keys).update(
            expires_at=timezone.now() + timedelta(seconds=lease_s)
        )


def release_many(keys: list[str]) -> None:
    if not keys:
        return
    if settings.REDIS_URL:
        names = [_PREFIX + key for key in keys]
        _with_redis(lambda client: client.delete(*names))
    else:
        CallInFlight.objects.filter(key__in=keys).delete()
