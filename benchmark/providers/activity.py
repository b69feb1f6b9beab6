"""What each endpoint's calls are doing, for the pages that watch a run or a curation job: per
endpoint, the calls that reached the provider (answered, failed, retried), how many the last
minute saw, their mean latency, and the limits in force — configured on the endpoint or learnt
from the vendor's headers — with the calls holding a concurrency slot now.

A run that crawls is most often held by a limit: a vendor's requests per minute, learnt from
its headers, or a cap set on the endpoint. Without this, the page said how far the run had got
but not why it went at that pace.

The counts come from ``ProviderCall`` (``call_counts``: one grouped query); the learnt limits
and the calls in flight from Redis, where every worker keeps them (``ratelimit.shared_limits``).
On the embedded default (no Redis) each worker keeps its limiter in its own process, out of a
page's reach: the page says so instead of showing nothing as if nothing were learnt.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

import redis
from django.db.models import Avg, Count, Q, QuerySet, Sum
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
class CallCounts:
    """One endpoint's recorded calls (for one run or one job)."""

    calls: int = 0
    """Calls the provider answered."""
    failed: int = 0
    """Calls that failed after their last attempt."""
    retried: int = 0
    """Calls (answered or failed) that took more than one attempt: 429s, 5xx, timeouts."""
    recent: int = 0
    """Calls (answered or failed) recorded in the last ``RECENT_S`` seconds."""
    mean_latency_s: float | None = None
    """Of the answered calls, from the request to the answer (retries' waits included)."""
    input_tokens: int = 0
    """Of the answered calls, as are the output tokens and the cost."""
    output_tokens: int = 0
    cost_usd: Decimal = Decimal(0)


def call_counts(
    calls: QuerySet[ProviderCall], *, now: datetime | None = None
) -> dict[int, CallCounts]:
    """Per endpoint id, ``calls`` counted: one grouped query, one pass over the calls (a run's
    progress takes its totals from it too, so that a poll of its page reads them once)."""
    since = (now or timezone.now()) - timedelta(seconds=RECENT_S)
    answered = Q(ok=True)
    rows = (
        calls.order_by()
        .values("endpoint_id")
        .annotate(
            calls=Count("id", filter=answered),
            failed=Count("id", filter=Q(ok=False)),
            retried=Count("id", filter=Q(attempts__gt=1)),
            recent=Count("id", filter=Q(created_at__gte=since)),
            latency=Avg("latency_s", filter=answered),
            inp=Sum("input_tokens", filter=answered),
            out=Sum("output_tokens", filter=answered),
            cost=Sum("cost_usd", filter=answered),
        )
    )
    return {
        row["endpoint_id"]: CallCounts(
            calls=row["calls"],
            failed=row["failed"],
            retried=row["retried"],
            recent=row["recent"],
            mean_latency_s=row["latency"],
            input_tokens=row["inp"] or 0,
            output_tokens=row["out"] or 0,
            cost_usd=row["cost"] or Decimal(0),
        )
        for row in rows
    }


@dataclass(frozen=True)
class EndpointActivity:
    endpoint: ModelEndpoint
    counts: CallCounts
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
    counts: dict[int, CallCounts], endpoints: Iterable[ModelEndpoint]
) -> Activity:
    """``counts``: ``call_counts`` of one run's or one job's calls; ``endpoints``: those it
    calls (each listed even before its first call; an endpoint with calls but not listed is
    added, by one more query). One Redis round trip."""
    listed = {endpoint.pk: endpoint for endpoint in endpoints}
    missing = counts.keys() - listed.keys()
    if missing:
        listed.update((e.pk, e) for e in ModelEndpoint.objects.filter(pk__in=missing))
    ordered = sorted(listed.values(), key=lambda e: (e.display_name, e.name))

    online = [e for e in ordered if not _offline(e)]
    shared: dict[str, SharedLimits] | None = None
    why = ""  # an offline endpoint has no limits: nothing to say when every one is offline
    if online:
        try:
            shared = shared_limits(e.name for e in online)
        except redis.RedisError as exc:
            logger.warning("could not read the shared limits: %s", exc)
            why = "Redis did not answer: learnt limits and calls in flight cannot be shown now."
        if shared is None and not why:
            why = (
                "No Redis (the embedded default): each worker keeps its limiter to itself, so "
                "learnt limits and calls in flight are not shown here."
            )
    return Activity(
        endpoints=[_row(e, counts.get(e.pk, CallCounts()), shared) for e in ordered],
        shared=why,
    )


def _offline(endpoint: ModelEndpoint) -> bool:
    spec = registry.lookup(endpoint.provider)
    return spec is not None and spec.offline


def _row(
    endpoint: ModelEndpoint, counts: CallCounts, shared: dict[str, SharedLimits] | None
) -> EndpointActivity:
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
        counts=counts,
        offline=offline,
        rpm=limit(configured.rpm, state.learnt_rpm if state else None),
        tpm=limit(configured.tpm, state.learnt_tpm if state else None),
        max_concurrency=configured.max_concurrency,
        in_flight=state.in_flight if state is not None and configured.max_concurrency else None,
        settings_error=error,
    )


def limits_text(row: EndpointActivity) -> str:
    """An endpoint's limits in force, in words (the commands' lines, the endpoint's page)."""
    if row.offline:
        return "offline: no limits apply"
    if row.settings_error:
        return row.settings_error
    limits = [
        f"{unit} {limit.value} ({limit.source})"
        for unit, limit in (("requests/min", row.rpm), ("tokens/min", row.tpm))
        if limit is not None
    ]
    if row.max_concurrency:
        flying = "?" if row.in_flight is None else row.in_flight
        limits.append(f"in flight {flying} of {row.max_concurrency}")
    return ", ".join(limits) if limits else "no limit known"


def activity_lines(activity: Activity) -> list[str]:
    """The table as text, a line per endpoint (the management commands print it)."""
    lines = []
    for row in activity.endpoints:
        counts = row.counts
        line = (
            f"  {row.endpoint.name}: {counts.calls} answered, {counts.failed} failed, "
            f"{counts.retried} retried, {counts.recent} in the last minute"
        )
        if counts.mean_latency_s is not None:
            line += f", mean latency {counts.mean_latency_s:.2f} s"
        if counts.cost_usd:
            line += f", cost ${counts.cost_usd:.4f}"
        lines.append(f"{line}; {limits_text(row)}")
    if activity.shared:
        lines.append(f"  ({activity.shared})")
    return lines
