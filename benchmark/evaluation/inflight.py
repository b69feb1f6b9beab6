"""Claims on provider calls in flight, so that two units needing the identical call at the same
moment make it once (the other waits for its cached result).

With Redis configured (production, CI) a claim is one ``SET NX EX`` — no database write; on the
embedded default it is a row in ``CallInFlight``. Either way a claim expires after the run's
lease, so a killed worker's claim blocks nobody for longer than its units are blocked anyway.
"""

from __future__ import annotations

import functools
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from benchmark.models import CallInFlight

_PREFIX = "proactbench:inflight:"


@functools.cache
def _redis():
    import redis

    return redis.Redis.from_url(settings.REDIS_URL)


def claim(key: str, *, lease_s: int) -> bool:
    """Become the one worker making this call (or take over an expired claim)."""
    if settings.REDIS_URL:
        return bool(_redis().set(_PREFIX + key, b"1", nx=True, ex=max(1, lease_s)))
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
        _redis().delete(_PREFIX + key)
    else:
        CallInFlight.objects.filter(key=key).delete()
