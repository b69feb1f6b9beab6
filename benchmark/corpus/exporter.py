"""Write dialogues back in the release format (``final_dialogues.jsonl``).

export(import(x)) equals x on every official key; keys the Workbench did not model come back
from the ``extra`` fields, and what the Workbench adds goes under ``x_workbench`` (left out with
``official_only``). Streams: memory is bounded by one chunk of dialogues.
"""

import json
from collections.abc import Iterator
from typing import IO

from django.db.models import Prefetch, QuerySet

from benchmark.corpus.images import EmbedImages, ImageWriter, image_parts
from benchmark.corpus.schema import EXTENSION_KEY
from benchmark.models import Anchor, Dialogue, Trigger, Turn

CHUNK_SIZE = 200


def trigger_rubric(trigger: Trigger) -> dict:
    """A trigger's evaluation_rubric as the release writes it."""
    return {
        "type": trigger.type,
        "pass_criteria": trigger.pass_criteria,
        "partial_criteria": trigger.partial_criteria,
        "fail_criteria": trigger.fail_criteria,
        **trigger.rubric_extra,
    }


def _extension(
    dialogue: Dialogue, turns: list[Turn], anchors: list[Anchor], images: ImageWriter
) -> dict:
    style = dialogue.style
    turn_index = {turn.id: turn.index for turn in turns}
    trigger_anchors = {
        str(turn.index): [anchor.key for anchor in turn.trigger.anchors.all()]
        for turn in turns
        if hasattr(turn, "trigger") and turn.trigger.anchors.all()
    }
    scenario = dialogue.scenario
    extension = {
        "demo": dialogue.is_demo,
        "status": dialogue.status,
        "persona": {"name": dialogue.persona.name, "summary": dialogue.persona.summary},
        "scenario": {
            "title": scenario.title,
            "hidden_goal": scenario.hidden_goal,
            "surface_request": scenario.surface_request,
            "ideal_trajectory": scenario.ideal_trajectory,
        },
        "style": {
            "index": style.index,
            "code": style.code,
            "min_words": style.min_words,
            "max_words": style.max_words,
            "description": style.description,
        },
        "provenance": {
            "curation_model": dialogue.curation_model,
            "prompt_versions": dialogue.prompt_versions,
            "curated_at": dialogue.curated_at.isoformat() if dialogue.curated_at else None,
        },
        "findings": dialogue.findings,
    }
    if anchors:
        extension["anchors"] = [
            {
                "key": a.key,
                "text": a.text,
                "turn": None if a.disclosed_in_id is None else turn_index.get(a.disclosed_in_id),
            }
            for a in anchors
        ]
        extension["trigger_anchors"] = trigger_anchors
    turn_images = image_parts([(turn.index, list(turn.images.all())) for turn in turns], images)
    if turn_images:
        extension["turn_images"] = turn_images
    return extension


def dialogue_to_record(
    dialogue: Dialogue, *, official_only: bool = False, images: ImageWriter | None = None
) -> dict:
    """One dialogue as a release record (uses prefetched turns, triggers, anchors and turn
    images). ``images``: how turn images are written (default: embedded as base64)."""
    turns = list(dialogue.turns.all())
    triggers = [turn.trigger for turn in turns if hasattr(turn, "trigger")]
    record: dict = {
        "blueprint_id": dialogue.blueprint.key,
        "scenario_id": dialogue.scenario.key,
        "unique_id_eval": dialogue.unique_id_eval,
        "uuid": dialogue.uuid,
        "category_key": dialogue.domain.key,
        "style_combination_index": dialogue.style.index,
        "evaluated_model": dialogue.curation_model,
        "num_turns_completed": dialogue.num_turns_completed,
        "trigger_points": [
            {"turn": trig.turn.index, "evaluation_rubric": trigger_rubric(trig), **trig.extra}
            for trig in triggers
        ],
        "turn_records": [
            {
                "turn": turn.index,
                "planner": turn.planner,
                "user_message": turn.user_message,
                "assistant_response": turn.assistant_response,
                **turn.extra,
            }
            for turn in turns
        ],
    }
    if dialogue.token_usage is not None:
        record["token_usage"] = dialogue.token_usage
    record.update(dialogue.extra)
    if not official_only:
        record[EXTENSION_KEY] = _extension(
            dialogue, turns, list(dialogue.anchors.all()), images or EmbedImages()
        )
    return record


def dialogues_for_export(queryset: QuerySet[Dialogue] | None = None) -> QuerySet[Dialogue]:
    queryset = Dialogue.objects.all() if queryset is None else queryset
    return (
        queryset.select_related("blueprint", "scenario", "persona", "domain", "style")
        .prefetch_related(
            Prefetch(
                "turns",
                queryset=Turn.objects.order_by("index")
                .select_related("trigger")
                .prefetch_related("trigger__anchors", "images"),
            ),
            Prefetch("anchors", queryset=Anchor.objects.order_by("id")),
        )
        .order_by("id")
    )


def iter_export_lines(
    queryset: QuerySet[Dialogue] | None = None,
    *,
    official_only: bool = False,
    images: ImageWriter | None = None,
) -> Iterator[str]:
    """One line per dialogue; an embedded image is read when its line is written, so memory
    holds one line's images at most."""
    for dialogue in dialogues_for_export(queryset).iterator(chunk_size=CHUNK_SIZE):
        record = dialogue_to_record(dialogue, official_only=official_only, images=images)
        yield json.dumps(record) + "\n"


def corpus_export(
    *,
    out: IO[str],
    queryset: QuerySet[Dialogue] | None = None,
    official_only: bool = False,
    images: ImageWriter | None = None,
) -> int:
    """Write the dialogues as JSON Lines to ``out``; returns how many were written.
    ``images``: embedded (default), or written to a folder or zip by the given writer."""
    count = 0
    for line in iter_export_lines(queryset, official_only=official_only, images=images):
        out.write(line)
        count += 1
    return count
