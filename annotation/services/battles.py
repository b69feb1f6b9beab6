"""Battles in the public Chatbot Arena format, both ways (docs/exports.md, "Battles").

One JSON object per line: ``model_a``, ``model_b``, ``winner`` (a ``BattleWinner`` value:
``model_a``, ``model_b``, ``tie``, ``tie (bothbad)``), and optionally ``judge``,
``question_id``, ``turn`` and ``tstamp`` (Unix seconds); any other key is ignored. ``model_a``
is the model shown first (Chatbot Arena's left-hand side).

``battles_import`` loads such a file as a **closed** arena study. An item is a (question_id,
turn, pair of models) — the pair unordered, its side A the model whose name sorts first, so a
battle with the models the other way round is the same item, stored de-swapped with the order
it was shown in as the answer's ``display`` (``["B", "A"]``) — and a battle without a
``question_id`` is an item of its own. Raters are the judges (external ids; ``DEFAULT_JUDGE``
when a line names none). A judge who judged an item twice: the later line counts, the earlier
one is kept, retracted as *superseded* (as ``import_study`` does).

The file is streamed (``iter_json_lines``: no line over ``PROACTBENCH_MAX_RECORD_BYTES``, no
file over ``PROACTBENCH_MAX_FILE_BYTES``) and written in batches of ``BATCH`` battles, so memory
stays flat whatever its length; everything happens in one transaction, and a bad line — every
one is reported, ``line N: <field>: <message>`` — rolls it all back: nothing is written.

``battle_record`` is the other way: one battle of ``selectors.study_battles`` as a line of the
format, oriented as its rater saw it, so that export → import gives the same battles.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any, cast

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Count, Max, OuterRef, Subquery
from django.utils import timezone

from annotation.kinds.arena import KIND as ARENA
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
from annotation.selectors import Battle
from annotation.services.importer import MAX_REPORTED, StudyImportError
from annotation.services.studies import NAME_MAX_CHARS
from benchmark.corpus.parsing import iter_json_lines
from benchmark.vocabulary import BATTLE_SWAPPED, BattleWinner

# The format's keys, in the order the export writes them.
BATTLE_FIELDS = ("model_a", "model_b", "winner", "judge", "question_id", "turn", "tstamp")
DEFAULT_JUDGE = "anonymous"  # the rater of the lines that name no judge
JUDGE_MAX_CHARS = cast(int, Rater._meta.get_field("external_id").max_length)
MODEL_MAX_CHARS = 100
QUESTION_MAX_CHARS = 100
ITEM_KEY_MAX_CHARS = cast(int, StudyItem._meta.get_field("key").max_length)
TURN_MAX = 2**31 - 1
TSTAMP_MAX = 253_402_300_799  # 9999-12-31 23:59:59 UTC: the last second a datetime holds
RATERS_PER_ITEM_MAX = 32_767  # an item's answer count is a small integer
BATCH = 500
# The choice an imported battle stands for, by screen position (as an arena answer records it):
# model_a was shown first.
SHOWN_CHOICE: dict[str, str] = {
    BattleWinner.MODEL_A: "1",
    BattleWinner.MODEL_B: "2",
    BattleWinner.TIE: "tie",
    BattleWinner.TIE_BOTHBAD: "bothbad",
}


def battle_record(battle: Battle) -> dict[str, Any]:
    """``battle`` as a line of the format (``BATTLE_FIELDS``), oriented as its rater saw it:
    ``model_a`` the source shown first."""
    model_a, model_b, winner = battle.source_a, battle.source_b, battle.winner
    if battle.shown_swapped:
        model_a, model_b, winner = model_b, model_a, BATTLE_SWAPPED[winner]
    return {
        "model_a": model_a,
        "model_b": model_b,
        "winner": winner,
        "judge": battle.judge,
        "question_id": battle.question_id,
        "turn": battle.turn,
        "tstamp": battle.tstamp,
    }


# --- Reading ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedBattle:
    line: int
    model_a: str
    model_b: str
    winner: str
    judge: str
    question_id: str | int | None
    turn: int | None
    tstamp: float | int | None

    @property
    def swapped(self) -> bool:
        """model_a is the item's side B (the pair's name that sorts last)."""
        return self.model_a > self.model_b

    @property
    def sides(self) -> tuple[str, str]:
        return (self.model_b, self.model_a) if self.swapped else (self.model_a, self.model_b)

    @property
    def item_key(self) -> str:
        # JSON: unambiguous whatever the names hold; a battle without a question is its own item.
        a, b = self.sides
        parts: list[Any] = [self.question_id, self.turn, a, b]
        if self.question_id is None:
            parts.append(self.line)
        return json.dumps(parts, ensure_ascii=False)


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _text_problem(value: str, limit: int) -> str:
    if not value.strip():
        return "must not be empty"
    if len(value) > limit:
        return f"at most {limit} characters ({len(value):,} given)"
    if "\x00" in value:
        return "contains a NUL character (\\u0000)"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains an unpaired surrogate (invalid Unicode)"
    return ""


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_battle(line: int, record: dict) -> tuple[ParsedBattle | None, list[tuple[str, str]]]:
    """One line's battle, or its problems as (field, message)."""
    problems: list[tuple[str, str]] = []

    def text(field: str, limit: int, *, required: bool) -> str | None:
        value = record.get(field)
        if value is None:
            if required:
                missing = field not in record
                problems.append((field, "required field is missing" if missing else "is null"))
            return None
        if not isinstance(value, str):
            problems.append((field, f"expected a string (got {_json_type(value)})"))
            return None
        if problem := _text_problem(value, limit):
            problems.append((field, problem))
            return None
        return value

    model_a = text("model_a", MODEL_MAX_CHARS, required=True)
    model_b = text("model_b", MODEL_MAX_CHARS, required=True)
    if model_a is not None and model_a == model_b:
        problems.append(("model_b", "the same model as model_a: a battle needs two"))
    winner = record.get("winner")
    if winner not in BattleWinner.values:
        allowed = ", ".join(repr(v) for v in BattleWinner.values)
        got = repr(winner)[:60] if isinstance(winner, str) else _json_type(winner)
        what = "required field is missing" if "winner" not in record else f"got {got}"
        problems.append(("winner", f"must be one of {allowed} ({what})"))
    judge = text("judge", JUDGE_MAX_CHARS, required=False)
    question_id = record.get("question_id")
    if question_id is not None:
        if _integer(question_id):
            if len(str(question_id)) > QUESTION_MAX_CHARS:
                problems.append(("question_id", f"at most {QUESTION_MAX_CHARS} digits"))
        elif not isinstance(question_id, str):
            kind = _json_type(question_id)
            problems.append(("question_id", f"expected a string or an integer (got {kind})"))
        elif problem := _text_problem(question_id, QUESTION_MAX_CHARS):
            problems.append(("question_id", problem))
    turn = record.get("turn")
    if turn is not None and not (_integer(turn) and 1 <= turn <= TURN_MAX):
        problems.append(("turn", f"expected a whole number from 1 (got {json.dumps(turn)[:40]})"))
    tstamp = record.get("tstamp")
    if tstamp is not None:
        if not isinstance(tstamp, int | float) or isinstance(tstamp, bool):
            problems.append(("tstamp", f"expected Unix seconds (got {_json_type(tstamp)})"))
        elif not 0 <= tstamp <= TSTAMP_MAX:
            problems.append(("tstamp", f"must be from 0 to {TSTAMP_MAX:,} (Unix seconds)"))
    if problems:
        return None, problems
    battle = ParsedBattle(
        line=line,
        model_a=cast(str, model_a),
        model_b=cast(str, model_b),
        winner=cast(str, winner),
        judge=judge or DEFAULT_JUDGE,
        question_id=question_id,
        turn=turn,
        tstamp=tstamp,
    )
    if len(battle.item_key) > ITEM_KEY_MAX_CHARS:
        field = "question_id" if question_id is not None else "model_a"
        return None, [
            (
                field,
                f"question_id, turn and the two models make an item key of more than "
                f"{ITEM_KEY_MAX_CHARS} characters: shorten them",
            )
        ]
    return battle, []


