"""Import ``final_dialogues.jsonl`` (and optionally ``tasks.jsonl`` / ``blueprints.jsonl``).

Contract:
- The file is streamed line by line; memory does not grow with file size beyond one batch.
- Structural errors (bad JSON or encoding, missing/mistyped fields, duplicate ids, turn numbers
  not 1..n, triggers on missing turns) reject the whole file: every error is reported as
  ``line N, <json path>: <message>`` and nothing is written (one transaction, rolled back).
- Protocol findings do not reject (unless ``strict``): they are stored on the dialogue.
- Idempotent: re-importing the same file leaves the database as it was. Rows are upserted by
  their natural keys, so ids — and whatever later work points at them — survive a re-import.
  An audit status set in the Workbench is kept unless the file itself carries one.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from django.db import transaction
from pydantic import ValidationError

from benchmark.corpus.findings import Finding, TriggerFacts, protocol_findings
from benchmark.corpus.schema import EXTENSION_KEY, OFFICIAL_KEYS, DialogueRecord, json_path
from benchmark.models import (
    Anchor,
    Blueprint,
    CommunicationStyle,
    Dialogue,
    Domain,
    Persona,
    Scenario,
    Trigger,
    Turn,
)

BATCH_SIZE = 100
MAX_REPORTED_ERRORS = 500
_TURN_KEYS = ("turn", "planner", "user_message", "assistant_response")
_TRIGGER_KEYS = ("turn", "evaluation_rubric")
_RUBRIC_KEYS = ("type", "pass_criteria", "partial_criteria", "fail_criteria")


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


@dataclass
class ImportSummary:
    source: str = ""
    lines: int = 0
    dialogues: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    turns: int = 0
    triggers: int = 0
    triggers_by_type: Counter = field(default_factory=Counter)
    findings_by_code: Counter = field(default_factory=Counter)
    dialogues_with_findings: int = 0
    dry_run: bool = False

    def lines_of_text(self) -> list[str]:
        head = "Dry run (nothing written)" if self.dry_run else "Imported"
        out = [
            f"{head}: {self.dialogues} dialogue(s) from {self.source or 'input'} "
            f"({self.created} new, {self.updated} updated, {self.unchanged} unchanged)",
            f"  turns: {self.turns}   triggers: {self.triggers} ("
            + ", ".join(f"{k} {v}" for k, v in sorted(self.triggers_by_type.items()))
            + ")",
            f"  protocol findings: {sum(self.findings_by_code.values())} in "
            f"{self.dialogues_with_findings} dialogue(s)",
        ]
        out += [f"    {code}: {n}" for code, n in sorted(self.findings_by_code.items())]
        return out


# --- Reading ---------------------------------------------------------------------------------


def iter_json_lines(stream: IO[bytes]) -> Iterator[tuple[int, Any, CorpusError | None]]:
    """Yield (line number, parsed object, error) for each non-blank line, streaming."""
    for number, raw in enumerate(stream, start=1):
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
            yield number, json.loads(text), None
        except json.JSONDecodeError as exc:
            yield (
                number,
                None,
                CorpusError(number, "$", f"invalid JSON: {exc.msg} (column {exc.colno})"),
            )


def _pydantic_errors(line: int, exc: ValidationError) -> list[CorpusError]:
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
        for turn_text, refs in (ext.trigger_anchors or {}).items():
            path = f"$.{EXTENSION_KEY}.trigger_anchors.{turn_text}"
            if not turn_text.isdigit() or int(turn_text) not in seen:
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
    line: int, raw: Any, *, style_codes: dict[int, str], enrichment: Enrichment
) -> tuple[ParsedDialogue | None, list[CorpusError]]:
    if not isinstance(raw, dict):
        return None, [CorpusError(line, "$", f"expected a JSON object, got {type(raw).__name__}")]
    try:
        rec = DialogueRecord.model_validate(raw)
    except ValidationError as exc:
        return None, _pydantic_errors(line, exc)
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
        style_code=style_codes.get(rec.style_combination_index, ""),
    )
    return (
        ParsedDialogue(line, raw, rec, anchor_turns, anchor_texts, trigger_anchor_keys, findings),
        [],
    )


# --- Writing a batch -----------------------------------------------------------------------


class _Writer:
    """Upserts batches of parsed dialogues. Runs inside the importer's transaction."""

    def __init__(self, enrichment: Enrichment, summary: ImportSummary) -> None:
        self.enrichment = enrichment
        self.summary = summary
        self.domains = {d.key: d for d in Domain.objects.all()}
        self.styles = {s.index: s for s in CommunicationStyle.objects.all()}

    def write(self, batch: list[ParsedDialogue]) -> None:
        personas = self._personas(batch)
        scenarios = self._scenarios(batch, personas)
        blueprints = self._blueprints(batch, scenarios)
        dialogues = self._dialogues(batch, personas, scenarios, blueprints)
        turn_ids = self._turns(batch, dialogues)
        anchor_ids = self._anchors(batch, dialogues, turn_ids)
        self._triggers(batch, dialogues, turn_ids, anchor_ids)

    def _personas(self, batch: list[ParsedDialogue]) -> dict[str, Persona]:
        wanted: dict[str, dict] = {}
        for item in batch:
            ext = item.record.x_workbench
            info = (
                ext.persona.model_dump(include={"name", "summary"}) if ext and ext.persona else {}
            )
            wanted.setdefault(item.record.uuid, {}).update(info)
        existing = {p.external_id: p for p in Persona.objects.filter(external_id__in=wanted)}
        new = [
            Persona(external_id=uid, **info) for uid, info in wanted.items() if uid not in existing
        ]
        Persona.objects.bulk_create(new)
        changed = []
        for uid, info in wanted.items():
            persona = existing.get(uid)
            if persona and info and any(getattr(persona, k) != v for k, v in info.items()):
                for k, v in info.items():
                    setattr(persona, k, v)
                changed.append(persona)
        Persona.objects.bulk_update(changed, ["name", "summary"])
        existing.update({p.external_id: p for p in new})
        return existing

    def _scenarios(self, batch, personas) -> dict[tuple[str, str], Scenario]:
        wanted: dict[tuple[str, str], dict] = {}
        for item in batch:
            rec = item.record
            info: dict[str, Any] = {"domain_id": self.domains[rec.category_key].id}
            ext = rec.x_workbench
            if ext and ext.scenario:
                info.update(
                    ext.scenario.model_dump(
                        include={"title", "hidden_goal", "surface_request", "ideal_trajectory"}
                    )
                )
            task = self.enrichment.scenario_for(rec.scenario_id, rec.uuid)
            if task:
                info.update(task)
            wanted.setdefault((rec.scenario_id, rec.uuid), {}).update(info)
        existing = {
            (s.key, s.persona.external_id): s
            for s in Scenario.objects.filter(
                key__in={k[0] for k in wanted}, persona__external_id__in={k[1] for k in wanted}
            ).select_related("persona")
        }
        new = {
            (sid, uid): Scenario(key=sid, persona=personas[uid], **info)
            for (sid, uid), info in wanted.items()
            if (sid, uid) not in existing
        }
        Scenario.objects.bulk_create(new.values())
        changed = []
        for key, info in wanted.items():
            scenario = existing.get(key)
            if scenario and any(getattr(scenario, k) != v for k, v in info.items()):
                for k, v in info.items():
                    setattr(scenario, k, v)
                changed.append(scenario)
        fields = [
            "domain",
            "title",
            "hidden_goal",
            "surface_request",
            "ideal_trajectory",
            "anchors",
        ]
        Scenario.objects.bulk_update(changed, fields)
        existing.update(new)
        return existing

    def _blueprints(self, batch, scenarios) -> dict[tuple[str, str], Blueprint]:
        wanted: dict[tuple[str, str], dict] = {}
        for item in batch:
            rec = item.record
            info: dict[str, Any] = {"style_id": self.styles[rec.style_combination_index].id}
            published = self.enrichment.blueprint_for(rec.blueprint_id, rec.uuid)
            if published:
                info["strategic_overview"] = published.get("strategic_overview") or ""
                info["roadmap"] = published.get("interaction_roadmap") or []
                info["style_guardrails"] = published.get("style_guardrails") or {}
            wanted[(rec.blueprint_id, rec.uuid)] = {
                "scenario_id": scenarios[(rec.scenario_id, rec.uuid)].id,
                **info,
            }
        existing = {
            (b.key, b.scenario.persona.external_id): b
            for b in Blueprint.objects.filter(
                key__in={k[0] for k in wanted},
                scenario__persona__external_id__in={k[1] for k in wanted},
            ).select_related("scenario__persona")
        }
        new = {
            (bid, uid): Blueprint(key=bid, **info)
            for (bid, uid), info in wanted.items()
            if (bid, uid) not in existing
        }
        Blueprint.objects.bulk_create(new.values())
        changed = []
        for key, info in wanted.items():
            bp = existing.get(key)
            if bp and any(getattr(bp, k) != v for k, v in info.items()):
                for k, v in info.items():
                    setattr(bp, k, v)
                changed.append(bp)
        Blueprint.objects.bulk_update(
            changed, ["scenario", "style", "strategic_overview", "roadmap", "style_guardrails"]
        )
        existing.update(new)
        return existing

    def _dialogues(self, batch, personas, scenarios, blueprints) -> dict[str, Dialogue]:
        existing = {
            d.unique_id_eval: d
            for d in Dialogue.objects.filter(
                unique_id_eval__in=[item.record.unique_id_eval for item in batch]
            )
        }
        fields = [
            "uuid",
            "blueprint",
            "scenario",
            "persona",
            "domain",
            "style",
            "num_turns_completed",
            "curation_model",
            "token_usage",
            "findings",
            "extra",
            "is_demo",
            "status",
            "prompt_versions",
        ]
        new, changed = [], []
        for item in batch:
            rec, raw = item.record, item.raw
            ext = rec.x_workbench
            values: dict[str, Any] = {
                "uuid": rec.uuid,
                "blueprint_id": blueprints[(rec.blueprint_id, rec.uuid)].id,
                "scenario_id": scenarios[(rec.scenario_id, rec.uuid)].id,
                "persona_id": personas[rec.uuid].id,
                "domain_id": self.domains[rec.category_key].id,
                "style_id": self.styles[rec.style_combination_index].id,
                "num_turns_completed": rec.num_turns_completed,
                "curation_model": rec.evaluated_model,
                "token_usage": raw.get("token_usage"),
                "findings": [f.as_dict() for f in item.findings],
                "extra": {
                    k: v for k, v in raw.items() if k not in OFFICIAL_KEYS and k != EXTENSION_KEY
                },
                "is_demo": bool(ext and ext.demo),
            }
            if ext and ext.status:
                values["status"] = ext.status
            if ext and ext.provenance:
                values["prompt_versions"] = ext.provenance.get("prompt_versions") or {}
            dialogue = existing.get(rec.unique_id_eval)
            if dialogue is None:
                new.append(Dialogue(unique_id_eval=rec.unique_id_eval, **values))
                self.summary.created += 1
            elif any(getattr(dialogue, k) != v for k, v in values.items()):
                for k, v in values.items():
                    setattr(dialogue, k, v)
                changed.append(dialogue)
                self.summary.updated += 1
            else:
                self.summary.unchanged += 1
        Dialogue.objects.bulk_create(new)
        Dialogue.objects.bulk_update(changed, fields)
        existing.update({d.unique_id_eval: d for d in new})
        return existing

    def _turns(self, batch, dialogues) -> dict[tuple[int, int], int]:
        rows = []
        for item in batch:
            dialogue = dialogues[item.record.unique_id_eval]
            for raw_turn in item.raw["turn_records"]:
                rows.append(
                    Turn(
                        dialogue=dialogue,
                        index=raw_turn["turn"],
                        user_message=raw_turn["user_message"],
                        assistant_response=raw_turn["assistant_response"],
                        planner=raw_turn.get("planner"),
                        extra={k: v for k, v in raw_turn.items() if k not in _TURN_KEYS},
                    )
                )
        Turn.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["dialogue", "index"],
            update_fields=["user_message", "assistant_response", "planner", "extra"],
        )
        self.summary.turns += len(rows)
        ids = [d.id for d in dialogues.values()]
        for item in batch:  # a re-import with fewer turns drops the surplus ones
            Turn.objects.filter(
                dialogue=dialogues[item.record.unique_id_eval],
                index__gt=len(item.record.turn_records),
            ).delete()
        return {
            (dialogue_id, index): pk
            for pk, dialogue_id, index in Turn.objects.filter(dialogue_id__in=ids).values_list(
                "id", "dialogue_id", "index"
            )
        }

    def _anchors(self, batch, dialogues, turn_ids) -> dict[tuple[int, str], int]:
        rows = []
        for item in batch:
            dialogue = dialogues[item.record.unique_id_eval]
            for key, text in item.anchor_texts.items():
                turn = (item.anchor_turns or {}).get(key)
                rows.append(
                    Anchor(
                        dialogue=dialogue,
                        key=key,
                        text=text,
                        disclosed_in_id=turn_ids.get((dialogue.id, turn)) if turn else None,
                    )
                )
        Anchor.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["dialogue", "key"],
            update_fields=["text", "disclosed_in"],
        )
        for item in batch:
            Anchor.objects.filter(dialogue=dialogues[item.record.unique_id_eval]).exclude(
                key__in=list(item.anchor_texts)
            ).delete()
        return {
            (dialogue_id, key): pk
            for pk, dialogue_id, key in Anchor.objects.filter(
                dialogue_id__in=[d.id for d in dialogues.values()]
            ).values_list("id", "dialogue_id", "key")
        }

    def _triggers(self, batch, dialogues, turn_ids, anchor_ids) -> None:
        rows = []
        for item in batch:
            dialogue = dialogues[item.record.unique_id_eval]
            for raw_tp in item.raw["trigger_points"]:
                rubric = raw_tp["evaluation_rubric"]
                rows.append(
                    Trigger(
                        turn_id=turn_ids[(dialogue.id, raw_tp["turn"])],
                        type=rubric["type"],
                        pass_criteria=rubric["pass_criteria"],
                        partial_criteria=rubric["partial_criteria"],
                        fail_criteria=rubric["fail_criteria"],
                        rubric_extra={k: v for k, v in rubric.items() if k not in _RUBRIC_KEYS},
                        extra={k: v for k, v in raw_tp.items() if k not in _TRIGGER_KEYS},
                    )
                )
                self.summary.triggers_by_type[rubric["type"]] += 1
        Trigger.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["turn"],
            update_fields=[
                "type",
                "pass_criteria",
                "partial_criteria",
                "fail_criteria",
                "rubric_extra",
                "extra",
            ],
        )
        self.summary.triggers += len(rows)
        dialogue_ids = [d.id for d in dialogues.values()]
        keep = {row.turn_id for row in rows}
        Trigger.objects.filter(turn__dialogue_id__in=dialogue_ids).exclude(
            turn_id__in=keep
        ).delete()
        trigger_ids = dict(
            Trigger.objects.filter(turn__dialogue_id__in=dialogue_ids).values_list("turn_id", "id")
        )
        through = Trigger.anchors.through
        through.objects.filter(trigger_id__in=trigger_ids.values()).delete()
        links = []
        for item in batch:
            dialogue = dialogues[item.record.unique_id_eval]
            for turn, keys in item.trigger_anchor_keys.items():
                trigger_id = trigger_ids[turn_ids[(dialogue.id, turn)]]
                links += [
                    through(trigger_id=trigger_id, anchor_id=anchor_ids[(dialogue.id, key)])
                    for key in dict.fromkeys(keys)
                ]
        through.objects.bulk_create(links)


