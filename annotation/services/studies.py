"""Creating studies from a selection, managing their raters, archiving and deleting them.

``check_study_spec`` validates a specification and returns the items it selects; every problem
is reported against the field it concerns (``StudyInputError.errors``), so the researcher's form
and the admin can show it in place. ``study_create`` writes the study, its raters and items in
one transaction: a study is created whole or not at all.

A study that has answers is never deleted (``study_delete`` refuses, and so does the schema):
``study_archive`` takes it off the annotators' and the staff's lists instead, reversibly.
"""

from __future__ import annotations

import random
import secrets
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from annotation.heuristics import suggest_failure_mode
from annotation.kinds import StudyKind, normalise_label, valid_labels
from annotation.models import (
    Answer,
    Rater,
    RaterExclusion,
    Study,
    StudyArchiveEvent,
    StudyItem,
    StudyStatus,
)
from benchmark.models import (
    Condition,
    Dialogue,
    DialogueStatus,
    EvaluationRun,
    EvaluationUnit,
    JudgeDisagreement,
    Judgment,
    JudgmentState,
    ModelEndpoint,
    TriggerType,
    Turn,
    UnitState,
    Verdict,
)

UNIT_KINDS = (
    StudyKind.PAIRWISE,
    StudyKind.ADJUDICATION,
    StudyKind.DIRECT_RATING,
    StudyKind.FAILURE_MODE,
)
# Words that would tell an annotator which condition a reply comes from.
CONDITION_WORDS = ("vanilla", "rubric-injected", "rubric_injected", "rubric injected")
NAME_MAX_CHARS = Study._meta.get_field("name").max_length
INSTRUCTIONS_MAX_CHARS = 10_000  # shown above every item: a page, not a book
LEASE_MAX_MINUTES = 24 * 60
MAX_ITEMS = 1_000_000
SEED_MAX = 2**32 - 1  # what a random seed is drawn from (``secrets.randbits(32)``)
GOLD_ERRORS_SHOWN = 20


class StudyInputError(Exception):
    """Bad input for a study, by field ("__all__" when it concerns no single field)."""

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))


class StudyHasAnswers(Exception):
    """The study has answers (live or retracted): it may be archived, never deleted."""

    def __init__(self, study: Study, answers: int):
        self.study, self.answers = study, answers
        super().__init__(
            f"{study.name!r} has {answers} answer(s) and cannot be deleted: archive it instead."
        )


@dataclass(frozen=True)
class StudySpec:
    kind: str
    name: str
    annotators: Sequence[AbstractBaseUser]
    instructions: str = ""
    overlap: int = 2
    reason_required: bool = False
    lease_minutes: int = 30
    adjudicators: Sequence[AbstractBaseUser] = ()
    # The selection.
    run: EvaluationRun | None = None
    endpoints: Sequence[ModelEndpoint] = ()  # empty: every model of the run
    trigger_type: str = ""  # empty: any
    condition: str = ""  # direct rating, failure modes, adjudication; empty: any
    dialogue_status: str = DialogueStatus.DRAFT  # dialogue audit; empty: any
    max_items: int | None = None  # a seeded random sample of this many (gold items extra)
    seed: int | None = None
    gold: str = ""  # one per line: KEY EXPECTED


@dataclass
class ItemDraft:
    key: str
    dialogue_id: int | None = None
    trigger_id: int | None = None
    unit_id: int | None = None
    unit_b_id: int | None = None
    disagreement_id: int | None = None
    payload: dict = field(default_factory=dict)
    names: tuple[str, ...] = ()  # model and judge names behind the item (the blinding check)
    sides: tuple[str, ...] = ()  # what the display order permutes (pairwise cases, judges)


# --- Selections -------------------------------------------------------------------------------


def _unit_key(unit: EvaluationUnit, *, with_condition: bool = True) -> str:
    turn = unit.trigger.turn
    key = f"{turn.dialogue.unique_id_eval}#t{turn.index}#{unit.endpoint.name}"
    if with_condition:
        key += f"#{unit.condition}"
    return key + (f"#s{unit.sample_index}" if unit.sample_index else "")


def _endpoint_names(endpoint: ModelEndpoint) -> tuple[str, ...]:
    return (endpoint.name, endpoint.display_name, endpoint.model_name)


def _run_units(spec: StudySpec):
    units = EvaluationUnit.objects.filter(run=spec.run, state=UnitState.DONE).exclude(reply="")
    if spec.endpoints:
        units = units.filter(endpoint__in=spec.endpoints)
    if spec.trigger_type:
        units = units.filter(trigger__type=spec.trigger_type)
    return units.select_related("endpoint", "trigger__turn__dialogue").order_by("id")


