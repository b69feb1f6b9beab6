"""Reading and checking dialogue lines: decoding, JSON, schema and structure, then protocol
findings. Nothing here touches the database."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from django.conf import settings
from pydantic import ValidationError

from benchmark.corpus.findings import Finding, StyleTraits, TriggerFacts, protocol_findings
from benchmark.corpus.schema import EXTENSION_KEY, DialogueRecord, json_path
from benchmark.vocabulary import RELEASE_TRIGGER_TYPES
from core.limits import bounded_lines, json_deeper_than, max_json_depth, too_deep

MAX_REPORTED_ERRORS = 500


@dataclass(frozen=True)
class CorpusError:
    line: int
    path: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}, {self.path}: {self.message}"


class CorpusImportError(Exception):
    """The file was rejected; nothing was written. ``errors`` lists every problem found."""

    def __init__(self, errors: list[CorpusError], total: int, source: str = "") -> None:
        self.errors = errors
        self.total = total
        self.source = source
        shown = "\n".join(str(e) for e in errors)
        more = f"\n… and {total - len(errors)} more" if total > len(errors) else ""
        super().__init__(f"{source or 'file'} rejected with {total} error(s):\n{shown}{more}")


# --- Reading ---------------------------------------------------------------------------------


def iter_json_lines(stream: IO[bytes]) -> Iterator[tuple[int, Any, CorpusError | None]]:
    """Yield (line number, parsed object, error) for each non-blank line, streaming. No line
    longer than ``PROACTBENCH_MAX_RECORD_BYTES`` and no file larger than
    ``PROACTBENCH_MAX_FILE_BYTES`` is read into memory (``core.limits``): each is an error."""
    for line in bounded_lines(stream):
        number, raw = line.number, line.data
        if line.error:
            yield number, None, CorpusError(number, "$", line.error)
            continue
        if number == 1:
            if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
                yield (
                    number,
                    None,
                    CorpusError(
                        number, "$", "file is UTF-16; save it as UTF-8 (JSON Lines must be UTF-8)"
                    ),
                )
                return
            if raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield (
                number,
                None,
                CorpusError(
                    number,
                    "$",
                    f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})",
                ),
            )
            continue
        try:
            value = json.loads(text, parse_constant=_reject_constant)
        except json.JSONDecodeError as exc:
            yield (
                number,
                None,
                CorpusError(number, "$", f"invalid JSON: {exc.msg} (column {exc.colno})"),
            )
        except RecursionError:
            yield number, None, CorpusError(number, "$", "invalid JSON: nested too deeply")
        except ValueError as exc:  # NaN/Infinity, or an integer of more than 4,300 digits
            yield number, None, CorpusError(number, "$", f"invalid JSON: {exc}")
        else:
            if json_deeper_than(value, max_json_depth()):
                yield number, None, CorpusError(number, "$", too_deep(max_json_depth()))
            else:
                yield number, value, None


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def text_errors(line: int, value: Any, path: str = "$") -> list[CorpusError]:
    """Strings no database can store: a NUL character (PostgreSQL refuses it in text and JSON),
    or an unpaired surrogate (``\\ud800`` in the JSON: not Unicode, cannot be encoded)."""
    if isinstance(value, str):
        if "\x00" in value:
            return [CorpusError(line, path, "contains a NUL character (\\u0000)")]
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return [CorpusError(line, path, "contains an unpaired surrogate (invalid Unicode)")]
        return []
    errors: list[CorpusError] = []
    if isinstance(value, dict):
        for key, item in value.items():
            key_errors = text_errors(line, key, path)
            if key_errors:
                errors += [CorpusError(line, path, f"a key {e.message}") for e in key_errors]
            else:
                errors += text_errors(line, item, f"{path}.{key}")
    elif isinstance(value, list):
        for position, item in enumerate(value):
            errors += text_errors(line, item, f"{path}[{position}]")
    return errors


def pydantic_errors(line: int, exc: ValidationError) -> list[CorpusError]:
    errors = []
    for item in exc.errors(include_url=False):
        message = item["msg"]
        if item["type"] == "missing":
            message = "required field is missing"
        elif item["type"] == "literal_error":
            message = f"{item['msg']} (got {item['input']!r})"
        elif "type" in item["type"] or item["type"].endswith("_type"):
            message = f"{item['msg']} (got {type(item['input']).__name__})"
        errors.append(CorpusError(line, json_path(item["loc"]), message))
    return errors


# --- Checking one record -------------------------------------------------------------------


@dataclass
class ParsedDialogue:
    line: int
    raw: dict
    record: DialogueRecord
    anchor_turns: dict[str, int | None] | None
    anchor_texts: dict[str, str]
    trigger_anchor_keys: dict[int, list[str]]
    findings: list[Finding]
    # The line's turn images once stored (benchmark/corpus/images.py): metadata only.
    images: list = field(default_factory=list)


@dataclass
class Enrichment:
    """Optional side files: scenario details from tasks.jsonl, anchors from blueprints.jsonl."""

    scenarios: dict[tuple[str, str | None], dict] = field(default_factory=dict)
    blueprints: dict[tuple[str, str | None], dict] = field(default_factory=dict)

    def scenario_for(self, scenario_id: str, uuid: str) -> dict | None:
        return self.scenarios.get((scenario_id, uuid)) or self.scenarios.get((scenario_id, None))

    def blueprint_for(self, blueprint_id: str, uuid: str) -> dict | None:
        return self.blueprints.get((blueprint_id, uuid)) or self.blueprints.get(
            (blueprint_id, None)
        )


def _structural_errors(line: int, rec: DialogueRecord) -> list[CorpusError]:
    errors: list[CorpusError] = []
    for position, turn in enumerate(rec.turn_records):
        if turn.turn != position + 1:
            errors.append(
                CorpusError(
                    line,
                    f"$.turn_records[{position}].turn",
                    f"turns must be numbered 1..n in order: expected {position + 1}, "
                    f"found {turn.turn}",
                )
            )
    n_turns = len(rec.turn_records)
    seen: dict[int, int] = {}
    for position, trig in enumerate(rec.trigger_points):
        path = f"$.trigger_points[{position}].turn"
        if trig.turn > n_turns:
            errors.append(
                CorpusError(
                    line,
                    path,
                    f"trigger points at turn {trig.turn}, which does not exist "
                    f"(the dialogue has turns 1..{n_turns})",
                )
            )
        if trig.turn in seen:
            errors.append(
                CorpusError(
                    line,
                    path,
                    f"second trigger at turn {trig.turn} "
                    f"(first is trigger_points[{seen[trig.turn]}])",
                )
            )
        seen.setdefault(trig.turn, position)
    ext = rec.x_workbench
    if ext is not None and ext.anchors is not None:
        keys: set[str] = set()
        for position, anchor in enumerate(ext.anchors):
            path = f"$.{EXTENSION_KEY}.anchors[{position}]"
            if anchor.key in keys:
                errors.append(
                    CorpusError(line, f"{path}.key", f"duplicate anchor key {anchor.key!r}")
                )
            keys.add(anchor.key)
            if anchor.turn is not None and anchor.turn > n_turns:
                errors.append(
                    CorpusError(line, f"{path}.turn", f"turn {anchor.turn} does not exist")
                )
    if ext is not None and ext.turn_images:
        cap = settings.PROACTBENCH_IMAGE_MAX_PER_TURN
        for turn_text, parts in ext.turn_images.items():
            path = f"$.{EXTENSION_KEY}.turn_images.{turn_text}"
            if not (turn_text.isascii() and turn_text.isdigit()) or not (
                1 <= int(turn_text) <= n_turns
            ):
                errors.append(CorpusError(line, path, f"no turn {turn_text!r}"))
            if len(parts) > cap:
                errors.append(
                    CorpusError(
                        line,
                        path,
                        f"{len(parts)} images, more than {cap} (PROACTBENCH_IMAGE_MAX_PER_TURN)",
                    )
                )
    if ext is not None and ext.anchors is not None:
        for turn_text, refs in (ext.trigger_anchors or {}).items():
            path = f"$.{EXTENSION_KEY}.trigger_anchors.{turn_text}"
            if not (turn_text.isascii() and turn_text.isdigit()) or int(turn_text) not in seen:
                errors.append(CorpusError(line, path, f"no trigger at turn {turn_text!r}"))
            for ref in refs:
                if ref not in keys:
                    errors.append(CorpusError(line, path, f"unknown anchor key {ref!r}"))
    return errors


def _anchors_from_blueprint(blueprint: dict) -> dict[str, tuple[str, int | None]]:
    """Anchors named in a blueprint's roadmap: key → (text, turn). Keys are 'T<turn>.<n>'."""
    anchors: dict[str, tuple[str, int | None]] = {}
    for step in blueprint.get("interaction_roadmap") or []:
        if not isinstance(step, dict) or not isinstance(step.get("turn"), int):
            continue
        for n, text in enumerate(step.get("anchors_to_reveal") or [], start=1):
            if isinstance(text, str) and text.strip():
                anchors[f"T{step['turn']}.{n}"] = (text, step["turn"])
    return anchors


