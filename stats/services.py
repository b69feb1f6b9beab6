"""Write side of statistics: researchers' uploads of external benchmark scores.

The CSV is UTF-8 (a byte-order mark is allowed) with a header row, in either layout:

- long: ``model,benchmark,score`` — one score per line;
- wide: ``model,<benchmark>,<benchmark>,…`` — one model per line, an empty cell = no score.

``model`` names an endpoint by its handle, display name or model id, compared without case and
with ``.`` read as ``-`` (the release writes ``claude-opus-4-7`` and ``Claude-Opus-4.7``). Every
problem is reported as ``line N, column C: message``; if there is any, nothing is written. An
upload replaces the stored score of each (model, benchmark) it names and leaves others alone.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import IO

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from benchmark.models import ModelEndpoint
from core.limits import read_bounded
from stats.models import ExternalBenchmarkScore

MAX_ERRORS = 200


@dataclass(frozen=True)
class ScoreError:
    line: int
    column: str
    message: str

    def __str__(self) -> str:
        where = f"line {self.line}" + (f", column {self.column}" if self.column else "")
        return f"{where}: {self.message}"


class ScoresImportError(Exception):
    def __init__(self, errors: list[ScoreError]):
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors[:5]))


@dataclass
class ScoresImportSummary:
    created: int = 0
    updated: int = 0
    benchmarks: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)


def model_key(name: str) -> str:
    return slugify(name.replace(".", "-"))


def _endpoint_lookup() -> dict[str, list[ModelEndpoint]]:
    lookup: dict[str, list[ModelEndpoint]] = {}
    for endpoint in ModelEndpoint.objects.all():
        keys = {model_key(endpoint.name), model_key(endpoint.display_name)}
        keys.add(model_key(endpoint.model_name))
        for key in keys - {""}:
            lookup.setdefault(key, []).append(endpoint)
    return lookup


def _parse_score(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _read(stream: IO[bytes]) -> tuple[list[str], list[tuple[int, list[str]]]]:
    try:
        data = read_bounded(stream, file_cap=settings.PROACTBENCH_MAX_SCORES_FILE_BYTES)
    except ValueError as exc:
        raise ScoresImportError([ScoreError(1, "", str(exc))]) from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        error = ScoreError(1, "", f"the file is not UTF-8 text ({exc.reason})")
        raise ScoresImportError([error]) from exc
    if "\x00" in text:  # a binary file, or UTF-16; PostgreSQL cannot store it in any case
        line = text.count("\n", 0, text.index("\x00")) + 1
        error = ScoreError(line, "", "contains a NUL character: not a CSV text file")
        raise ScoresImportError([error])
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        rows = [(reader.line_num, row) for row in reader if any(cell.strip() for cell in row)]
    except csv.Error as exc:
        raise ScoresImportError([ScoreError(reader.line_num, "", f"not CSV: {exc}")]) from exc
    if not header or not any(h.strip() for h in header):
        raise ScoresImportError([ScoreError(1, "", "empty file: expected a header row")])
    return [h.strip() for h in header], rows


def _triples(header, rows, errors) -> list[tuple[int, str, str, str, str]]:
    """(line, model, benchmark, score text, score column) from either layout."""
    lowered = [h.lower() for h in header]
    if "model" not in lowered:
        errors.append(ScoreError(1, "", "the header has no 'model' column"))
        return []
    model_at = lowered.index("model")
    dupes = {h for h in lowered if lowered.count(h) > 1}
    if dupes:
        errors.append(ScoreError(1, "", f"repeated column(s): {', '.join(sorted(dupes))}"))
        return []
    long = {"benchmark", "score"} <= set(lowered)
    out = []
    for line, row in rows:
        if len(row) != len(header):
            errors.append(
                ScoreError(line, "", f"{len(row)} field(s), the header has {len(header)}")
            )
            continue
        model = row[model_at].strip()
        if long:
            benchmark = row[lowered.index("benchmark")].strip()
            if not benchmark:
                errors.append(ScoreError(line, "benchmark", "empty"))
                continue
            out.append((line, model, benchmark, row[lowered.index("score")].strip(), "score"))
        else:
            for position, name in enumerate(header):
                if position != model_at and row[position].strip():
                    out.append((line, model, name, row[position].strip(), name))
    return out


@transaction.atomic
def benchmark_scores_import(*, stream: IO[bytes], uploaded_by=None) -> ScoresImportSummary:
    """Validate the whole file, then upsert its scores in one transaction (see module doc)."""
    header, rows = _read(stream)
    errors: list[ScoreError] = []
    triples = _triples(header, rows, errors)
    lookup = _endpoint_lookup()
    seen: dict[tuple[int, str], int] = {}
    valid: list[tuple[ModelEndpoint, str, float]] = []
    for line, model, benchmark, score_text, column in triples:
        matches = lookup.get(model_key(model), []) if model else []
        if not model:
            errors.append(ScoreError(line, "model", "empty"))
            continue
        if not matches:
            errors.append(ScoreError(line, "model", f"no model endpoint named {model!r}"))
            continue
        if len({m.pk for m in matches}) > 1:
            names = ", ".join(sorted({m.name for m in matches}))
            errors.append(ScoreError(line, "model", f"{model!r} is ambiguous ({names})"))
            continue
        if len(benchmark) > 80:
            errors.append(ScoreError(line, column, "benchmark name longer than 80 characters"))
            continue
        score = _parse_score(score_text)
        if score is None:
            errors.append(ScoreError(line, column, f"{score_text!r} is not a number"))
            continue
        endpoint = matches[0]
        key = (endpoint.pk, benchmark.lower())
        if key in seen:
            errors.append(
                ScoreError(line, column, f"{model} / {benchmark} already given on line {seen[key]}")
            )
            continue
        seen[key] = line
        valid.append((endpoint, benchmark, score))
    if not triples and not errors:
        errors.append(ScoreError(1, "", "no scores in the file"))
    if errors:
        raise ScoresImportError(errors[:MAX_ERRORS])
    summary = ScoresImportSummary()
    now = timezone.now()
    existing = {
        (s.endpoint_id, s.benchmark.lower()): s
        for s in ExternalBenchmarkScore.objects.filter(endpoint__in={e for e, _, _ in valid})
    }
    for endpoint, benchmark, score in valid:
        current = existing.get((endpoint.pk, benchmark.lower()))
        if current is None:
            ExternalBenchmarkScore.objects.create(
                endpoint=endpoint,
                benchmark=benchmark,
                score=score,
                uploaded_by=uploaded_by,
                uploaded_at=now,
            )
            summary.created += 1
        else:
            current.benchmark, current.score = benchmark, score
            current.uploaded_by, current.uploaded_at = uploaded_by, now
            current.save(update_fields=["benchmark", "score", "uploaded_by", "uploaded_at"])
            summary.updated += 1
    summary.benchmarks = sorted({b for _, b, _ in valid})
    summary.models = sorted({e.display_name for e, _, _ in valid})
    return summary
