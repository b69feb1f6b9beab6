"""Celery task for curation: ids in, load, call the service (``benchmark/tasks.py`` imports
it, so that Celery's autodiscovery registers it)."""

from __future__ import annotations

from celery import shared_task

from benchmark.curation.services import (
    DialogueExistsError,
    curation_blueprint,
    curation_spec_for,
    dialogue_curate,
)
from benchmark.models import CommunicationStyle, ModelEndpoint, Scenario
from benchmark.providers.base import ProviderError
from core.backoff import backoff_s

MAX_RETRIES = 5
BASE_BACKOFF_S = 30
MAX_BACKOFF_S = 900


def retry_countdown(retries: int) -> float:
    """Seconds before retry number ``retries + 1``: up to 30 s, doubling, 15 minutes at most
    (``core.backoff``)."""
    return backoff_s(retries + 1, base_s=BASE_BACKOFF_S, cap_s=MAX_BACKOFF_S)


@shared_task(
    bind=True,
    acks_late=True,
    name="benchmark.curate_dialogue",
    max_retries=MAX_RETRIES,
    # A dialogue is ~30 model calls in sequence; the project default (10 min) is too short.
    soft_time_limit=3600,
    time_limit=3660,
)
def curate_dialogue_task(
    self, scenario_id: int, style_id: int, planner_id: int, user_agent_id: int, assistant_id: int
) -> int:
    """Curate one dialogue for (scenario, style) and return its id.

    Idempotent: nothing is saved unless the whole dialogue succeeds, and a dialogue that
    already exists (a redelivery after success, or a duplicate enqueue) is returned as is,
    without calling any model. Only transient provider failures (``retryable``) are retried,
    with backoff; a CurationError is a verdict on the dialogue and is not retried."""
    scenario = Scenario.objects.select_related("persona", "domain").get(pk=scenario_id)
    style = CommunicationStyle.objects.get(pk=style_id)
    endpoints = ModelEndpoint.objects.in_bulk([planner_id, user_agent_id, assistant_id])
    spec = curation_spec_for(
        scenario=scenario,
        style=style,
        blueprint=curation_blueprint(scenario=scenario, style=style),
    )
    try:
        dialogue = dialogue_curate(
            spec=spec,
            planner_endpoint=endpoints[planner_id],
            user_endpoint=endpoints[user_agent_id],
            assistant_endpoint=endpoints[assistant_id],
        )
    except DialogueExistsError as exc:
        return exc.dialogue_id
    except ProviderError as exc:
        if not exc.retryable:
            raise
        raise self.retry(exc=exc, countdown=retry_countdown(self.request.retries)) from exc
    return dialogue.id