def parse_dialogue(
    line: int, raw: Any, *, styles: dict[int, StyleTraits], enrichment: Enrichment
) -> tuple[ParsedDialogue | None, list[CorpusError]]:
    if not isinstance(raw, dict):
        return None, [CorpusError(line, "$", f"expected a JSON object, got {type(raw).__name__}")]
    try:
        unstorable = text_errors(line, raw)
        if unstorable:
            return None, unstorable
        rec = DialogueRecord.model_validate(raw)
    except ValidationError as exc:
        return None, pydantic_errors(line, exc)
    except RecursionError:
        return None, [CorpusError(line, "$", "nested too deeply")]
    errors = _structural_errors(line, rec)
    if errors:
        return None, errors

    ext = rec.x_workbench
    anchor_turns: dict[str, int | None] | None = None
    anchor_texts: dict[str, str] = {}
    trigger_anchor_keys: dict[int, list[str]] = {}
    if ext is not None and ext.anchors is not None:
        anchor_turns = {a.key: a.turn for a in ext.anchors}
        anchor_texts = {a.key: a.text for a in ext.anchors}
        trigger_anchor_keys = {
            int(t): list(keys) for t, keys in (ext.trigger_anchors or {}).items()
        }
    else:
        blueprint = enrichment.blueprint_for(rec.blueprint_id, rec.uuid)
        if blueprint is not None:
            from_roadmap = _anchors_from_blueprint(blueprint)
            anchor_turns = {key: turn for key, (_, turn) in from_roadmap.items()}
            anchor_texts = {key: text for key, (text, _) in from_roadmap.items()}

    triggers = [
        TriggerFacts(position, tp.turn, tp.evaluation_rubric.type, {})
        for position, tp in enumerate(rec.trigger_points)
    ]
    findings = protocol_findings(
        triggers=triggers,
        planner_by_turn={t.turn: t.planner for t in rec.turn_records},
        anchor_turns=anchor_turns,
        num_turns_completed=rec.num_turns_completed,
        turn_count=len(rec.turn_records),
        blueprint_id=rec.blueprint_id,
        style=styles.get(rec.style_combination_index),
        user_messages={t.turn: t.user_message for t in rec.turn_records},
    )
    return (
        ParsedDialogue(line, raw, rec, anchor_turns, anchor_texts, trigger_anchor_keys, findings),
        [],
    )


