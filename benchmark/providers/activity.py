"""What each endpoint's calls are doing, for the pages that watch a run or a curation job: per
endpoint, the calls that reached the provider (answered, failed, retried), how many the last
minute saw, their mean latency, and the limits in force — configured on the endpoint or learnt
from the vendor's headers — with the calls holding a concurrency slot now.

A run that crawls is most often held by a limit: a vendor's requests per minute, learnt from
its headers, or a cap set on the endpoint. Without this, the page said how far the run had got
but not why it went at that pace.

The counts come from ``ProviderCall`` (one grouped query); the learnt limits and the calls in
flight from Redis, where every worker keeps them (``ratelimit.shared_limits``). On the embedded
default (no Redis) each worker keeps its limiter in its own process, out of a page's reach:
the page says so instead of showing nothing as if nothing were learnt.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

import redis
from django.db.models import Avg, Count, Q, QuerySet
from django.utils import timezone

from benchmark.models import ModelEndpoint, ProviderCall
from benchmark.providers import registry
from benchmark.providers.base import ProviderError
from benchmark.providers.factory import ConfiguredLimits, configured_limits
from benchmark.providers.ratelimit import SharedLimits, shared_limits

logger = logging.getLogger(__name__)

RECENT_S = 60
"""The window of "the last minute": the pace a vendor's per-minute limits are measured in."""

CONFIGURED, LEARNT = "configured", "learnt"


@dataclass(frozen=True)
class Limit:
    """One limit in force: its value and where it comes from (``CONFIGURED`` or ``LEARNT``)."""

    value: int
    source: str


@dataclass(frozen=True)
class EndpointActivity:
    endpoint: ModelEndpoint
    calls: int
    """Calls the provider answered."""
    failed: int
    """Calls that failed after their last attempt."""
    retried: int
    """Calls (answered or failed) that took more than one attempt: 429s, 5xx, timeouts."""
    recent: int
    """Calls (answered or failed) recorded in the last ``RECENT_S`` seconds."""
    mean_latency_s: float | None
    """Of the answered calls, from the request to the answer (retries' waits included)."""
    offline: bool
    """The provider sends nothing anywhere (``replay``): no limits apply."""
    rpm: Limit | None
    tpm: Limit | None
    max_concurrency: int | None
    in_flight: int | None
    """Calls holding one of the cap's slots now; None without a cap, or where the shared
    limits cannot be read."""
    settings_error: str = ""
    """The endpoint's limits cannot be read (its calls fail with the same message)."""


@dataclass(frozen=True)
class Activity:
    endpoints: list[EndpointActivity]
    shared: str
    """Why the learnt limits and the calls in flight are not shown, or "" when they are."""


def endpoint_activity(
    calls: QuerySet[ProviderCall],
    endpoints: Iterable[ModelEndpoint],
    *,
    now: datetime | None = None,
) -> Activity:
    """``calls``: one run's or one job's; ``endpoints``: those it calls (each listed even
    before its first call; an endpoint with calls but not listed is added). Two queries (the
    counts, and the endpoints that are not listed) and one Redis round trip."""
    since = (now or timezone.now()) - timedelta(seconds=RECENT_S)
    counts = {
        row["endpoint_id"]: row
        for row in calls.order_by()
        .values("endpoint_id")
        .annotate(
            calls=Count("id", filter=Q(ok=True)),
            failed=Count("id", filter=Q(ok=False)),
            retried=Count("id", filter=Q(attempts__gt=1)),
            recent=Count("id", filter=Q(created_at__gte=since)),
            latency=Avg("latency_s", filter=Q(ok=True)),
        )
    }
    listed = {endpoint.pk: endpoint for endpoint in endpoints}
    missing = counts.keys() - listed.keys()
    if missing:
        listed.update((e.pk, e) for e in ModelEndpoint.objects.filter(pk__in=missing))
    ordered = sorted(listed.values(), key=lambda e: (e.display_name, e.name))

    shared: dict[str, SharedLimits] | None = None
    why = ""
    try:
        shared = shared_limits(e.name for e in ordered if not _offline(e))
    except redis.RedisError as exc:
        logger.warning("could not read the shared limits: %s", exc)
        why = "Redis did not answer: learnt limits and calls in flight cannot be shown now."
    if shared is None and not why:
        why = (
            "No Redis (the embedded default): each worker keeps its limiter to itself, so "
            "learnt limits and calls in flight are not shown here."
        )
    return Activity(
        endpoints=[_row(e, counts.get(e.pk), shared) for e in ordered],
        shared=why if any(not _offline(e) for e in ordered) else "",
    )


def _offline(endpoint: ModelEndpoint) -> bool:
    spec = registry.lookup(endpoint.provider)
    return spec is not None and spec.offline


def _row(
    endpoint: ModelEndpoint, counts: dict | None, shared: dict[str, SharedLimits] | None
) -> EndpointActivity:
    counts = counts or {}
    offline = _offline(endpoint)
    configured, error = ConfiguredLimits(None, None, None), ""
    if not offline:
        try:
            configured = configured_limits(endpoint)
        except ProviderError as exc:
            error = str(exc)
    state = None if shared is None or offline else shared.get(endpoint.name)

    def limit(value: int | None, learnt: int | None) -> Limit | None:
        if value is not None:
            return Limit(value, CONFIGURED)
        if learnt is not None:
            return Limit(learnt, LEARNT)
        return None

    return EndpointActivity(
        endpoint=endpoint,
        calls=counts.get("calls", 0),
        failed=counts.get("failed", 0),
        retried=counts.get("retried", 0),
        recent=counts.get("recent", 0),
        mean_latency_s=counts.get("latency"),
        offline=offline,
        rpm=limit(configured.rpm, state.learnt_rpm if state else None),
        tpm=limit(configured.tpm, state.learnt_tpm if state else None),
        max_concurrency=configured.max_concurrency,
        in_flight=state.in_flight if state is not None and configured.max_concurrency else None,
        settings_error=error,
    )


def activity_lines(activity: Activity) -> list[str]:
    """The table as text, a line per endpoint (the management commands print it)."""
    lines = []
    for row in activity.endpoints:
        line = (
            f"  {row.endpoint.name}: {row.calls} answered, {row.failed} failed, "
            f"{row.retried} retried, {row.recent} in the last minute"
        )
        if row.mean_latency_s is not None:
            line += f", mean latency {row.mean_latency_s:.2f} s"
        if row.offline:
            line += "; offline: no limits apply"
        elif row.settings_error:
            line += f"; {row.settings_error}"
        else:
            limits = [
                f"{unit} {limit.value} ({limit.source})"
                for unit, limit in (("requests/min", row.rpm), ("tokens/min", row.tpm))
                if limit is not None
            ]
            if row.max_concurrency:
                flying = "?" if row.in_flight is None else row.in_flight
                limits.append(f"in flight {flying} of {row.max_concurrency}")
            line += "; " + (", ".join(limits) if limits else "no limit known")
        lines.append(line)
    if activity.shared:
        lines.append(f"  ({activity.shared})")
    return lines
