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
from typing import cast

from django.contrib.auth.models import User
from django.db import transaction

from annotation import kinds
from annotation.models import (
    Answer,
    Rater,
    RaterExclusion,
    Study,
    StudyArchiveEvent,
    StudyItem,
    StudyStatus,
)
from annotation.services.blinding import blinding_findings, endpoint_names
from benchmark.models import Condition, DialogueStatus, EvaluationRun, ModelEndpoint, TriggerType

NAME_MAX_CHARS = cast(int, Study._meta.get_field("name").max_length)
INSTRUCTIONS_MAX_CHARS = 10_000  # shown above every item: a page, not a book
LEASE_MAX_MINUTES = 24 * 60
TIME_LIMIT_MIN_S, TIME_LIMIT_MAX_S = 10, 24 * 3600  # Study.item_time_limit_s (and its check)
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
    annotators: Sequence[User]
    instructions: str = ""
    overlap: int = 2
    reason_required: bool = False
    lease_minutes: int = 30
    item_time_limit_s: int | None = None  # seconds per item; None: no limit
    adjudicators: Sequence[User] = ()
    # The selection.
    run: EvaluationRun | None = None
    runs: Sequence[EvaluationRun] = ()  # the arena: one run or several (then ``run`` is unused)
    endpoints: Sequence[ModelEndpoint] = ()  # empty: every model of the run(s)
    trigger_type: str = ""  # empty: any
    condition: str = ""  # direct rating, failure modes, adjudication; empty: any
    conditions: Sequence[str] = ()  # the arena: the conditions compared; empty: the runs' all
    per_pair: int | None = None  # the arena: at most this many comparisons per pair of sources
    reveal_judge_verdict: bool = False  # direct rating: show the judge's verdict after answers
    dialogue_status: str = DialogueStatus.DRAFT  # dialogue audit; empty: any
    max_items: int | None = None  # a seeded random sample of this many (gold items extra)
    seed: int | None = None
    gold: str = ""  # one per line: KEY EXPECTED
    # Crowd participants join through the study's link (services/participation.py): then no
    # annotator need be chosen, and k is not bounded by the annotators chosen.
    participation_enabled: bool = False
    # Items given rather than selected (an imported file's, e.g. HALO checkpoints): the kind's
    # ``select`` is not asked and no run is needed; ``imported_from`` names the file.
    drafts: Sequence[ItemDraft] | None = None
    imported_from: str = ""

    @property
    def selected_runs(self) -> list[EvaluationRun]:
        """The runs the items come from: ``runs`` if given, else ``run`` (if any)."""
        if self.runs:
            return list(dict.fromkeys(self.runs))
        return [self.run] if self.run is not None else []


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


# --- Checks -----------------------------------------------------------------------------------