# --- The official format -----------------------------------------------------------------------


def planner_rubric_type(planner: object) -> object:
    """The trigger type the Planner's record of a turn names (None if it names none)."""
    rubric = planner.get("evaluation_rubric") if isinstance(planner, dict) else None
    return rubric.get("type") if isinstance(rubric, dict) else None


def official_format_errors(line: int, raw: Any) -> list[CorpusError]:
    """Why ``raw`` is not a line the official tools accept, or []: the import's own checks
    (schema, structure), then nothing of the Workbench's — no ``x_workbench`` key, and only the
    release's trigger types, in ``trigger_points`` and in the Planner's record of each turn.
    ``export_corpus --official-only`` checks every line it writes with this."""
    _, errors = parse_dialogue(line, raw, styles={}, enrichment=Enrichment())
    if errors:
        return errors
    if EXTENSION_KEY in raw:
        errors.append(CorpusError(line, f"$.{EXTENSION_KEY}", "a Workbench key, not official"))
    for position, point in enumerate(raw["trigger_points"]):
        kind = point["evaluation_rubric"]["type"]
        if kind not in RELEASE_TRIGGER_TYPES:
            path = f"$.trigger_points[{position}].evaluation_rubric.type"
            errors.append(CorpusError(line, path, f"{kind!r} is not an official trigger type"))
    for position, turn in enumerate(raw["turn_records"]):
        kind = planner_rubric_type(turn.get("planner"))
        if kind is not None and kind not in RELEASE_TRIGGER_TYPES:
            path = f"$.turn_records[{position}].planner.evaluation_rubric.type"
            errors.append(CorpusError(line, path, f"{kind!r} is not an official trigger type"))
    return errors
