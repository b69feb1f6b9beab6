"""Curation services: build a curation spec from the database, run the loop, save the result.

A curated dialogue is saved through ``corpus_import``, exactly like an imported one: same
structural checks, same protocol findings, same upserts. There is one way into the corpus.
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from benchmark.corpus.importer import CorpusImportError, corpus_import
from benchmark.curation.agent_views import PersonaCard, RoadmapCard, ScenarioCard, StyleCard
from benchmark.curation.calls import BookedProvider, CallBook
from benchmark.curation.loop import CurationError, CurationSpec, curate_dialogue
from benchmark.models import (
    Blueprint,
    CommunicationStyle,
    Dialogue,
    ModelEndpoint,
    Scenario,
    turn_image_storage,
)
from benchmark.providers.base import CompletesChat, ImagePart


class DialogueExistsError(CurationError):
    """The spec's ``unique_id_eval`` is taken. Curation never overwrites a dialogue: an upsert
    would silently replace an audited one (and reset it to draft)."""

    def __init__(self, unique_id_eval: str, dialogue_id: int) -> None:
        super().__init__(
            f"dialogue {unique_id_eval} already exists (id {dialogue_id}); "
            "curation does not overwrite dialogues"
        )
        self.dialogue_id = dialogue_id


@dataclass(frozen=True)
class AgentProviders:
    """One provider per agent; by default built from the endpoints with ``provider_for``."""

    planner: CompletesChat
    user_agent: CompletesChat
    assistant: CompletesChat


def agent_providers_for(
    *,
    planner_endpoint: ModelEndpoint,
    user_endpoint: ModelEndpoint,
    assistant_endpoint: ModelEndpoint,
) -> AgentProviders:
    """Providers for the three agents. Each owns a connection pool, so a caller curating several
    dialogues builds them once and passes them to every ``dialogue_curate``. Raises
    ProviderError (not retryable) for an endpoint that cannot work, e.g. a missing API key."""
    # Imported here: the factory pulls in the vendor SDKs, which the loop and its tests never need.
    from benchmark.providers.factory import provider_for

    return AgentProviders(
        planner=provider_for(planner_endpoint),
        user_agent=provider_for(user_endpoint),
        assistant=provider_for(assistant_endpoint),
    )


def curation_blueprint(*, scenario: Scenario, style: CommunicationStyle) -> Blueprint | None:
    """The scenario's blueprint for this style, if the corpus has one (from the release's
    blueprints file, or an earlier curation)."""
    return Blueprint.objects.filter(scenario=scenario, style=style).order_by("id").first()


def curation_spec_for(
    *, scenario: Scenario, style: CommunicationStyle, blueprint: Blueprint | None = None
) -> CurationSpec:
    """Read what one curation needs from the database. Without a blueprint the dialogue gets the
    release's blueprint id convention, ``BP_<scenario key>_<style code>``."""
    if blueprint is not None:
        if blueprint.scenario_id != scenario.id:
            raise ValueError(f"blueprint {blueprint.key} belongs to another scenario")
        if blueprint.style_id not in (None, style.id):
            raise ValueError(f"blueprint {blueprint.key} is for another style")
    return CurationSpec(
        persona_uuid=scenario.persona.external_id,
        scenario_key=scenario.key,
        category_key=scenario.domain.key,
        blueprint_id=blueprint.key if blueprint else f"BP_{scenario.key}_{style.code}",
        style_index=style.index,
        persona=PersonaCard.from_model(scenario.persona),
        scenario=ScenarioCard.from_model(scenario),
        style=StyleCard.from_model(style),
        roadmap=RoadmapCard.from_model(blueprint) if blueprint else None,
        turn_images=scenario_image_parts(scenario=scenario),
    )


def scenario_image_parts(*, scenario: Scenario) -> dict[int, tuple[ImagePart, ...]]:
    """The scenario's images with their bytes (read from the turn-image storage), by turn
    number, each turn's in order: what the cold-start Assistant is sent with that turn's user
    message, and what the curated dialogue's turn is saved with."""
    by_turn: dict[int, list[ImagePart]] = defaultdict(list)
    storage = turn_image_storage()
    for image in scenario.turn_images.all():
        with storage.open(image.file.name, "rb") as stream:
            data = stream.read()
        by_turn[image.turn].append(ImagePart(image.media_type, data, image.sha256, image.alt))
    return {turn: tuple(images) for turn, images in by_turn.items()}


def dialogue_curate(
    *,
    spec: CurationSpec,
    planner_endpoint: ModelEndpoint,
    user_endpoint: ModelEndpoint,
    assistant_endpoint: ModelEndpoint,
    providers: AgentProviders | None = None,
    on_turn: Callable[[int], None] | None = None,
    book: CallBook | None = None,
) -> Dialogue:
    """Curate one dialogue and save it as a draft; return it.

    Every call reaching a provider is recorded as a ``ProviderCall`` (``calls.py``); ``book``
    says which job it is booked to and whether the response cache serves the calls (a job's
    do; by default nothing is cached and the calls belong to no job).

    Raises DialogueExistsError before any model call when the dialogue id is taken, and
    CurationError (nothing saved) when the loop fails or the record fails the corpus checks.
    Repeating the call after a failure is safe: nothing was written. Repeating it after a
    success raises DialogueExistsError, whose ``dialogue_id`` names the saved dialogue."""
    _check_free(spec.unique_id_eval)
    for endpoint in (planner_endpoint, user_endpoint, assistant_endpoint):
        if not endpoint.is_active:
            raise CurationError(f"model endpoint {endpoint.name} is inactive")
    if providers is None:
        providers = agent_providers_for(
            planner_endpoint=planner_endpoint,
            user_endpoint=user_endpoint,
            assistant_endpoint=assistant_endpoint,
        )
    book = book or CallBook()
    record = curate_dialogue(
        spec,
        planner=BookedProvider(providers.planner, planner_endpoint, book),
        user_agent=BookedProvider(providers.user_agent, user_endpoint, book),
        assistant=BookedProvider(providers.assistant, assistant_endpoint, book),
        planner_model=planner_endpoint.model_name,
        user_model=user_endpoint.model_name,
        assistant_model=assistant_endpoint.model_name,
        on_turn=on_turn,
    )
    line = json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"
    with transaction.atomic():
        # Checked again inside the transaction: another worker may have saved the same id while
        # this one was talking to the models. (A concurrent insert that slips past this check
        # still fails on the unique constraint instead of being overwritten.)
        _check_free(spec.unique_id_eval)
        try:
            corpus_import(stream=io.BytesIO(line), source=f"curation of {spec.unique_id_eval}")
        except CorpusImportError as exc:
            raise CurationError(f"the curated dialogue failed the corpus checks: {exc}") from exc
        dialogue = Dialogue.objects.get(unique_id_eval=spec.unique_id_eval)
        # The importer stores prompt_versions from the provenance but not curated_at.
        dialogue.curated_at = datetime.fromisoformat(
            record["x_workbench"]["provenance"]["curated_at"]
        )
        dialogue.save(update_fields=["curated_at"])
    return dialogue


def _check_free(unique_id_eval: str) -> None:
    existing = (
        Dialogue.objects.filter(unique_id_eval=unique_id_eval).values_list("id", flat=True).first()
    )
    if existing is not None:
        raise DialogueExistsError(unique_id_eval, existing)
