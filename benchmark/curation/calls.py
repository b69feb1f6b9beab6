"""Curation's calls: served from the response cache when they were made before, and recorded as
``ProviderCall`` rows (purpose CURATION, cost from ``ModelPrice``) when they reach a provider.

Why a provider in front of the real one rather than a hook in the loop: the loop stays free of
the database (it takes providers and nothing else, and its tests drive it with scripted ones),
and it cannot make a call that escapes the cache or the accounting — every call it makes is a
``complete`` here. The loop's requests are deterministic given the earlier answers, so a target
curated again after its worker died asks, turn after turn, what it asked before: those answers
come from the cache for free, and it pays only from the call it died in.

The key is the evaluation's (``requests.cache_key``: endpoint, base URL, model, parameters —
the endpoint's sampling parameters, which the provider would apply anyway, are put on the
request so that they are part of it —, messages, sample index, salt). A job's target salts it
with its own id, so no dialogue replays another's answers (the style-blind Planner is asked the
same first question for a scenario in every style); the sample index is the target's ``sample``.
No in-flight deduplication (``evaluation/inflight.py``): one target's calls are made one after
another by the one task that holds its lease, so two identical calls are never in flight.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction

from benchmark.evaluation.engine import cached_results, call_cost, call_usage
from benchmark.evaluation.requests import cache_key
from benchmark.models import CallPurpose, ModelEndpoint, ProviderCall, ResponseCacheEntry
from benchmark.providers.base import ChatRequest, ChatResult, CompletesChat, ProviderError
from benchmark.providers.factory import sampling_params


@dataclass(frozen=True)
class CallBook:
    """How one curation's calls are served and recorded."""

    job_id: int | None = None
    """The curation job the calls are booked to (none for ``manage.py curate`` run inline and the
    one-dialogue task: their calls are recorded all the same)."""
    cache_salt: str | None = None
    """None: the cache is neither read nor written (a curation outside a job draws afresh every
    time it is asked); otherwise the cache key's salt (a job's: ``curation-target-<id>``)."""
    sample: int = 0
    """The cache key's sample index."""
    before_call: Callable[[], None] | None = None
    """Called before every call that will reach a provider, not before a cache hit: a job's
    heartbeat, which also stops a cancelled or taken-over target before it pays for a call."""


class BookedProvider:
    """One agent's provider behind the cache and the call records (see the module docstring)."""

    def __init__(self, provider: CompletesChat, endpoint: ModelEndpoint, book: CallBook) -> None:
        self._provider = provider
        self._endpoint = endpoint
        self._book = book

    def complete(self, request: ChatRequest) -> ChatResult:
        endpoint, book = self._endpoint, self._book
        request = dataclasses.replace(
            request, params={**sampling_params(endpoint), **request.params}
        )
        key = cache_key(endpoint, request, sample_index=book.sample, salt=book.cache_salt or "")
        if book.cache_salt is not None:
            hit = cached_results([key]).get(key)
            if hit is not None:
                return hit
        if book.before_call is not None:
            book.before_call()
        call = {
            "curation_job_id": book.job_id,
            "endpoint": endpoint,
            "purpose": CallPurpose.CURATION,
            "cache_key": key,
        }
        try:
            result = self._provider.complete(request)
        except ProviderError as exc:
            ProviderCall.objects.create(
                **call, ok=False, error=str(exc)[:2000], attempts=exc.attempts
            )
            raise
        # The cache row and the call record in one transaction, before the loop goes on: from
        # here on, a crash cannot make the job pay for this call again.
        with transaction.atomic():
            if book.cache_salt is not None:
                entry = ResponseCacheEntry(
                    key=key, endpoint_name=endpoint.name, text=result.text, **call_usage(result)
                )
                ResponseCacheEntry.objects.bulk_create([entry], ignore_conflicts=True)
            ProviderCall.objects.create(
                **call,
                attempts=result.attempts,
                cost_usd=call_cost(endpoint, result),
                **call_usage(result),
            )
        return result