def _audit_drafts(spec: StudySpec) -> list[ItemDraft]:
    dialogues = Dialogue.objects.order_by("id")
    if spec.dialogue_status:
        dialogues = dialogues.filter(status=spec.dialogue_status)
    return [ItemDraft(key=d.unique_id_eval, dialogue_id=d.pk) for d in dialogues]


def _pairwise_drafts(spec: StudySpec) -> list[ItemDraft]:
    pairs: dict[tuple[int, int], dict[str, EvaluationUnit]] = defaultdict(dict)
    for unit in _run_units(spec).filter(sample_index=0):
        pairs[(unit.trigger_id, unit.endpoint_id)][unit.condition] = unit
    drafts = []
    for pair in pairs.values():
        a, b = pair.get(Condition.VANILLA), pair.get(Condition.RUBRIC_INJECTED)
        if a is None or b is None:
            continue
        drafts.append(
            ItemDraft(
                key=_unit_key(a, with_condition=False),
                dialogue_id=a.trigger.turn.dialogue_id,
                trigger_id=a.trigger_id,
                unit_id=a.pk,
                unit_b_id=b.pk,
                names=_endpoint_names(a.endpoint),
                sides=("A", "B"),
            )
        )
    return drafts


def _direct_drafts(spec: StudySpec) -> list[ItemDraft]:
    units = _run_units(spec)
    if spec.condition:
        units = units.filter(condition=spec.condition)
    return [
        ItemDraft(
            key=_unit_key(u),
            dialogue_id=u.trigger.turn.dialogue_id,
            trigger_id=u.trigger_id,
            unit_id=u.pk,
            names=_endpoint_names(u.endpoint),
        )
        for u in units
    ]


def _failure_drafts(spec: StudySpec) -> list[ItemDraft]:
    """RECOVERY replies the run's primary judge failed, each with its suggested label."""
    units = _run_units(spec).filter(trigger__type=TriggerType.RECOVERY)
    if spec.condition:
        units = units.filter(condition=spec.condition)
    failed = Judgment.objects.filter(
        judge_id=spec.run.primary_judge_id, state=JudgmentState.DONE, verdict=Verdict.FAIL
    )
    units = list(units.filter(id__in=failed.values("unit_id")))
    earlier: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for dialogue_id, index, text in (
        Turn.objects.filter(dialogue_id__in={u.trigger.turn.dialogue_id for u in units})
        .order_by("dialogue_id", "index")
        .values_list("dialogue_id", "index", "assistant_response")
    ):
        earlier[dialogue_id].append((index, text))
    drafts = []
    for unit in units:
        turn = unit.trigger.turn
        before = [(i, text) for i, text in earlier[turn.dialogue_id] if i < turn.index]
        suggestion = suggest_failure_mode(unit.reply, before)
        drafts.append(
            ItemDraft(
                key=_unit_key(unit),
                dialogue_id=turn.dialogue_id,
                trigger_id=unit.trigger_id,
                unit_id=unit.pk,
                payload={"suggestion": {"label": suggestion.label, "reason": suggestion.reason}},
                names=_endpoint_names(unit.endpoint),
            )
        )
    return drafts


def _adjudication_drafts(spec: StudySpec) -> list[ItemDraft]:
    disagreements = JudgeDisagreement.objects.filter(
        unit__run=spec.run, final_verdict=""
    ).select_related("unit__endpoint", "unit__trigger__turn__dialogue")
    if spec.endpoints:
        disagreements = disagreements.filter(unit__endpoint__in=spec.endpoints)
    if spec.trigger_type:
        disagreements = disagreements.filter(unit__trigger__type=spec.trigger_type)
    if spec.condition:
        disagreements = disagreements.filter(unit__condition=spec.condition)
    judge_names = tuple(
        name
        for judge in spec.run.judges.all()
        for name in (judge.name, judge.display_name, judge.model_name)
    )
    drafts = []
    for d in disagreements.order_by("id"):
        unit = d.unit
        drafts.append(
            ItemDraft(
                key=_unit_key(unit),
                dialogue_id=unit.trigger.turn.dialogue_id,
                trigger_id=unit.trigger_id,
                unit_id=unit.pk,
                disagreement_id=d.pk,
                names=_endpoint_names(unit.endpoint) + judge_names + tuple(d.verdicts),
                sides=tuple(sorted(d.verdicts)),
            )
        )
    return drafts


SELECTIONS = {
    StudyKind.DIALOGUE_AUDIT: _audit_drafts,
    StudyKind.PAIRWISE: _pairwise_drafts,
    StudyKind.DIRECT_RATING: _direct_drafts,
    StudyKind.FAILURE_MODE: _failure_drafts,
    StudyKind.ADJUDICATION: _adjudication_drafts,
}