# --- The service -----------------------------------------------------------------------------


class _Rollback(Exception):
    pass


def corpus_import(
    *,
    stream: IO[bytes],
    source: str = "",
    dry_run: bool = False,
    strict: bool = False,
    enrichment: Enrichment | None = None,
) -> ImportSummary:
    """Check and import a dialogues file. Raises CorpusImportError (nothing written) when any
    line has a structural error, or — with ``strict`` — a protocol finding."""
    enrichment = enrichment or Enrichment()
    summary = ImportSummary(source=source, dry_run=dry_run)
    style_codes = dict(CommunicationStyle.objects.values_list("index", "code"))
    errors: list[CorpusError] = []
    error_total = 0
    seen_ids: dict[str, int] = {}
    batch: list[ParsedDialogue] = []

    def record_errors(new: Iterable[CorpusError]) -> None:
        nonlocal error_total
        for err in new:
            error_total += 1
            if len(errors) < MAX_REPORTED_ERRORS:
                errors.append(err)

    try:
        with transaction.atomic():
            writer = _Writer(enrichment, summary)
            for line, raw, error in iter_json_lines(stream):
                summary.lines = line
                if error is not None:
                    record_errors([error])
                    continue
                parsed, line_errors = parse_dialogue(
                    line, raw, style_codes=style_codes, enrichment=enrichment
                )
                if parsed is not None:
                    uid = parsed.record.unique_id_eval
                    if uid in seen_ids:
                        line_errors.append(
                            CorpusError(
                                line,
                                "$.unique_id_eval",
                                f"duplicate unique_id_eval {uid!r} (first on line {seen_ids[uid]})",
                            )
                        )
                    seen_ids.setdefault(uid, line)
                    if strict:
                        line_errors += [
                            CorpusError(line, f.path, f"{f.code}: {f.message}")
                            for f in parsed.findings
                        ]
                if line_errors:
                    record_errors(line_errors)
                    continue
                summary.dialogues += 1
                summary.findings_by_code.update(f.code for f in parsed.findings)
                summary.dialogues_with_findings += bool(parsed.findings)
                if dry_run or error_total:
                    # Keep checking the rest of the file so every error is reported at once;
                    # stop writing, the transaction will be rolled back.
                    summary.triggers += len(parsed.record.trigger_points)
                    summary.triggers_by_type.update(
                        tp.evaluation_rubric.type for tp in parsed.record.trigger_points
                    )
                    summary.turns += len(parsed.record.turn_records)
                    continue
                batch.append(parsed)
                if len(batch) >= BATCH_SIZE:
                    writer.write(batch)
                    batch.clear()
            if summary.dialogues == 0 and not error_total:
                record_errors(
                    [CorpusError(max(summary.lines, 1), "$", "the file has no dialogues")]
                )
            if error_total:
                raise _Rollback
            if batch:
                writer.write(batch)
            if dry_run:
                raise _Rollback
    except _Rollback:
        if error_total:
            raise CorpusImportError(errors, error_total, source) from None
    return summary
