"""CSV and JSONL writing, and the raw exports (every judgment; votes and audits once the
annotation app registers them).

CSV is RFC 4180: UTF-8 without a byte-order mark, a header row, CRLF line ends, fields quoted
when they hold a comma, a quote or a line break (quotes doubled). Values: integers as digits,
floats in Python's shortest round-trip form (``float(text)`` gives the value back exactly), booleans
``true``/``false``, timestamps ISO 8601 in UTC, missing/undefined (NULL, NaN) as an empty field.
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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from typing import Any

import numpy as np

from benchmark.models import Judgment
from stats.tables import Column, Table

CHUNK_ROWS = 500
DB_CHUNK = 2000


def _plain(value: Any) -> Any:
    """NumPy scalars as Python ones (``repr(np.float64(1.0))`` is not ``1.0``)."""
    return value.item() if isinstance(value, np.generic) else value


def csv_value(value: Any) -> str:
    value = _plain(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def json_value(value: Any) -> Any:
    value = _plain(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def csv_chunks(header: list[str], rows: Iterable[Iterable[Any]]) -> Iterator[str]:
    """The CSV text in chunks of ``CHUNK_ROWS`` lines (the header first)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(header)
    iterator = iter(rows)
    while True:
        chunk = list(islice(iterator, CHUNK_ROWS))
        writer.writerows([csv_value(v) for v in row] for row in chunk)
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
                json.dumps(
                    {k: json_value(v) for k, v in zip(header, row, strict=True)},
                    ensure_ascii=False,
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
    that yields one tuple per row, in column order, from ``filters`` (e.g. ``{"run": 3}``)."""

    name: str
    description: str
    columns: tuple[Column, ...]
    rows: Callable[[dict[str, Any]], Iterator[tuple]]

    @property
    def header(self) -> list[str]:
        return [c.name for c in self.columns]


RAW_EXPORTS: dict[str, RawExport] = {}


def register_raw_export(export: RawExport) -> None:
    """The hook for more raw exports. The annotation app registers ``votes`` (every pairwise
    judgement and direct rating) and ``audits`` (every dialogue audit answer) from its
    ``AppConfig.ready`` with their own columns; the API, the dashboard's links and
    docs/exports.md pick them up from here."""
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
    _c("trigger_type", "str", "EMERGENT, CRITICAL or RECOVERY."),
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
_SCORES = {"PASS": 1.0, "PARTIAL": 0.5, "FAIL": 0.0}


def judgment_rows(filters: dict[str, Any]) -> Iterator[tuple]:
    queryset = Judgment.objects.order_by("id")
    if filters.get("run") is not None:
        queryset = queryset.filter(unit__run_id=filters["run"])
    values = queryset.values_list(
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
        "evidence_status",
        "evidence_found_share",
        "attempts",
        "rationale",
        "evidence",
        "error",
        "unit__disagreement__final_verdict",
        "created_at",
    )
    for row in values.iterator(chunk_size=DB_CHUNK):
        verdict = row[14]
        yield (*row[:15], _SCORES.get(verdict), *row[15:21], row[21] or "", row[22])


register_raw_export(
    RawExport(
        name="judgments",
        description="Every judgment: one row per judge per reply, with the reply's context.",
        columns=JUDGMENT_COLUMNS,
        rows=judgment_rows,
    )
)
