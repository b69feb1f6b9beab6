"""Import a proposal-review study from a JSONL file (docs/annotation.md, "Proposal review:
the import format"): one context per line — what the user has been doing, the proactive tasks
models proposed there, and the models that stayed silent — as an **open** study for the chosen
annotators, k per context (3 by default).

One line::

    {"context_id": "ctx-0001",
     "events": [{"time": "2026-03-02T09:14:00", "kind": "user activity",
                 "text": "Opens the quarterly budget sheet"}, ...],
     "proposals": [{"id": "a", "source": "model-x", "text": "Total each column"}, ...],
     "silent": ["model-z"]}

``context_id`` is unique in the file; ``events`` (1 to ``MAX_EVENTS``) are in time order,
``time`` an ISO 8601 date-time (with or without a UTC offset, the same for every event of a
context), ``kind`` optional; ``proposals`` (1 to ``MAX_PROPOSALS``) have ids unique in their
context; ``silent`` (optional) names models that proposed nothing here — none of them may also
propose here. Unknown keys are errors (a misspelt key would otherwise be lost silently).

The file is streamed (``iter_json_lines``: no line over ``PROACTBENCH_MAX_RECORD_BYTES``, no
file over ``PROACTBENCH_MAX_FILE_BYTES``) and its contexts written in batches of ``BATCH`` as
they are read, so memory stays flat in the file's length (what is kept is one id per context).
Everything happens in one transaction: a bad line — every one is reported as
``line N: <field>: <message>`` — rolls it all back, and nothing is written. The study's name
and instructions must not name a model of the file (the blinding rule of every study).
"""

from __future__ import annotations

import random
import secrets
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import IO, Annotated

from django.contrib.auth.models import User
from django.db import transaction
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictStr, ValidationError

from annotation.kinds.proposal_review import DEFAULT_OVERLAP, KIND, MAX_PROPOSALS
from annotation.models import Rater, Study, StudyItem
from annotation.services.importer import StudyImportError
from annotation.services.studies import (
    StudyInputError,
    StudySpec,
    blinding_message,
    check_study_settings,
)
from benchmark.corpus.parsing import iter_json_lines
from benchmark.corpus.schema import json_path

BATCH = 500
MAX_EVENTS = 200
CONTEXT_ID_MAX_CHARS = 200  # it becomes the item's key
NAME_MAX_CHARS = 100  # a proposal's id, a source, an event's kind
TEXT_MAX_CHARS = 4000


def _storable(value: str) -> str:
    """What no database may refuse: no NUL (PostgreSQL's text and JSON cannot hold one), no
    unpaired surrogate (not Unicode), and not blank."""
    if "\x00" in value:
        raise ValueError("contains a NUL character (\\u0000)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("contains an unpaired surrogate (invalid Unicode)") from None
    if not value.strip():
        raise ValueError("must not be blank")
    return value


def _iso_time(value: str) -> str:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"{value[:40]!r} is not an ISO 8601 date-time (e.g. 2026-03-02T09:14:00)"
        ) from None
    return value


Name = Annotated[StrictStr, Field(max_length=NAME_MAX_CHARS), AfterValidator(_storable)]
Text = Annotated[StrictStr, Field(max_length=TEXT_MAX_CHARS), AfterValidator(_storable)]
ContextId = Annotated[StrictStr, Field(max_length=CONTEXT_ID_MAX_CHARS), AfterValidator(_storable)]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Event(_Record):
    time: Annotated[StrictStr, Field(max_length=64), AfterValidator(_iso_time)]
    kind: Annotated[StrictStr, Field(max_length=NAME_MAX_CHARS)] = ""
    text: Text


class Proposal(_Record):
    id: Name
    source: Name
    text: Text


class Context(_Record):
    context_id: ContextId
    events: list[Event] = Field(min_length=1, max_length=MAX_EVENTS)
    proposals: list[Proposal] = Field(min_length=1, max_length=MAX_PROPOSALS)
    silent: list[Name] = Field(default_factory=list, max_length=100)


def _pydantic_errors(exc: ValidationError) -> list[tuple[str, str]]:
    out = []
    for error in exc.errors(include_url=False):
        path = json_path(error["loc"]).removeprefix("$.") if error["loc"] else "$"
        if error["type"] == "missing":
            message = "required field is missing"
        elif error["type"] == "extra_forbidden":
            message = "unknown field (see the format in docs/annotation.md)"
        else:
            message = error["msg"].removeprefix("Value error, ")
        out.append((path, message))
    return out


def _context_errors(context: Context) -> list[tuple[str, str]]:
    """What the schema cannot say: events in time order, ids and models once each."""
    errors = []
    times = [datetime.fromisoformat(e.time) for e in context.events]
    if len({t.tzinfo is None for t in times}) > 1:
        errors.append(("events", "mixes times with and without a UTC offset"))
    else:
        for n in range(1, len(times)):
            if times[n] < times[n - 1]:
                errors.append((f"events[{n}].time", "earlier than the event before it"))
    seen: set[str] = set()
    for n, proposal in enumerate(context.proposals):
        if proposal.id in seen:
            errors.append((f"proposals[{n}].id", f"{proposal.id!r} appears twice in this context"))
        seen.add(proposal.id)
    sources = {p.source for p in context.proposals}
    silent: set[str] = set()
    for n, model in enumerate(context.silent):
        if model in silent:
            errors.append((f"silent[{n}]", f"{model!r} appears twice"))
        elif model in sources:
            errors.append((f"silent[{n}]", f"{model!r} also proposes in this context"))
        silent.add(model)
    return errors


