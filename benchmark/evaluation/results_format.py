"""The release's ``{model}_proactivity_bench_results.jsonl`` files, both ways.

``results_import`` loads one or more files as one completed, *imported* evaluation run: each
model a (non-callable) endpoint, each scored trigger a unit (condition vanilla, sample 0) with the
model's reply and one judgment by the judge named on the command line (the release's primary
judge is GPT-5.4). Triggers the file does not score — SKIPPED, or no row at all — stay as units in
state ``missing``, so coverage is visible, never silently dropped. Same guarantees as the corpus
import: every error as ``line N, <json path>: <message>`` (prefixed with the file), nothing
written when any line fails.

``results_export`` writes any run (imported or run here) back in that format.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any, Literal

from django.db import transaction
from django.utils.text import slugify
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from benchmark.corpus.exporter import trigger_rubric
from benchmark.corpus.parsing import CorpusError, CorpusImportError, iter_json_lines
from benchmark.corpus.schema import json_path
from benchmark.evaluation.evidence import grade_evidence
from benchmark.models import (
    Condition,
    Dialogue,
    EvaluationRun,
    EvaluationUnit,
    Judgment,
    JudgmentState,
    ModelEndpoint,
    ResultRecordMeta,
    RunSource,
    RunStatus,
    Trigger,
    UnitState,
)
from benchmark.providers.replay import REPLAY
from benchmark.vocabulary import RELEASE_TRIGGER_TYPES, TRIGGER_TYPES, Verdict, parse_verdict

_TOP_KEYS = ("unique_id_eval", "evaluated_model", "trigger_points", "turn_records")
_DERIVED_KEYS = (
    "blueprint_id",
    "scenario_id",
    "uuid",
    "category_key",
    "style_combination_index",
    "num_trigger_points",
    "trigger_stats",
    "source_evaluated_model",
)
_TURN_KEYS = ("turn", "user_message", "assistant_response", "original_assistant_response")
_RESULT_KEYS = ("status", "score", "rationale", "evidence")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class EvaluationResult(_Open):
    status: Literal["EVALUATED", "SKIPPED"]
    score: StrictStr | None = None
    rationale: StrictStr | None = None
    evidence: StrictStr | None = None


class ResultTrigger(_Open):
    turn: StrictInt = Field(ge=1)
    evaluation_result: EvaluationResult


class ResultTurn(_Open):
    turn: StrictInt = Field(ge=1)
    user_message: StrictStr
    assistant_response: StrictStr | None = None


class ResultRecord(_Open):
    unique_id_eval: StrictStr
    evaluated_model: StrictStr
    trigger_points: list[ResultTrigger]
    turn_records: list[ResultTurn]


@dataclass
class ResultsSummary:
    run_id: int = 0
    models: Counter = field(default_factory=Counter)  # model → scored triggers
    missing: Counter = field(default_factory=Counter)  # model → triggers without a score
    evidence: Counter = field(default_factory=Counter)  # per judgment: exact/close/not_found/none
    # Per quote fragment: a judgment is "close" when any one of its fragments is found, which
    # hides the fragments that are not; these counts show them.
    fragments: Counter = field(default_factory=Counter)  # exact / close / not_found

    def lines_of_text(self) -> list[str]:
        out = [f"Imported results as run {self.run_id}:"]
        for model in sorted(self.models):
            scored, missing = self.models[model], self.missing[model]
            total = scored + missing
            out.append(f"  {model}: {scored} scored trigger(s) of {total} ({missing} missing)")
        out.append(
            "  evidence quotes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.evidence.items()))
        )
        out.append(
            "  evidence fragments: "
            + ", ".join(
                f"{label} {self.fragments[key]}"
                for key, label in (
                    ("exact", "found"),
                    ("close", "close"),
                    ("not_found", "not found"),
                )
            )
        )
        return out


def _endpoint_for(model: str) -> ModelEndpoint:
    """Imported models and judges are named endpoints that cannot be called (provider replay,
    inactive), so they sit on the same leaderboard as models run here."""
    name = slugify(model.replace(".", "-"))[:80] or "model"
    endpoint, _ = ModelEndpoint.objects.get_or_create(
        name=name,
        defaults={
            "display_name": model,
            "provider": REPLAY,
            "model_name": model,
            "is_active": False,
            "api_key_env": "",
        },
    )
    return endpoint


@dataclass
class _Parsed:
    source: str
    line: int
    raw: dict
    record: ResultRecord
    dialogue_id: int
    triggers: dict[int, int]  # turn → trigger id


def _parse(
    source: str,
    stream: IO[bytes],
    dialogue_ids: dict[str, int],
    triggers_by_dialogue: dict[int, dict[int, int]],
    errors: list[CorpusError],
) -> Iterator[_Parsed]:
    for line, raw, error in iter_json_lines(stream):
        if error:
            errors.append(error)
            continue
        if not isinstance(raw, dict):
            errors.append(CorpusError(line, "$", "expected a JSON object"))
            continue
        try:
            record = ResultRecord.model_validate(raw)
        except ValidationError as exc:
            errors += [
                CorpusError(
                    line,
                    json_path(e["loc"]),
                    "required field is missing" if e["type"] == "missing" else e["msg"],
                )
                for e in exc.errors(include_url=False)
            ]
            continue
        dialogue_id = dialogue_ids.get(record.unique_id_eval)
        if dialogue_id is None:
            errors.append(
                CorpusError(
                    line,
                    "$.unique_id_eval",
                    f"unknown dialogue {record.unique_id_eval!r} "
                    "(import final_dialogues.jsonl first)",
                )
            )
            continue
        triggers = triggers_by_dialogue.get(dialogue_id, {})
        turns = {t.turn for t in record.turn_records}
        bad = False
        for position, tp in enumerate(record.trigger_points):
            path = f"$.trigger_points[{position}]"
            if tp.turn not in triggers:
                errors.append(
                    CorpusError(
                        line, f"{path}.turn", f"the corpus has no trigger at turn {tp.turn}"
                    )
                )
                bad = True
            result = tp.evaluation_result
            if result.status == "EVALUATED":
                if parse_verdict(result.score) is None:
                    errors.append(
                        CorpusError(
                            line,
                            f"{path}.evaluation_result.score",
                            f"expected PASS, PARTIAL or FAIL, got {result.score!r}",
                        )
                    )
                    bad = True
                if tp.turn not in turns:
                    errors.append(
                        CorpusError(
                            line,
                            f"{path}.turn",
                            f"no turn_records entry holds the reply at turn {tp.turn}",
                        )
                    )
                    bad = True
        if not bad:
            yield _Parsed(source, line, raw, record, dialogue_id, triggers)


def results_import(
    *,
    files: list[tuple[str, IO[bytes]]],
    judge_name: str = "GPT-5.4",
    run_name: str = "",
    only_listed: bool = False,
) -> ResultsSummary:
    """Import results files as one completed run (see module docstring)."""
    dialogue_ids = dict(Dialogue.objects.values_list("unique_id_eval", "id"))
    triggers_by_dialogue: dict[int, dict[int, int]] = {}
    for trigger_id, dialogue_id, turn in Trigger.objects.values_list(
        "id", "turn__dialogue_id", "turn__index"
    ):
        triggers_by_dialogue.setdefault(dialogue_id, {})[turn] = trigger_id
    summary = ResultsSummary()
    all_errors: list[CorpusError] = []
    with transaction.atomic():
        judge = _endpoint_for(judge_name)
        run = EvaluationRun.objects.create(
            name=run_name or f"Imported results ({len(files)} file(s))",
            source=RunSource.IMPORTED,
            status=RunStatus.DONE,
            conditions=[Condition.VANILLA],
            primary_judge=judge,
        )
        run.judges.set([judge])
        scope: set[int] = set()
        units_seen: set[tuple[int, int]] = set()  # (endpoint, trigger)
        first_line: dict[tuple[str, str], str] = {}  # (model, dialogue) → "file line N"
        for source, stream in files:
            errors: list[CorpusError] = []
            for item in _parse(source, stream, dialogue_ids, triggers_by_dialogue, errors):
                key = (item.record.evaluated_model, item.record.unique_id_eval)
                if key in first_line:
                    errors.append(
                        CorpusError(
                            item.line,
                            "$.unique_id_eval",
                            f"{key[1]!r} of {key[0]!r} is listed twice (first on "
                            f"{first_line[key]})",
                        )
                    )
                    continue
                first_line[key] = f"{source} line {item.line}"
                if errors:
                    continue  # keep checking, stop writing
                _write_record(run, judge, item, summary, units_seen)
                scope.add(item.dialogue_id)
            all_errors += [CorpusError(e.line, e.path, f"{source}: {e.message}") for e in errors]
        if all_errors:
            transaction.set_rollback(True)
            raise CorpusImportError(all_errors[:500], len(all_errors), "results")
        if not summary.models:
            transaction.set_rollback(True)
            raise CorpusImportError(
                [CorpusError(1, "$", "no results in the file(s)")], 1, "results"
            )
        if not only_listed:
            scope = set(dialogue_ids.values())
        run.dialogues.set(scope)
        endpoints = list(run.endpoints.all())
        missing = [
            EvaluationUnit(
                run=run,
                trigger_id=trigger_id,
                endpoint=endpoint,
                condition=Condition.VANILLA,
                state=UnitState.MISSING,
                extra={"reason": "no row in the results file"},
            )
            for dialogue_id in scope
            for trigger_id in triggers_by_dialogue.get(dialogue_id, {}).values()
            for endpoint in endpoints
            if (endpoint.pk, trigger_id) not in units_seen
        ]
        EvaluationUnit.objects.bulk_create(missing, batch_size=2000)
        for unit in missing:
            summary.missing[unit.endpoint.model_name] += 1
    summary.run_id = run.pk
    return summary


def _write_record(run, judge, item: _Parsed, summary: ResultsSummary, units_seen) -> None:
    raw = item.raw
    model = raw["evaluated_model"]
    endpoint = _endpoint_for(model)
    run.endpoints.add(endpoint)
    ResultRecordMeta.objects.create(
        run=run,
        endpoint=endpoint,
        dialogue_id=item.dialogue_id,
        meta={k: v for k, v in raw.items() if k not in _TOP_KEYS and k not in _DERIVED_KEYS},
    )
    turns = {t["turn"]: t for t in raw["turn_records"]}
    for raw_tp in raw["trigger_points"]:
        result = raw_tp["evaluation_result"]
        turn = turns.get(raw_tp["turn"], {})
        trigger_id = item.triggers[raw_tp["turn"]]
        evaluated = result["status"] == "EVALUATED"
        unit = EvaluationUnit.objects.create(
            run=run,
            trigger_id=trigger_id,
            endpoint=endpoint,
            condition=Condition.VANILLA,
            state=UnitState.DONE if evaluated else UnitState.MISSING,
            reply=turn.get("assistant_response") or "",
            extra={
                "status": result["status"],
                "trigger_extra": {
                    k: v
                    for k, v in raw_tp.items()
                    if k not in ("turn", "evaluation_rubric", "evaluation_result")
                },
                "result_extra": {k: v for k, v in result.items() if k not in _RESULT_KEYS},
                "turn_extra": {k: v for k, v in turn.items() if k not in _TURN_KEYS},
                "score_as_published": result.get("score"),
            },
        )
        units_seen.add((endpoint.pk, trigger_id))
        if not evaluated:
            summary.missing[model] += 1
            continue
        evidence = result.get("evidence") or ""
        grade = grade_evidence(evidence, unit.reply)
        summary.evidence[grade.status] += 1
        summary.fragments.update(status for _, status in grade.fragments)
        Judgment.objects.create(
            unit=unit,
            judge=judge,
            judge_name=judge.name,
            state=JudgmentState.DONE,
            verdict=result["score"].upper(),
            rationale=result.get("rationale") or "",
            evidence=evidence,
            evidence_status=grade.status,
            evidence_found_share=grade.found_share,
            raw_output="",
        )
        summary.models[model] += 1


# --- Export -----------------------------------------------------------------------------------


def results_export(
    *,
    run: EvaluationRun,
    endpoint: ModelEndpoint,
    out: IO[str],
    condition: str = Condition.VANILLA,
    sample_index: int = 0,
    judge: ModelEndpoint | None = None,
) -> int:
    """Write one model's results of a run in the release format; returns dialogues written."""
    judge = judge or run.primary_judge
    units = (
        EvaluationUnit.objects.filter(
            run=run, endpoint=endpoint, condition=condition, sample_index=sample_index
        )
        .select_related(
            "trigger__turn__dialogue__blueprint",
            "trigger__turn__dialogue__scenario",
            "trigger__turn__dialogue__domain",
            "trigger__turn__dialogue__style",
            "trigger__turn",
        )
        .order_by("trigger__turn__dialogue_id", "trigger__turn__index")
    )
    judgments = {
        j.unit_id: j
        for j in Judgment.objects.filter(unit__in=units, judge=judge, state=JudgmentState.DONE)
    }
    metas = {
        m.dialogue_id: m.meta for m in ResultRecordMeta.objects.filter(run=run, endpoint=endpoint)
    }
    by_dialogue: dict[int, list[EvaluationUnit]] = {}
    for unit in units:
        by_dialogue.setdefault(unit.trigger.turn.dialogue_id, []).append(unit)
    written = 0
    for dialogue_id, dialogue_units in by_dialogue.items():
        dialogue = dialogue_units[0].trigger.turn.dialogue
        if run.source == RunSource.IMPORTED and dialogue_id not in metas:
            continue  # the file had no line for this dialogue: nothing to give back
        record = _export_record(
            dialogue, endpoint, dialogue_units, judgments, metas.get(dialogue_id, {})
        )
        out.write(json.dumps(record) + "\n")
        written += 1
    return written