# --- Writing ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BattleImport:
    """What ``battles_import`` wrote."""

    study: Study
    battles: int
    items: int
    judges: int
    superseded: int


class _Writer:
    """Writes battles into ``study`` a batch at a time; looks up the items, raters and
    assignments a batch needs in the database (keyed by their unique columns) rather than
    keeping every one in memory."""

    def __init__(self, study: Study, source_name: str) -> None:
        self.study, self.source_name = study, source_name
        self.now = timezone.now()
        self.batch: list[ParsedBattle] = []
        self.battles = self.items = self.superseded = 0

    def add(self, battle: ParsedBattle) -> None:
        self.batch.append(battle)
        if len(self.batch) >= BATCH:
            self.flush()

    def flush(self) -> None:
        batch, self.batch = self.batch, []
        if not batch:
            return
        items = self._items(batch)
        raters = self._raters(batch)
        pairs = {(items[b.item_key], raters[b.judge]) for b in batch}
        existing = Assignment.objects.filter(
            item_id__in={item for item, _ in pairs}, rater_id__in={rater for _, rater in pairs}
        ).values_list("item_id", "rater_id", "pk")
        assignments: dict[tuple[int, int], int | Assignment] = {
            (item, rater): pk for item, rater, pk in existing if (item, rater) in pairs
        }
        # A judge's earlier answer to an item, from an earlier batch: the later line counts.
        self.superseded += Answer.objects.filter(
            assignment_id__in=list(assignments.values()), retracted_at__isnull=True
        ).update(retracted_at=self.now, retraction_reason=RetractionReason.SUPERSEDED)
        new: list[Assignment] = []
        for battle in batch:
            pair = (items[battle.item_key], raters[battle.judge])
            if pair not in assignments:
                at = self._time(battle)
                created = Assignment(
                    item_id=pair[0],
                    rater_id=pair[1],
                    state=AssignmentState.DONE,
                    display=self._display(battle),
                    leased_at=at,
                    lease_expires_at=at,
                    completed_at=at,
                )
                new.append(created)
                assignments[pair] = created  # its pk once created, below
        Assignment.objects.bulk_create(new)
        last = {(items[b.item_key], raters[b.judge]): b.line for b in batch}
        answers = []
        for battle in batch:
            pair = (items[battle.item_key], raters[battle.judge])
            held = assignments[pair]
            superseded = last[pair] != battle.line
            self.superseded += superseded
            at = self._time(battle)
            winner = BATTLE_SWAPPED[battle.winner] if battle.swapped else battle.winner
            answers.append(
                Answer(
                    assignment_id=held if isinstance(held, int) else held.pk,
                    idempotency_key=f"battles-{self.study.pk}-{battle.line}",
                    label=winner,
                    details={
                        "source": {"file": self.source_name, "line": battle.line},
                        "choice": SHOWN_CHOICE[battle.winner],
                        "tstamp": battle.tstamp,
                    },
                    display=self._display(battle),
                    started_at=at,
                    submitted_at=at,
                    received_at=at,
                    time_on_item_s=0.0,
                    retracted_at=self.now if superseded else None,
                    retraction_reason=RetractionReason.SUPERSEDED if superseded else "",
                )
            )
        Answer.objects.bulk_create(answers)
        self.battles += len(batch)

    def _items(self, batch: list[ParsedBattle]) -> dict[str, int]:
        first = {b.item_key: b for b in reversed(batch)}  # each key's first battle in the batch
        found = dict(
            StudyItem.objects.filter(study=self.study, key__in=list(first)).values_list("key", "pk")
        )
        new = []
        for key, battle in sorted(first.items(), key=lambda kv: kv[1].line):
            if key in found:
                continue
            a, b = battle.sides
            payload = {
                "sides": ["A", "B"],
                "sources": {"A": a, "B": b},
                "question_id": battle.question_id,
                "turn": battle.turn,
            }
            new.append(
                StudyItem(
                    study=self.study,
                    position=self.items,
                    key=key,
                    payload=payload,
                    required_answers=1,  # counted once every battle is in (``finish``)
                )
            )
            self.items += 1
        found.update((item.key, item.pk) for item in StudyItem.objects.bulk_create(new))
        return found

    def _raters(self, batch: list[ParsedBattle]) -> dict[str, int]:
        judges = {b.judge for b in batch}
        found = dict(
            Rater.objects.filter(study=self.study, external_id__in=judges).values_list(
                "external_id", "pk"
            )
        )
        new = [Rater(study=self.study, external_id=j) for j in sorted(judges - set(found))]
        found.update((r.external_id, r.pk) for r in Rater.objects.bulk_create(new))
        return found

    def _time(self, battle: ParsedBattle) -> datetime:
        if battle.tstamp is None:
            return self.now
        return datetime.fromtimestamp(battle.tstamp, tz=UTC)

    @staticmethod
    def _display(battle: ParsedBattle) -> dict:
        return {"order": ["B", "A"] if battle.swapped else ["A", "B"]}

    def finish(self) -> int:
        """Each item's required and completed answers: its live ones. Returns the most an
        item has (the study's k)."""
        live = (
            Answer.objects.filter(assignment__item=OuterRef("pk"), retracted_at__isnull=True)
            .values("assignment__item")
            .annotate(n=Count("pk"))
            .values("n")
        )
        most = (
            StudyItem.objects.filter(study=self.study)
            .annotate(n=Subquery(live))
            .aggregate(most=Max("n"))["most"]
        )
        if most > RATERS_PER_ITEM_MAX:
            raise StudyImportError(
                [f"an item has {most:,} judges: at most {RATERS_PER_ITEM_MAX:,}"]
            )
        StudyItem.objects.filter(study=self.study).update(
            required_answers=Subquery(live), completed_answers=Subquery(live)
        )
        return most


