"""Read the release's optional side files into an Enrichment for the dialogue import.

No samples of ``tasks.jsonl`` or ``blueprints.jsonl`` ship with the format notes, so these readers
follow the documented field names and accept the obvious aliases (docs/corpus-format.md lists
them). A record is matched to dialogues by (id, uuid) when it carries a uuid, else by id alone.
Both files are small (hundreds of records) and are held in memory.
"""

from typing import IO

from benchmark.corpus.parsing import CorpusError, CorpusImportError, Enrichment, iter_json_lines

_SCENARIO_ALIASES = {
    "title": ("title", "scenario_title", "name"),
    "hidden_goal": ("hidden_goal", "hidden_primary_goal", "primary_goal"),
    "surface_request": ("surface_request", "explicit_trigger", "explicit_request"),
    "ideal_trajectory": ("ideal_trajectory", "ideal_assistant_trajectory"),
    "anchors": ("implicit_anchors", "anchors"),
}


def _first(record: dict, names: tuple[str, ...]):
    for name in names:
        if record.get(name) not in (None, ""):
            return record[name]
    return None


def _as_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return str(value)


def _scenario_fields(record: dict) -> dict:
    fields = {}
    for field, names in _SCENARIO_ALIASES.items():
        value = _first(record, names)
        if value is None:
            continue
        fields[field] = (
            value
            if field == "anchors" and isinstance(value, list)
            else ([value] if field == "anchors" else _as_text(value))
        )
    return fields


def read_tasks(stream: IO[bytes], enrichment: Enrichment, source: str = "tasks.jsonl") -> int:
    """Scenario details. A line is one scenario (with ``scenario_id``) or one persona with a
    list of scenarios under ``scenarios`` / ``tasks``."""
    errors: list[CorpusError] = []
    count = 0
    for line, raw, error in iter_json_lines(stream):
        if error:
            errors.append(error)
            continue
        if not isinstance(raw, dict):
            errors.append(CorpusError(line, "$", "expected a JSON object"))
            continue
        nested = raw.get("scenarios") or raw.get("tasks")
        items = nested if isinstance(nested, list) else [raw]
        for position, item in enumerate(items):
            path = f"$.scenarios[{position}]" if items is nested else "$"
            if not isinstance(item, dict) or not isinstance(item.get("scenario_id"), str):
                errors.append(CorpusError(line, f"{path}.scenario_id", "required field is missing"))
                continue
            uuid = item.get("uuid") or raw.get("uuid")
            enrichment.scenarios[(item["scenario_id"], uuid)] = _scenario_fields(item)
            count += 1
    if errors:
        raise CorpusImportError(errors, len(errors), source)
    return count


def read_blueprints(
    stream: IO[bytes], enrichment: Enrichment, source: str = "blueprints.jsonl"
) -> int:
    """Blueprints with ``interaction_roadmap[]``; their ``anchors_to_reveal`` become the dialogues'
    known anchors (so the anchor rules can be checked)."""
    errors: list[CorpusError] = []
    count = 0
    for line, raw, error in iter_json_lines(stream):
        if error:
            errors.append(error)
            continue
        if not isinstance(raw, dict) or not isinstance(raw.get("blueprint_id"), str):
            errors.append(CorpusError(line, "$.blueprint_id", "required field is missing"))
            continue
        roadmap = raw.get("interaction_roadmap")
        if roadmap is not None and not isinstance(roadmap, list):
            errors.append(CorpusError(line, "$.interaction_roadmap", "expected a list"))
            continue
        enrichment.blueprints[(raw["blueprint_id"], raw.get("uuid"))] = raw
        count += 1
    if errors:
        raise CorpusImportError(errors, len(errors), source)
    return count