def _item(study: Study, position: int, context: Context, rng: random.Random) -> StudyItem:
    ids = [p.id for p in context.proposals]
    return StudyItem(
        study=study,
        position=position,
        key=context.context_id,
        payload={
            "context_id": context.context_id,
            "events": [e.model_dump() for e in context.events],
            "proposals": [p.model_dump() for p in context.proposals],
            "silent": list(context.silent),
            # The base display order, random per item; each rater's is rotated from it
            # (``StudyKind.display``), so a proposal's place varies between its raters.
            "sides": rng.sample(ids, len(ids)),
        },
        required_answers=study.overlap,
    )


def proposal_study_import(
    *,
    stream: IO[bytes],
    source_name: str,
    name: str,
    annotators: Sequence[User],
    overlap: int = DEFAULT_OVERLAP,
    instructions: str = "",
    lease_minutes: int = 30,
    reason_required: bool = False,
    seed: int | None = None,
    created_by: User | None = None,
) -> Study:
    """Create an open proposal-review study from the JSONL ``stream`` (the module docstring).
    Raises ``StudyInputError`` (by field) for bad settings before reading anything, and
    ``StudyImportError`` listing every bad line; in either case nothing is written."""
    spec = StudySpec(
        kind=KIND.key,
        name=name,
        annotators=annotators,
        instructions=instructions,
        overlap=overlap,
        lease_minutes=lease_minutes,
        reason_required=reason_required,
        seed=seed,
    )
    problems: dict[str, list[str]] = defaultdict(list)
    check_study_settings(spec, problems)
    if problems:
        raise StudyInputError(dict(problems))
    seed = seed if seed is not None else secrets.randbits(32)
    with transaction.atomic():
        study = _import(spec, stream, source_name, seed, created_by)
    return study


def _import(
    spec: StudySpec, stream: IO[bytes], source_name: str, seed: int, created_by: User | None
) -> Study:
    rng = random.Random(seed)
    study = Study.objects.create(
        name=spec.name.strip(),
        kind=KIND.key,
        instructions=spec.instructions.strip(),
        overlap=spec.overlap,
        reason_required=spec.reason_required,
        lease_minutes=spec.lease_minutes,
        selection={"file": source_name[:200], "seed": seed},
        created_by=created_by,
    )
    Rater.objects.bulk_create(
        Rater(study=study, user=user) for user in dict.fromkeys(spec.annotators)
    )
    errors: list[str] = []
    context_ids: set[str] = set()
    sources: set[str] = set()
    batch: list[StudyItem] = []
    counts = {"contexts": 0, "proposals": 0, "silent": 0}
    for line, raw, error in iter_json_lines(stream):
        if error is not None:
            errors.append(f"line {error.line}: {error.path}: {error.message}")
            continue
        if not isinstance(raw, dict):
            errors.append(f"line {line}: $: expected a JSON object (one context)")
            continue
        try:
            context = Context.model_validate(raw)
        except ValidationError as exc:
            errors += [f"line {line}: {path}: {message}" for path, message in _pydantic_errors(exc)]
            continue
        problems = _context_errors(context)
        if context.context_id in context_ids:
            problems.insert(0, ("context_id", f"{context.context_id!r} appears on an earlier line"))
        if problems:
            errors += [f"line {line}: {path}: {message}" for path, message in problems]
            continue
        context_ids.add(context.context_id)
        sources.update(p.source for p in context.proposals)
        sources.update(context.silent)
        counts["contexts"] += 1
        counts["proposals"] += len(context.proposals)
        counts["silent"] += len(context.silent)
        if errors:
            continue  # the import is lost: check the rest, write nothing more
        batch.append(_item(study, counts["contexts"], context, rng))
        if len(batch) >= BATCH:
            StudyItem.objects.bulk_create(batch)
            batch = []
    if not counts["contexts"] and not errors:
        errors.append("line 1: $: the file has no context")
    for field_name in ("name", "instructions"):
        if message := blinding_message(getattr(spec, field_name), sources):
            errors.append(f"{field_name}: {message}")
    if errors:
        raise StudyImportError(errors)  # rolls back the transaction: nothing is written
    StudyItem.objects.bulk_create(batch)
    _shuffle_positions(study, rng)
    study.selection = {**study.selection, **counts}
    study.save(update_fields=["selection"])
    return study


def _shuffle_positions(study: Study, rng: random.Random) -> None:
    """Hand-out order: a seeded random permutation of the items (positions were file order).
    Holds one id per item, never their contents."""
    ids = list(study.items.order_by("position").values_list("pk", flat=True))
    positions = list(range(len(ids)))
    rng.shuffle(positions)
    for start in range(0, len(ids), BATCH):
        StudyItem.objects.bulk_update(
            [
                StudyItem(pk=pk, position=position)
                for pk, position in zip(
                    ids[start : start + BATCH], positions[start : start + BATCH], strict=True
                )
            ],
            ["position"],
        )
