"""Claims on provider calls in flight, so that two units needing the identical call at the same
moment make it once (the other waits for its cached result).

With Redis configured (production, CI) a claim is one ``SET NX EX`` — no database write; on the
embedded default it is a row in ``CallInFlight``. Either way a claim expires after the run's
lease, so a killed worker's claim blocks nobody for longer than its units are blocked anyway.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from benchmark.models import CallInFlight

if TYPE_CHECKING:
    import redis

_PREFIX = "proactbench:inflight:"


@functools.cache
def _redis(url: str) -> redis.Redis:
    import redis

    return redis.Redis.from_url(url)


def claim(key: str, *, lease_s: int) -> bool:
    """Become the one worker making this call (or take over an expired claim)."""
    if settings.REDIS_URL:
        return bool(
            _redis(settings.REDIS_URL).set(_PREFIX + key, b"1", nx=True, ex=max(1, lease_s))
        )
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
    if settings.REDIS_URL:
        _redis(settings.REDIS_URL).delete(_PREFIX + key)
    else:
        CallInFlight.objects.filter(key=key).delete()


def claim_many(keys: list[str], *, lease_s: int) -> set[str]:
    """``claim`` for many keys: the ones this caller now holds. With Redis, one round trip;
    a key listed twice is claimed once (the second ``SET NX`` finds the first)."""
    if not keys:
        return set()
    if settings.REDIS_URL:
        pipe = _redis(settings.REDIS_URL).pipeline(transaction=False)
        for key in keys:
            pipe.set(_PREFIX + key, b"1", nx=True, ex=max(1, lease_s))
        return {key for key, won in zip(keys, pipe.execute(), strict=True) if won}
    return {key for key in dict.fromkeys(keys) if claim(key, lease_s=lease_s)}


def release_many(keys: list[str]) -> None:
    if not keys:
        return
    if settings.REDIS_URL:
        _redis(settings.REDIS_URL).delete(*(_PREFIX + key for key in keys))
    else:
        CallInFlight.objects.filter(key__in=keys).delete()
