"""Write dialogues back in the release format (``final_dialogues.jsonl``).

export(import(x)) equals x on every official key; keys the Workbench did not model come back
from the ``extra`` fields, and what the Workbench adds goes under ``x_workbench``.

``official_only`` writes what the official tools accept: no ``x_workbench`` (turn images go
with it), and only the release's trigger types — a Workbench trigger type (INTERVENTION) is left
out of ``trigger_points`` and of the Planner's record of that turn, and a dialogue left with no
trigger at all is left out whole (the release needs one). Each line is checked with
``official_format_errors`` before it is written, and the summary counts what was left out.
Streams: memory is bounded by one chunk of dialogues.
"""

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

from django.db.models import Prefetch, QuerySet

from benchmark.corpus.images import EmbedImages, ImageWriter, image_parts
from benchmark.corpus.parsing import official_format_errors, planner_rubric_type
from benchmark.corpus.schema import EXTENSION_KEY
from benchmark.models import Anchor, Dialogue, Trigger, Turn
from benchmark.vocabulary import RELEASE_TRIGGER_TYPES

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


@dataclass
class ExportSummary:
    """What an export wrote, and — official-only — what the official format could not carry."""

    dialogues: int = 0
    left_out_triggers: Counter[str] = field(default_factory=Counter)  # by trigger type
    left_out_images: int = 0
    left_out_dialogues: int = 0  # no release trigger left: the release needs one

    def left_out_text(self) -> str:
        """One sentence for the person exporting, or "" when nothing was left out."""
        if not (self.left_out_triggers or self.left_out_images):
            return ""
        triggers = ", ".join(
            f"{count} {kind} trigger{'s' if count != 1 else ''}"
            for kind, count in sorted(self.left_out_triggers.items())
        )
        images = f"{self.left_out_images} turn image{'s' if self.left_out_images != 1 else ''}"
        text = (
            f"left out {triggers or '0 INTERVENTION triggers'} and {images}, which the official "
            "format cannot express"
        )
        if self.left_out_dialogues:
            text += (
                f"; {self.left_out_dialogues} dialogue(s) had no other trigger and were left "
                "out whole"
            )
        return text


def _official_planner(planner: dict | None) -> dict | None:
    """The Planner's record of a turn, official-only: one that scheduled a trigger type the
    official format does not know is written as the release writes a turn that is no trigger
    (``is_trigger_point`` false, no rubric); any other is written as stored."""
    kind = planner_rubric_type(planner)
    if not isinstance(planner, dict) or kind is None or kind in RELEASE_TRIGGER_TYPES:
        return planner
    return {**planner, "is_trigger_point": False, "evaluation_rubric": None}


def dialogue_to_record(
    dialogue: Dialogue,
    *,
    official_only: bool = False,
    images: ImageWriter | None = None,
    summary: ExportSummary | None = None,
) -> dict:
    """One dialogue as a release record (uses prefetched turns, triggers, anchors and turn
    images). ``images``: how turn images are written (default: embedded as base64).
    ``official_only``: the release's keys and trigger types only (module docstring); what is
    left out is counted in ``summary``. The record may then have no trigger point."""
    turns = list(dialogue.turns.all())
    triggers = [turn.trigger for turn in turns if hasattr(turn, "trigger")]
    if official_only:
        if summary is not None:
            summary.left_out_triggers.update(
                t.type for t in triggers if t.type not in RELEASE_TRIGGER_TYPES
            )
            summary.left_out_images += sum(len(turn.images.all()) for turn in turns)
        triggers = [t for t in triggers if t.type in RELEASE_TRIGGER_TYPES]
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
                "planner": _official_planner(turn.planner) if official_only else turn.planner,
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


class NotOfficial(ValueError):
    """A stored dialogue that still fails the official format once the Workbench's additions
    are left out (the message names it and each error): the export writes nothing."""


def iter_export_lines(
    queryset: QuerySet[Dialogue] | None = None,
    *,
    official_only: bool = False,
    images: ImageWriter | None = None,
    summary: ExportSummary | None = None,
) -> Iterator[str]:
    """One line per dialogue (official-only: per dialogue with a release trigger); an embedded
    image is read when its line is written, so memory holds one line's images at most."""
    summary = ExportSummary() if summary is None else summary
    for dialogue in dialogues_for_export(queryset).iterator(chunk_size=CHUNK_SIZE):
        record = dialogue_to_record(
            dialogue, official_only=official_only, images=images, summary=summary
        )
        if official_only:
            if not record["trigger_points"]:
                summary.left_out_dialogues += 1
                continue
            errors = official_format_errors(summary.dialogues + 1, record)
            if errors:
                listed = "; ".join(str(error) for error in errors)
                raise NotOfficial(f"dialogue {dialogue.unique_id_eval!r}: {listed}")
        summary.dialogues += 1
        yield json.dumps(record) + "\n"


def corpus_export(
    *,
    out: IO[str],
    queryset: QuerySet[Dialogue] | None = None,
    official_only: bool = False,
    images: ImageWriter | None = None,
) -> ExportSummary:
    """Write the dialogues as JSON Lines to ``out``; returns how many were written and, with
    ``official_only``, what was left out. ``images``: embedded (default), or written to a
    folder or zip by the given writer. Raises ``NotOfficial`` (official-only) for a dialogue
    the official format cannot take even without the Workbench's additions."""
    summary = ExportSummary()
    for line in iter_export_lines(
        queryset, official_only=official_only, images=images, summary=summary
    ):
        out.write(line)
    return summary