def battles_import(
    *,
    stream: IO[bytes],
    source_name: str = "battles.jsonl",
    name: str = "",
    imported_by: User | None = None,
) -> BattleImport:
    """Import a battles file as a new closed arena study (see the module docstring). Raises
    ``StudyImportError`` listing every bad line; nothing is written then."""
    name = name.strip() or f"Battles: {source_name} (imported)"[:NAME_MAX_CHARS]
    errors: list[str] = []
    total_errors = 0

    def problem(message: str) -> None:
        nonlocal total_errors
        total_errors += 1
        if len(errors) < MAX_REPORTED:
            errors.append(message)

    if len(name) > NAME_MAX_CHARS or "\x00" in name:
        raise StudyImportError([f"name: at most {NAME_MAX_CHARS} characters, no NUL"])
    with transaction.atomic():
        study = Study.objects.create(
            name=name,
            kind=ARENA.key,
            status=StudyStatus.CLOSED,
            source=StudySource.IMPORTED,
            overlap=1,
            selection={"battles_file": source_name},
            created_by=imported_by,
        )
        writer = _Writer(study, source_name)
        for line, record, error in iter_json_lines(stream):
            if error is not None:
                problem(f"line {line}: {error.message}")
                continue
            if not isinstance(record, dict):
                problem(f"line {line}: expected a JSON object (got {_json_type(record)})")
                continue
            battle, problems = parse_battle(line, record)
            for field, message in problems:
                problem(f"line {line}: {field}: {message}")
            # After the first bad line nothing more is written (it will all be rolled back);
            # the rest is still read, so that every bad line is reported.
            if battle is not None and not total_errors:
                writer.add(battle)
        if not total_errors:
            writer.flush()
            if not writer.battles:
                problem("no battles in the file")
        if total_errors:
            raise StudyImportError(errors, total=total_errors)
        study.overlap = writer.finish()
        study.save(update_fields=["overlap"])
        judges = study.raters.count()
    return BattleImport(
        study=study,
        battles=writer.battles,
        items=writer.items,
        judges=judges,
        superseded=writer.superseded,
    )