EMPTY_SELECTION = {
    StudyKind.DIALOGUE_AUDIT: "No dialogue has the chosen status.",
    StudyKind.PAIRWISE: (
        "The run has no trigger of this selection with both a vanilla and a rubric-injected "
        "reply (finished, sample 0) from the chosen models."
    ),
    StudyKind.DIRECT_RATING: "The run has no finished reply matching this selection.",
    StudyKind.FAILURE_MODE: (
        "The run's primary judge failed no RECOVERY reply matching this selection."
    ),
    StudyKind.ADJUDICATION: "The run has no unresolved judge disagreement matching this selection.",
}


# --- Checks -----------------------------------------------------------------------------------


def _cut(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _parse_gold(
    spec: StudySpec, drafts: dict[str, ItemDraft], errors: dict[str, list[str]]
) -> dict[str, str]:
    gold: dict[str, str] = {}
    allowed = ", ".join(valid_labels(spec.kind))
    problems: list[str] = []
    for number, raw in enumerate(spec.gold.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.rsplit(None, 1)
        if len(parts) != 2:
            problems.append(f"Line {number}: write the item key, a space, the answer.")
            continue
        key, answer = parts
        expected = normalise_label(spec.kind, answer)
        if key not in drafts:
            problems.append(f"Line {number}: no item of this selection has key {_cut(key)!r}.")
        elif key in gold:
            problems.append(f"Line {number}: {_cut(key)!r} is given twice.")
        elif expected is None:
            problems.append(
                f"Line {number}: the expected answer must be one of {allowed} "
                f"(got {_cut(answer)!r})."
            )
        else:
            gold[key] = expected
    # Every bad line is counted, the first few are shown: a pasted file of the wrong kind must
    # give a readable message, not a page per line.
    if problems:
        errors["gold"] += problems[:GOLD_ERRORS_SHOWN]
    if len(problems) > GOLD_ERRORS_SHOWN:
        errors["gold"].append(
            f"… and {len(problems) - GOLD_ERRORS_SHOWN:,} more lines with problems "
            f"({len(problems):,} in all)."
        )
    return gold


def check_study_spec(spec: StudySpec) -> tuple[list[ItemDraft], dict[str, str]]:
    """Validate ``spec``; return the selected item drafts and the gold answers by key.
    Raises ``StudyInputError`` with every problem found, by field."""
    errors: dict[str, list[str]] = defaultdict(list)
    if spec.kind not in StudyKind.values:
        raise StudyInputError({"kind": [f"Unknown study kind {spec.kind!r}."]})
    if not spec.name.strip():
        errors["name"].append("Give the study a name.")
    # The forms check these too; the service must not rely on them (a NUL or an over-long name
    # is a database error on PostgreSQL, not a message).
    for field_name, limit in (("name", NAME_MAX_CHARS), ("instructions", INSTRUCTIONS_MAX_CHARS)):
        text = getattr(spec, field_name)
        if len(text.strip()) > limit:
            errors[field_name].append(f"At most {limit:,} characters ({len(text):,} given).")
        if "\x00" in text:
            errors[field_name].append("Remove the NUL character(s).")
    if "\x00" in spec.gold:
        errors["gold"].append("Remove the NUL character(s).")
    if not 1 <= spec.overlap <= 20:
        errors["overlap"].append("Annotators per item must be between 1 and 20.")
    if not 1 <= spec.lease_minutes <= LEASE_MAX_MINUTES:
        errors["lease_minutes"].append(
            f"The lease must be between one minute and {LEASE_MAX_MINUTES} (a day)."
        )
    if spec.max_items is not None and not 1 <= spec.max_items <= MAX_ITEMS:
        errors["max_items"].append(
            f"Leave empty for every item, or give a number from 1 to {MAX_ITEMS:,}."
        )
    if spec.seed is not None and not 0 <= spec.seed <= SEED_MAX:
        errors["seed"].append(f"Leave empty for a random seed, or give 0 to {SEED_MAX}.")
    annotators = list(dict.fromkeys(spec.annotators))
    if not annotators:
        errors["annotators"].append("Choose at least one annotator.")
    elif len(annotators) < spec.overlap:
        errors["annotators"].append(
            f"{spec.overlap} annotators per item needs at least {spec.overlap} annotators; "
            f"{len(annotators)} chosen."
        )
    if spec.kind == StudyKind.DIALOGUE_AUDIT:
        if spec.overlap != 2:
            errors["overlap"].append(
                "A dialogue audit has two auditors per dialogue (a third only when they split)."
            )
        people = set(annotators) | set(spec.adjudicators)
        if annotators and len(people) < 3:
            errors["adjudicators"].append(
                "Someone must be able to decide when the two auditors split: choose at least "
                "three people in all (annotators and adjudicators)."
            )
    elif spec.run is None:
        errors["run"].append("Choose the evaluation run the items come from.")
    if spec.kind == StudyKind.PAIRWISE and spec.run is not None:
        missing = {Condition.VANILLA, Condition.RUBRIC_INJECTED} - set(spec.run.conditions)
        if missing:
            errors["run"].append(
                f"This run has no {' or '.join(sorted(missing))} replies to compare."
            )
    if spec.kind in UNIT_KINDS and spec.run is not None and spec.endpoints:
        # A model the run did not evaluate selects nothing: say so on the field, rather than
        # silently leaving it out (or blaming the run when it was the only one chosen).
        of_run = set(spec.run.endpoints.values_list("pk", flat=True))
        stray = sorted(e.name for e in spec.endpoints if e.pk not in of_run)
        if stray:
            errors["endpoints"].append(
                f"Not a model of this run: {', '.join(stray[:5])}"
                + (f" and {len(stray) - 5} more." if len(stray) > 5 else ".")
            )
    if spec.kind == StudyKind.FAILURE_MODE and spec.run and spec.run.primary_judge_id is None:
        errors["run"].append("This run has no primary judge, so no reply has failed.")
    if spec.condition and spec.condition not in Condition.values:
        errors["condition"].append(f"Unknown condition {spec.condition!r}.")
    if spec.trigger_type and spec.trigger_type not in TriggerType.values:
        errors["trigger_type"].append(f"Unknown trigger type {spec.trigger_type!r}.")
    if errors:
        raise StudyInputError(dict(errors))

    drafts = SELECTIONS[spec.kind](spec)
    if not drafts:
        field_name = "dialogue_status" if spec.kind == StudyKind.DIALOGUE_AUDIT else "run"
        raise StudyInputError({field_name: [EMPTY_SELECTION[spec.kind]]})
    by_key = {d.key: d for d in drafts}
    gold = _parse_gold(spec, by_key, errors)
    if spec.kind in UNIT_KINDS:
        _check_blinding(spec, drafts, errors)
    if errors:
        raise StudyInputError(dict(errors))
    return drafts, gold


def _check_blinding(spec: StudySpec, drafts: list[ItemDraft], errors) -> None:
    """Annotators see the name and the instructions: neither may name a model, a judge or a
    condition of the selection."""
    names = {n for d in drafts for n in d.names if len(n) >= 3}
    for field_name in ("name", "instructions"):
        text = getattr(spec, field_name).lower()
        found = sorted(n for n in names if n.lower() in text)
        found += [w for w in CONDITION_WORDS if w in text]
        if found:
            errors[field_name].append(
                f"Annotators see this, and it names {', '.join(repr(f) for f in found[:3])}: "
                "a blind study must not reveal models, judges or conditions."
            )


# --- Writes -----------------------------------------------------------------------------------


@transaction.atomic
def study_create(*, spec: StudySpec, created_by: AbstractBaseUser | None = None) -> Study:
    """Create a study, its raters and items (all or nothing). See ``check_study_spec``."""
    drafts, gold = check_study_spec(spec)
    seed = spec.seed if spec.seed is not None else secrets.randbits(32)
    rng = random.Random(seed)
    rng.shuffle(drafts)
    regular = [d for d in drafts if d.key not in gold]
    if spec.max_items is not None:
        regular = regular[: spec.max_items]
    chosen = regular + [d for d in drafts if d.key in gold]
    rng.shuffle(chosen)  # gold items anywhere, not at the end

    study = Study.objects.create(
        name=spec.name.strip(),
        kind=spec.kind,
        instructions=spec.instructions.strip(),
        overlap=spec.overlap,
        reason_required=spec.reason_required or spec.kind == StudyKind.DIRECT_RATING,
        lease_minutes=spec.lease_minutes,
        run=spec.run if spec.kind in UNIT_KINDS else None,
        selection={
            "run": spec.run.pk if spec.run else None,
            "endpoints": sorted(e.name for e in spec.endpoints),
            "trigger_type": spec.trigger_type,
            "condition": spec.condition,
            "dialogue_status": spec.dialogue_status
            if spec.kind == StudyKind.DIALOGUE_AUDIT
            else "",
            "max_items": spec.max_items,
            "seed": seed,
            "matched": len(drafts),
        },
        created_by=created_by,
    )
    annotators = list(dict.fromkeys(spec.annotators))
    adjudicators = set(spec.adjudicators)
    is_audit = spec.kind == StudyKind.DIALOGUE_AUDIT
    raters = [
        Rater(
            study=study,
            user=user,
            annotates=True,
            adjudicates=is_audit and (user in adjudicators or not adjudicators),
        )
        for user in annotators
    ]
    raters += [
        Rater(study=study, user=user, annotates=False, adjudicates=True)
        for user in spec.adjudicators
        if is_audit and user not in annotators
    ]
    Rater.objects.bulk_create(raters)
    StudyItem.objects.bulk_create(
        [
            StudyItem(
                study=study,
                position=position,
                key=draft.key,
                dialogue_id=draft.dialogue_id,
                trigger_id=draft.trigger_id,
                unit_id=draft.unit_id,
                unit_b_id=draft.unit_b_id,
                disagreement_id=draft.disagreement_id,
                # The base display order, random per item; each assignment rotates it by one,
                # so sides (judges) alternate between an item's annotators: balanced.
                payload={**draft.payload, "sides": rng.sample(draft.sides, len(draft.sides))},
                is_gold=draft.key in gold,
                expected=gold.get(draft.key, ""),
                # Every annotator answers each gold item; k of them each other item.
                required_answers=len(annotators) if draft.key in gold else spec.overlap,
            )
            for position, draft in enumerate(chosen)
        ],
        batch_size=1000,
    )
    if is_audit:
        Dialogue.objects.filter(
            pk__in=[d.dialogue_id for d in chosen], status=DialogueStatus.DRAFT
        ).update(status=DialogueStatus.IN_AUDIT)
    return study


@transaction.atomic
def rater_exclusion_set(
    *, rater: Rater, excluded: bool, by: AbstractBaseUser, reason: str = ""
) -> RaterExclusion | None:
    """Exclude a rater from the study's statistics, or include them again. Recorded every
    time (who, when, why); a no-op when the rater is already in that state."""
    locked = Rater.objects.select_for_update().get(pk=rater.pk)
    if locked.excluded == excluded:
        return None
    Rater.objects.filter(pk=rater.pk).update(excluded=excluded)
    rater.excluded = excluded
    return RaterExclusion.objects.create(
        rater=rater, excluded=excluded, by=by, reason=reason.strip()[:2000]
    )


@transaction.atomic
def study_archive(*, study: Study, by: AbstractBaseUser | None) -> StudyArchiveEvent | None:
    """Archive the study: closed to annotators (no new item, no answer, no undo), off their
    home page and the staff's study list, still read by the statistics. Recorded (who, when,
    the status it had); a no-op returning None when it is already archived. Locks the study's
    row, so two archivings (or an archiving and an unarchiving) do not interleave."""
    locked = Study.objects.select_for_update().get(pk=study.pk)
    if locked.status == StudyStatus.ARCHIVED:
        return None
    event = StudyArchiveEvent.objects.create(
        study=locked, archived=True, previous_status=locked.status, by=by
    )
    Study.objects.filter(pk=study.pk).update(status=StudyStatus.ARCHIVED)
    study.status = StudyStatus.ARCHIVED
    return event


@transaction.atomic
def study_unarchive(*, study: Study, by: AbstractBaseUser | None) -> StudyArchiveEvent | None:
    """Undo ``study_archive``: the study gets back the status it had when it was archived
    (open or closed). Recorded; a no-op returning None when it is not archived. Same lock."""
    locked = Study.objects.select_for_update().get(pk=study.pk)
    if locked.status != StudyStatus.ARCHIVED:
        return None
    last = locked.archive_events.filter(archived=True).order_by("-at", "-id").first()
    restored = last.previous_status if last is not None else StudyStatus.CLOSED
    event = StudyArchiveEvent.objects.create(
        study=locked, archived=False, previous_status=StudyStatus.ARCHIVED, by=by
    )
    Study.objects.filter(pk=study.pk).update(status=restored)
    study.status = restored
    return event


@transaction.atomic
def study_delete(*, study: Study) -> None:
    """Delete a study that has no answer, with its items, raters and leases. Raises
    ``StudyHasAnswers`` otherwise (nothing is deleted).

    Locks every rater row of the study first: an answer is only ever written with its rater's
    row locked (``answer_submit``), so none can arrive between the count and the deletion."""
    list(Rater.objects.select_for_update().filter(study_id=study.pk).values_list("pk"))
    answers = Answer.objects.filter(assignment__item__study_id=study.pk).count()
    if answers:
        raise StudyHasAnswers(study, answers)
    study.delete()