def _export_record(dialogue, endpoint, units, judgments, meta: dict) -> dict[str, Any]:
    # The release's three types always (the official file has all three); INTERVENTION (a
    # Workbench extension) only when the dialogue has such a trigger.
    present = {unit.trigger.type for unit in units}
    stats = {
        t: {**dict.fromkeys(Verdict.values, 0), "SKIPPED": 0}
        for t in TRIGGER_TYPES
        if t in RELEASE_TRIGGER_TYPES or t in present
    }
    trigger_points, turn_records = [], []
    for unit in units:
        if unit.extra.get("reason") == "no row in the results file":
            continue
        trigger, judgment = unit.trigger, judgments.get(unit.pk)
        if judgment is not None:
            published = unit.extra.get("score_as_published")
            score = (
                published
                if published and published.upper() == judgment.verdict
                else judgment.verdict
            )
            result = {
                "status": "EVALUATED",
                "score": score,
                "rationale": judgment.rationale,
                "evidence": judgment.evidence,
            }
            stats[trigger.type][judgment.verdict] += 1
        else:
            result = {"status": "SKIPPED"}
            stats[trigger.type]["SKIPPED"] += 1
        result.update(unit.extra.get("result_extra", {}))
        trigger_points.append(
            {
                "turn": trigger.turn.index,
                "evaluation_rubric": trigger_rubric(trigger),
                "evaluation_result": result,
                **unit.extra.get("trigger_extra", {}),
            }
        )
        if unit.reply or judgment is not None:
            turn_records.append(
                {
                    "turn": trigger.turn.index,
                    "user_message": trigger.turn.user_message,
                    "assistant_response": unit.reply,
                    "original_assistant_response": trigger.turn.assistant_response,
                    **unit.extra.get("turn_extra", {}),
                }
            )
    record = {
        "blueprint_id": dialogue.blueprint.key,
        "scenario_id": dialogue.scenario.key,
        "unique_id_eval": dialogue.unique_id_eval,
        "uuid": dialogue.uuid,
        "category_key": dialogue.domain.key,
        "style_combination_index": dialogue.style.index,
        "evaluated_model": endpoint.model_name,
        "source_evaluated_model": dialogue.curation_model,
        "num_trigger_points": len(trigger_points),
        "trigger_stats": stats,
        "trigger_points": trigger_points,
        "turn_records": turn_records,
    }
    record.update(meta)
    return record