def _cut(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _parse_gold(
    spec: StudySpec, drafts: dict[str, ItemDraft], errors: dict[str, list[str]]
) -> dict[str, str]:
    kind = kinds.get(spec.kind)
    gold: dict[str, str] = {}
    allowed = ", ".join(kind.labels)
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
        expected = kind.normalise_label(answer)
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


def check_study_settings(spec: StudySpec, errors: dict[str, list[str]]) -> None:
    """Add to ``errors`` (by field) the problems with what every study has, whatever its items
    come from: its name and instructions, k, the lease, the sample's size and seed, and enough
    annotators for k."""
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
    limit_s = spec.item_time_limit_s
    if limit_s is not None and not TIME_LIMIT_MIN_S <= limit_s <= TIME_LIMIT_MAX_S:
        errors["item_time_limit_s"].append(
            f"Leave empty for no time limit, or give {TIME_LIMIT_MIN_S} to "
            f"{TIME_LIMIT_MAX_S:,} seconds."
        )
    for field_name in ("max_items", "per_pair"):
        limit = getattr(spec, field_name)
        if limit is not None and not 1 <= limit <= MAX_ITEMS:
            errors[field_name].append(
                f"Leave empty for every item, or give a number from 1 to {MAX_ITEMS:,}."
            )
    if spec.seed is not None and not 0 <= spec.seed <= SEED_MAX:
        errors["seed"].append(f"Leave empty for a random seed, or give 0 to {SEED_MAX}.")
    annotators = list(dict.fromkeys(spec.annotators))
    if spec.participation_enabled:
        pass  # participants join by the link: as many as come
    elif not annotators:
        errors["annotators"].append(
            "Choose at least one annotator (or open the study to crowd participants)."
        )
    elif len(annotators) < spec.overlap:
        errors["annotators"].append(
            f"{spec.overlap} annotators per item needs at least {spec.overlap} annotators; "
            f"{len(annotators)} chosen."
        )


def check_study_spec(spec: StudySpec) -> tuple[list[ItemDraft], dict[str, str]]:
    """Validate ``spec``; return the selected item drafts and the gold answers by key.
    Raises ``StudyInputError`` with every problem found, by field."""
    errors: dict[str, list[str]] = defaultdict(list)
    kind = kinds.find(spec.kind)
    if kind is None:
        raise StudyInputError({"kind": [f"Unknown study kind {spec.kind!r}."]})
    check_study_settings(spec, errors)
    runs = spec.selected_runs
    # A kind that draws from several runs shows the "runs" field instead of "run".
    run_field = "runs" if "runs" in kind.selection_fields else "run"
    if kind.from_run and not runs and spec.drafts is None:
        errors[run_field].append("Choose the evaluation run the items come from.")
    if kind.from_run and runs and spec.endpoints:
        # A model the run did not evaluate selects nothing: say so on the field, rather than
        # silently leaving it out (or blaming the run when it was the only one chosen).
        of_runs = set(
            ModelEndpoint.objects.filter(evaluated_in__in=runs).values_list("pk", flat=True)
        )
        stray = sorted(e.name for e in spec.endpoints if e.pk not in of_runs)
        if stray:
            errors["endpoints"].append(
                f"Not a model of {'this run' if len(runs) == 1 else 'these runs'}: "
                f"{', '.join(stray[:5])}"
                + (f" and {len(stray) - 5} more." if len(stray) > 5 else ".")
            )
    if spec.condition and spec.condition not in Condition.values:
        errors["condition"].append(f"Unknown condition {spec.condition!r}.")
    unknown = [c for c in spec.conditions if c not in Condition.values]
    if unknown:
        errors["conditions"].append(f"Unknown condition {unknown[0]!r}.")
    if spec.trigger_type and spec.trigger_type not in TriggerType.values:
        errors["trigger_type"].append(f"Unknown trigger type {spec.trigger_type!r}.")
    kind.check(spec, errors)
    if errors:
        raise StudyInputError(dict(errors))

    drafts = list(spec.drafts) if spec.drafts is not None else kind.select(spec)
    if not drafts:
        raise StudyInputError({kind.empty_selection_field: [kind.empty_selection]})
    by_key = {d.key: d for d in drafts}
    gold = _parse_gold(spec, by_key, errors)
    if kind.from_run or spec.drafts is not None:
        _check_blinding(spec, drafts, errors)
    if errors:
        raise StudyInputError(dict(errors))
    return drafts, gold


def _check_blinding(spec: StudySpec, drafts: list[ItemDraft], errors) -> None:
    """Annotators see the name and the instructions: neither may name a model, a judge or a
    condition of the selection."""
    names = {n for d in drafts for n in d.names}
    for field_name in ("name", "instructions"):
        if message := blinding_message(getattr(spec, field_name), names):
            errors[field_name].append(message)


def blinding_message(text: str, names: set[str]) -> str:
    """Why annotators must not see ``text`` (it names one of ``names`` or a condition), or ""."""
    found = blinding_findings(text, names)
    if not found:
        return ""
    return (
        f"Annotators see this, and it names {', '.join(repr(f) for f in found[:3])}: "
        "a blind study must not reveal models, judges or conditions."
    )


def check_study_text(*, study: Study, name: str, instructions: str) -> dict[str, list[str]]:
    """The blinding rule for a study's new name and instructions (an edit in the admin):
    neither may name a model or judge of the study's run, or a condition. The errors by
    field, empty when both are blind."""
    runs = study_runs(study)
    if not kinds.get(study.kind).from_run or not runs:
        return {}  # as at creation: only a study drawn from a run has names to hide
    names: set[str] = set()
    for run in runs:
        for endpoint in (*run.endpoints.all(), *run.judges.all()):
            names.update(endpoint_names(endpoint))
    errors = {}
    for field_name, text in (("name", name), ("instructions", instructions)):
        if message := blinding_message(text, names):
            errors[field_name] = [message]
    return errors


def study_runs(study: Study) -> list[EvaluationRun]:
    """The runs a study's items come from: its ``run``, or (an arena over several runs, which
    has none) the runs its selection recorded."""
    if study.run_id is not None:
        return [study.run] if study.run is not None else []
    ids = study.selection.get("runs") or []
    return list(EvaluationRun.objects.filter(pk__in=ids).order_by("pk"))


# --- Writes -----------------------------------------------------------------------------------


@transaction.atomic
def study_create(*, spec: StudySpec, created_by: User | None = None) -> Study:
    """Create a study, its raters and items (all or nothing). See ``check_study_spec``."""
    drafts, gold = check_study_spec(spec)
    kind = kinds.get(spec.kind)
    seed = spec.seed if spec.seed is not None else secrets.randbits(32)
    rng = random.Random(seed)
    chosen = kind.sample(drafts, spec=spec, gold=gold, rng=rng)
    runs = spec.selected_runs if kind.from_run else []

    study = Study.objects.create(
        name=spec.name.strip(),
        kind=spec.kind,
        instructions=spec.instructions.strip(),
        overlap=spec.overlap,
        reason_required=spec.reason_required or kind.always_requires_reason,
        lease_minutes=spec.lease_minutes,
        item_time_limit_s=spec.item_time_limit_s,
        participation_enabled=spec.participation_enabled,
        reveal_judge_verdict=spec.reveal_judge_verdict
        and "reveal_judge_verdict" in kind.selection_fields,
        # A study over several runs (an arena) has no one run: its selection lists them.
        run=runs[0] if len(runs) == 1 else None,
        selection={
            "run": runs[0].pk if len(runs) == 1 else None,
            "runs": sorted(r.pk for r in runs) if len(runs) > 1 else [],
            "endpoints": sorted(e.name for e in spec.endpoints),
            "trigger_type": spec.trigger_type,
            "condition": spec.condition,
            "conditions": list(spec.conditions) if "conditions" in kind.selection_fields else [],
            "per_pair": spec.per_pair if "per_pair" in kind.selection_fields else None,
            "dialogue_status": (
                spec.dialogue_status if "dialogue_status" in kind.selection_fields else ""
            ),
            "max_items": spec.max_items,
            "seed": seed,
            "matched": len(drafts),
            **({"imported_from": spec.imported_from} if spec.imported_from else {}),
        },
        created_by=created_by,
    )
    annotators = list(dict.fromkeys(spec.annotators))
    adjudicators = set(spec.adjudicators)
    # Kinds with adjudicators: the chosen ones decide splits (any annotator when none chosen).
    raters = [
        Rater(
            study=study,
            user=user,
            annotates=True,
            adjudicates=kind.has_adjudicators and (user in adjudicators or not adjudicators),
        )
        for user in annotators
    ]
    raters += [
        Rater(study=study, user=user, annotates=False, adjudicates=True)
        for user in spec.adjudicators
        if kind.has_adjudicators and user not in annotators
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
    kind.after_create(study, chosen)
    return study


@transaction.atomic
def rater_exclusion_set(
    *, rater: Rater, excluded: bool, by: User, reason: str = ""
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
def study_archive(*, study: Study, by: User | None) -> StudyArchiveEvent | None:
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
def study_unarchive(*, study: Study, by: User | None) -> StudyArchiveEvent | None:
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
