"""Import HALO checkpoints from JSON Lines as a new, open HALO diagnosis study (the format:
docs/annotation.md, "HALO checkpoints file").

One line per checkpoint: its id, its context (timestamped events, in order), and the responses
of several sources there, each with its text and, optionally, its action command or level (the
pre-fill: ``annotation.heuristics.suggest_action_level``), reasoning tokens and retrieval
rounds. Other keys of a line are kept verbatim in the item's payload (``meta``).

The same guarantees as the other imports: the file is read line by line within the record and
file caps (``core.limits``, through ``iter_json_lines``); every problem is listed as
``line N, <json path>: <message>``; and nothing is written unless the whole file is valid and the
study's specification too (``study_create``: one transaction, all or nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO

from django.contrib.auth.models import User
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
)

from annotation.kinds import halo
from annotation.models import Study, StudyItem
from annotation.services.importer import StudyImportError
from annotation.services.studies import ItemDraft, StudySpec, study_create
from benchmark.corpus.parsing import CorpusError, iter_json_lines, pydantic_errors, text_errors
from benchmark.vocabulary import ActionLevel

KEY_MAX = StudyItem._meta.get_field("key").max_length
MAX_RESPONSES = 50  # replies judged at one checkpoint: a page, not a corpus
SOURCE_MAX = 200


class _Strict(BaseModel):
    """A part of a line: an unknown key is an error (a misspelt field would be lost)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Event(_Strict):
    text: StrictStr = Field(min_length=1)
    time: StrictStr = ""
    actor: StrictStr = Field(default="", max_length=100)


class Response(_Strict):
    source: StrictStr = Field(min_length=1, max_length=SOURCE_MAX)
    text: StrictStr = Field(min_length=1)
    action: StrictStr | None = None
    level: ActionLevel | None = Field(default=None, strict=False)
    reasoning_tokens: StrictInt | None = Field(default=None, ge=0)
    retrieval_rounds: StrictInt | None = Field(default=None, ge=0)


class Checkpoint(BaseModel):
    """A line: its other keys (a need type, a domain, …) are kept in the item's payload."""

    model_config = ConfigDict(extra="allow", strict=True)

    checkpoint_id: StrictStr = Field(min_length=1, max_length=KEY_MAX)
    context: list[Event] = Field(min_length=1)
    responses: list[Response] = Field(min_length=1, max_length=MAX_RESPONSES)


def _draft(record: Checkpoint) -> ItemDraft:
    sources = []
    texts = {}
    for n, response in enumerate(record.responses, start=1):
        response_id = f"r{n}"
        sources.append(
            halo.source_entry(
                response_id,
                response.source,
                response.text,
                reasoning_tokens=response.reasoning_tokens,
                retrieval_rounds=response.retrieval_rounds,
                level=response.level.value if response.level else None,
                action=response.action,
                has_action="action" in response.model_fields_set,
            )
        )
        texts[response_id] = response.text
    extra = record.model_extra or {}
    return ItemDraft(
        key=record.checkpoint_id,
        payload={
            "checkpoint": record.checkpoint_id,
            "context": [event.model_dump() for event in record.context],
            "sources": sources,
            "texts": texts,
            **({"meta": extra} if extra else {}),
        },
        names=tuple(r.source for r in record.responses),
        sides=tuple(s["id"] for s in sources),
    )


def read_checkpoints(stream: IO[bytes]) -> tuple[list[ItemDraft], list[CorpusError]]:
    """Every checkpoint of the file as an item draft, and every problem found (the drafts are
    of no use when there is one)."""
    drafts: list[ItemDraft] = []
    errors: list[CorpusError] = []
    seen: dict[str, int] = {}
    for line, raw, error in iter_json_lines(stream):
        if error:
            errors.append(error)
            continue
        if not isinstance(raw, dict):
            errors.append(
                CorpusError(line, "$", f"expected a JSON object, got {type(raw).__name__}")
            )
            continue
        unstorable = text_errors(line, raw)
        if unstorable:
            errors += unstorable
            continue
        try:
            record = Checkpoint.model_validate(raw)
        except ValidationError as exc:
            errors += pydantic_errors(line, exc)
            continue
        if record.checkpoint_id in seen:
            errors.append(
                CorpusError(
                    line,
                    "$.checkpoint_id",
                    f"{record.checkpoint_id!r} is already on line {seen[record.checkpoint_id]}",
                )
            )
            continue
        seen[record.checkpoint_id] = line
        sources: dict[str, int] = {}
        for position, response in enumerate(record.responses):
            if response.source in sources:
                errors.append(
                    CorpusError(
                        line,
                        f"$.responses[{position}].source",
                        f"{response.source!r} already answered at this checkpoint "
                        f"(responses[{sources[response.source]}])",
                    )
                )
            sources.setdefault(response.source, position)
        if len(sources) == len(record.responses):
            drafts.append(_draft(record))
    if not drafts and not errors:
        errors.append(CorpusError(0, "$", "no checkpoint in the file"))
    return drafts, errors


def checkpoints_import(
    *,
    stream: IO[bytes],
    file_name: str,
    name: str,
    annotators: Sequence[User],
    overlap: int = 2,
    instructions: str = "",
    reason_required: bool = False,
    lease_minutes: int = 30,
    max_items: int | None = None,
    seed: int | None = None,
    gold: str = "",
    created_by: User | None = None,
) -> Study:
    """A new, open HALO diagnosis study of the file's checkpoints, for ``annotators`` (k =
    ``overlap`` per checkpoint). Raises ``StudyImportError`` listing the file's problems, or
    ``StudyInputError`` (by field) for the study's; nothing is written in either case."""
    drafts, errors = read_checkpoints(stream)
    if errors:
        raise StudyImportError([str(e) if e.line else f"{file_name}: {e.message}" for e in errors])
    return study_create(
        spec=StudySpec(
            kind=halo.KIND.key,
            name=name,
            annotators=annotators,
            instructions=instructions,
            overlap=overlap,
            reason_required=reason_required,
            lease_minutes=lease_minutes,
            max_items=max_items,
            seed=seed,
            gold=gold,
            drafts=drafts,
            imported_from=file_name,
        ),
        created_by=created_by,
    )
