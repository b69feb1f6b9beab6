"""Import the official release's human studies as completed (closed) studies, so old data can
be analysed next to new (formats: ../shared/formats/proactbench-release/README.md).

- ``direct`` — Study 1: ``sample_items.json`` + the raters' ``A*.jsonl`` (Pass/Partial/Fail).
- ``pairwise`` — Study 2: ``pairwise/sample_items.json`` + ``P*.jsonl`` (``ab_swap``,
  ``choice_side``, ``chosen_case``). Case A is the vanilla reply, Case B the rubric-injected
  one, as in the Workbench's own pairwise studies; the side shown first is kept as the
  answer's ``display``.

Each release record is kept verbatim in the item's ``payload`` (the judge's verdict, the
stratum, everything). Raters are the release's annotator ids. A rater who rated an item twice
keeps both: the later answer live, the earlier retracted as "superseded". The same guarantees as
the other imports: every problem is listed (file, line or item, JSON path), and nothing is
written unless the whole import is valid.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import IO, Annotated, Literal

from django.db import transaction
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)

from annotation.kinds import direct_rating, pairwise
from annotation.models import (
    Answer,
    Assignment,
    AssignmentState,
    Rater,
    RetractionReason,
    Study,
    StudyItem,
    StudySource,
    StudyStatus,
)
from benchmark.corpus.parsing import iter_json_lines
from benchmark.corpus.schema import json_path
from benchmark.models import Dialogue
from benchmark.vocabulary import Verdict
from core.limits import (
    json_deeper_than,
    line_nested_deeper_than,
    max_json_depth,
    read_bounded,
    too_deep,
)

MAX_REPORTED = 200
# The release's two studies, as the kinds they are recorded as.
KINDS = {"direct": direct_rating.KIND.key, "pairwise": pairwise.KIND.key}


class StudyImportError(Exception):
    """The import was rejected; nothing was written. ``errors`` lists the problems."""

    def __init__(self, errors: list[str], *, total: int | None = None):
        """``total``: how many problems there were, when ``errors`` holds only the first ones
        (an import that streams keeps no more than ``MAX_REPORTED``)."""
        self.errors = errors[:MAX_REPORTED]
        self.total = len(errors) if total is None else total
        shown = len(self.errors)
        more = f"\n… and {self.total - shown} more" if self.total > shown else ""
        super().__init__(
            f"study import rejected with {self.total} error(s):\n" + "\n".join(self.errors) + more
        )


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class DirectItem(_Open):
    item_id: StrictStr = Field(min_length=1)
    model_response: StrictStr
    judge_score: StrictStr | None = None


class PairwiseItem(_Open):
    item_id: StrictStr = Field(min_length=1)
    case_a_response: StrictStr
    case_b_response: StrictStr
    judge_score_case_a: StrictStr | None = None


class _Rating(_Open):
    annotator_id: StrictStr = Field(min_length=1)
    item_id: StrictStr = Field(min_length=1)
    rationale: StrictStr = ""
    confidence: StrictInt | None = Field(default=None, ge=1, le=5)
    time_spent_seconds: StrictFloat | StrictInt = Field(ge=0)
    timestamp: datetime = Field(strict=False)
    server_received_at: datetime | None = Field(default=None, strict=False)


def _release_verdict(value: str) -> str:
    """The release writes a verdict as ``Pass`` or ``PASS``; nothing else is one."""
    if value not in Verdict.values and value not in Verdict.labels:
        allowed = ", ".join(f"{v!r}" for v in (*Verdict.labels, *Verdict.values))
        raise ValueError(f"should be one of {allowed}")
    return value.upper()


class DirectRating(_Rating):
    score: Annotated[StrictStr, AfterValidator(_release_verdict)]


class PairwiseRating(_Rating):
    ab_swap: StrictBool
    choice_side: Literal["left", "right", "tie"]
    chosen_case: Literal["A", "B", "tie"]


ITEM_MODELS: dict[str, type[BaseModel]] = {"direct": DirectItem, "pairwise": PairwiseItem}
RATING_MODELS: dict[str, type[DirectRating | PairwiseRating]] = {
    "direct": DirectRating,
    "pairwise": PairwiseRating,
}


@dataclass
class _Row:
    source: str
    line: int
    rating: DirectRating | PairwiseRating


def _messages(exc: ValidationError) -> list[tuple[str, str]]:
    return [
        (json_path(e["loc"]), "required field is missing" if e["type"] == "missing" else e["msg"])
        for e in exc.errors(include_url=False)
    ]


def _read_items(kind: str, name: str, stream: IO[bytes], errors: list[str]) -> list[dict]:
    """The items file: one JSON document, so only the file cap applies to it (its items are
    each checked by their schema; the ratings files' lines get the per-record cap)."""
    try:
        raw = read_bounded(stream)
    except ValueError as exc:
        errors.append(f"{name}: {exc}")
        return []
    depth = max_json_depth()
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        errors.append(f"{name}: not valid UTF-8")
        return []
    except json.JSONDecodeError as exc:
        errors.append(f"{name}: invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")
        return []
    except RecursionError:  # deeper than the parser goes: it gives no position, find it
        data = None
    if data is None or json_deeper_than(data, depth):
        line = line_nested_deeper_than(raw, depth)
        errors.append(f"{name}: line {line or 1}: invalid JSON: {too_deep(depth)}")
        return []
    if not isinstance(data, list) or not data:
        errors.append(f"{name}, $: expected a non-empty JSON array of items")
        return []
    items, seen = [], set()
    for index, record in enumerate(data):
        if not isinstance(record, dict):
            errors.append(f"{name}, $[{index}]: expected a JSON object")
            continue
        try:
            ITEM_MODELS[kind].model_validate(record)
        except ValidationError as exc:
            errors += [f"{name}, $[{index}]{p[1:]}: {m}" for p, m in _messages(exc)]
            continue
        if record["item_id"] in seen:
            errors.append(f"{name}, $[{index}].item_id: {record['item_id']!r} appears twice")
            continue
        seen.add(record["item_id"])
        items.append(record)
    return items


def _read_ratings(
    kind: str, files: list[tuple[str, IO[bytes]]], item_ids: set[str], errors: list[str]
) -> list[_Row]:
    rows = []
    for name, stream in files:
        for line, raw, error in iter_json_lines(stream):
            if error:
                errors.append(f"{name}: {error}")
                continue
            if not isinstance(raw, dict):
                errors.append(f"{name}: line {line}, $: expected a JSON object")
                continue
            try:
                rating = RATING_MODELS[kind].model_validate(raw)
            except ValidationError as exc:
                errors += [f"{name}: line {line}, {p}: {m}" for p, m in _messages(exc)]
                continue
            if item_ids and rating.item_id not in item_ids:
                errors.append(
                    f"{name}: line {line}, $.item_id: {rating.item_id!r} is not in the items file"
                )
                continue
            if isinstance(rating, PairwiseRating) and _case(rating) != rating.chosen_case:
                errors.append(
                    f"{name}: line {line}, $.chosen_case: {rating.chosen_case!r} does not follow "
                    f"from choice_side {rating.choice_side!r} with ab_swap {rating.ab_swap}"
                )
                continue
            rows.append(_Row(name, line, rating))
    if not rows and not errors:
        errors.append("no ratings in the ratings file(s)")
    return rows


def _case(rating: PairwiseRating) -> str:
    """The case on the clicked side: ab_swap means Case B was shown on the left."""
    if rating.choice_side == "tie":
        return "tie"
    left = "B" if rating.ab_swap else "A"
    right = "A" if rating.ab_swap else "B"
    return left if rating.choice_side == "left" else right


def _dialogues(kind: str, items: list[dict]) -> dict[str, int]:
    """item_id → dialogue id, where the corpus holds the item's dialogue (one query)."""
    uuids = {i.get("uuid") or str(i.get("dialogue_id", "")).split("__")[0] for i in items}
    known: dict[tuple[object, object, object], int] = {
        (uuid, scenario, style): pk
        for pk, uuid, scenario, style in Dialogue.objects.filter(uuid__in=uuids).values_list(
            "pk", "uuid", "scenario__key", "style__index"
        )
    }
    found = {}
    for item in items:
        if kind == "pairwise":
            key = (item.get("uuid"), item.get("scenario_id"), item.get("style_combination_index"))
        else:
            parts = str(item.get("dialogue_id", "")).split("__")
            style = parts[2][1:] if len(parts) == 3 and parts[2].startswith("s") else ""
            key = (parts[0], parts[1] if len(parts) > 1 else "", int(style or 0))
        if key in known:
            found[item["item_id"]] = known[key]
    return found


def study_import(
    *,
    kind: str,
    items: tuple[str, IO[bytes]],
    ratings: list[tuple[str, IO[bytes]]],
    name: str = "",
    imported_by=None,
) -> Study:
    """Import a release study (see the module docstring). Returns the new, closed study."""
    if kind not in KINDS:
        raise StudyImportError([f"kind must be one of {', '.join(KINDS)}, not {kind!r}"])
    errors: list[str] = []
    records = _read_items(kind, items[0], items[1], errors)
    rows = _read_ratings(kind, ratings, {r["item_id"] for r in records}, errors)
    if errors:
        raise StudyImportError(errors)
    with transaction.atomic():
        return _write(kind, name, items[0], [n for n, _ in ratings], records, rows, imported_by)


def _write(kind, name, items_name, ratings_names, records, rows, imported_by) -> Study:
    by_item = Counter(row.rating.item_id for row in rows)
    study = Study.objects.create(
        name=name
        or f"{'Study 1: direct ratings' if kind == 'direct' else 'Study 2: pairwise'} (imported)",
        kind=KINDS[kind],
        status=StudyStatus.CLOSED,
        source=StudySource.IMPORTED,
        overlap=max(by_item.values()),
        reason_required=True,
        selection={"items_file": items_name, "ratings_files": ratings_names},
        created_by=imported_by,
    )
    raters = {
        external_id: Rater(study=study, external_id=external_id)
        for external_id in sorted({row.rating.annotator_id for row in rows})
    }
    Rater.objects.bulk_create(raters.values())
    dialogues = _dialogues(kind, records)
    item_rows = {
        record["item_id"]: StudyItem(
            study=study,
            position=position,
            key=record["item_id"],
            dialogue_id=dialogues.get(record["item_id"]),
            payload=record,
            required_answers=by_item[record["item_id"]],
        )
        for position, record in enumerate(records)
    }
    StudyItem.objects.bulk_create(item_rows.values())
    # Per (item, rater): the ratings in time order; the last one is the live answer.
    grouped: dict[tuple[str, str], list[_Row]] = defaultdict(list)
    for row in rows:
        grouped[(row.rating.item_id, row.rating.annotator_id)].append(row)
    assignments = {}
    for (item_id, rater_id), group in grouped.items():
        group.sort(key=lambda r: r.rating.timestamp)
        last = group[-1].rating
        assignments[(item_id, rater_id)] = Assignment(
            item=item_rows[item_id],
            rater=raters[rater_id],
            state=AssignmentState.DONE,
            display=_display(last),
            leased_at=last.timestamp - timedelta(seconds=last.time_spent_seconds),
            lease_expires_at=last.timestamp,
            completed_at=last.timestamp,
        )
    Assignment.objects.bulk_create(assignments.values())
    answers: list[Answer] = []
    live: Counter[str] = Counter()
    for (item_id, rater_id), group in grouped.items():
        for position, row in enumerate(group):
            rating = row.rating
            superseded = position < len(group) - 1
            live[item_id] += not superseded
            answers.append(
                Answer(
                    assignment=assignments[(item_id, rater_id)],
                    idempotency_key=f"import-{study.pk}-{len(answers)}",
                    label=_label(rating),
                    confidence=rating.confidence,
                    note=rating.rationale,
                    details=_details(rating, row),
                    display=_display(rating),
                    started_at=rating.timestamp - timedelta(seconds=rating.time_spent_seconds),
                    submitted_at=rating.timestamp,
                    received_at=rating.server_received_at or rating.timestamp,
                    time_on_item_s=float(rating.time_spent_seconds),
                    retracted_at=group[-1].rating.timestamp if superseded else None,
                    retraction_reason=RetractionReason.SUPERSEDED if superseded else "",
                )
            )
    Answer.objects.bulk_create(answers, batch_size=1000)
    for item_id, item in item_rows.items():
        item.required_answers = item.completed_answers = live[item_id]
    StudyItem.objects.bulk_update(item_rows.values(), ["required_answers", "completed_answers"])
    return study


def _label(rating) -> str:
    if isinstance(rating, PairwiseRating):
        return rating.chosen_case
    return rating.score.upper()


def _display(rating) -> dict:
    if isinstance(rating, PairwiseRating):
        return {"order": ["B", "A"] if rating.ab_swap else ["A", "B"]}
    return {}


def _details(rating, row: _Row) -> dict:
    details: dict[str, object] = {"source": {"file": row.source, "line": row.line}}
    if isinstance(rating, PairwiseRating):
        details["choice"] = {"left": "1", "right": "2", "tie": "tie"}[rating.choice_side]
        details["ab_swap"] = rating.ab_swap
    extra = {
        k: v
        for k, v in rating.model_dump(mode="json").items()
        if k not in type(rating).model_fields
    }
    if extra:
        details["extra"] = extra
    return details
