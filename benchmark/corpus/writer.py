"""Upserting checked dialogues in batches (used by the importer, inside its transaction)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from benchmark.corpus.parsing import Enrichment, ParsedDialogue
from benchmark.corpus.schema import EXTENSION_KEY, OFFICIAL_KEYS
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
    TurnImage,
)

_TURN_KEYS = ("turn", "planner", "user_message", "assistant_response")
_TRIGGER_KEYS = ("turn", "evaluation_rubric")
_RUBRIC_KEYS = ("type", "pass_criteria", "partial_criteria", "fail_criteria")


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
    images: int = 0
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
            + ")"
            + (f"   images: {self.images}" if self.images else ""),
            f"  protocol findings: {sum(self.findings_by_code.values())} in "
            f"{self.dialogues_with_findings} dialogue(s)",
        ]
        out += [f"    {code}: {n}" for code, n in sorted(self.findings_by_code.items())]
        return out


class BatchWriter:
    """Upserts batches of parsed dialogues. Runs inside the importer's transaction."""

    def __init__(self, enrichment: Enrichment, summary: ImportSummary) -> None:
        self.enrichment = enrichment
        self.summary = summary
        self.domains = {d.key: d for d in Domain.objects.all()}
        self.styles = {s.index: s for s in CommunicationStyle.objects.all()}
        self.seen_before: set[str] = set()  # unique_id_evals of this batch already in the db

    def write(self, batch: list[ParsedDialogue]) -> None:
        personas = self._personas(batch)
        scenarios = self._scenarios(batch, personas)
        blueprints = self._blueprints(batch, scenarios)
        dialogues = self._dialogues(batch, personas, scenarios, blueprints)
        turn_ids = self._turns(batch, dialogues)
        self._images(batch, dialogues, turn_ids)
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
            if ext and ext.anchors:
                # The scenario's anchors are the facts its dialogues disclose, in the record's
                # order: curation refers to them by position and needs at least two. A tasks
                # side file that lists anchors overrides them (it is updated into info below).
                info["anchors"] = [anchor.text for anchor in ext.anchors]
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

    def _reimported(self, batch: list[ParsedDialogue]) -> list[ParsedDialogue]:
        return [item for item in batch if item.record.unique_id_eval in self.seen_before]

    def _dialogues(self, batch, personas, scenarios, blueprints) -> dict[str, Dialogue]:
        existing = {
            d.unique_id_eval: d
            for d in Dialogue.objects.filter(
                unique_id_eval__in=[item.record.unique_id_eval for item in batch]
            )
        }
        self.seen_before = set(existing)
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
        # A re-import with fewer turns drops the surplus ones (only dialogues seen before can
        # have any), in one statement.
        surplus = Q()
        for item in self._reimported(batch):
            surplus |= Q(
                dialogue=dialogues[item.record.unique_id_eval],
                index__gt=len(item.record.turn_records),
            )
        if surplus:
            Turn.objects.filter(surplus).delete()
        return {
            (dialogue_id, index): pk
            for pk, dialogue_id, index in Turn.objects.filter(dialogue_id__in=ids).values_list(
                "id", "dialogue_id", "index"
            )
        }

    def _images(self, batch, dialogues, turn_ids) -> None:
        """The batch's turn images (their files are stored already): upserted by (turn,
        position); a re-imported dialogue's images that the file no longer has are dropped."""
        rows = [
            TurnImage(
                turn_id=turn_ids[(dialogues[item.record.unique_id_eval].id, stored.turn)],
                position=stored.position,
                file=stored.image.name,
                sha256=stored.image.sha256,
                media_type=stored.image.media_type,
                width=stored.image.width,
                height=stored.image.height,
                byte_size=stored.image.byte_size,
                alt=stored.alt,
            )
            for item in batch
            for stored in item.images
        ]
        TurnImage.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["turn", "position"],
            update_fields=["file", "sha256", "media_type", "width", "height", "byte_size", "alt"],
        )
        self.summary.images += len(rows)
        reimported = [dialogues[item.record.unique_id_eval].id for item in self._reimported(batch)]
        if reimported:
            kept = {(row.turn_id, row.position) for row in rows}
            TurnImage.objects.filter(
                pk__in=[
                    pk
                    for pk, turn_id, position in TurnImage.objects.filter(
                        turn__dialogue_id__in=reimported
                    ).values_list("pk", "turn_id", "position")
                    if (turn_id, position) not in kept
                ]
            ).delete()

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
        dropped = Q()
        for item in self._reimported(batch):
            dropped |= Q(dialogue=dialogues[item.record.unique_id_eval]) & ~Q(
                key__in=list(item.anchor_texts)
            )
        if dropped:
            Anchor.objects.filter(dropped).delete()
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
