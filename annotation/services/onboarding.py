"""Onboarding and qualification: a study's consent screen, its practice items and its
qualification threshold, and the gate they put in front of Next (docs/annotation.md,
"Onboarding and qualification").

The gate is server-side: ``assignments._hand_out`` asks ``rater_gate`` before it hands out
anything, so no request — a page, an htmx swap, a hand-made POST — gets a real item past it.
In order, a rater who annotates:

1. must have accepted the study's current instructions when the study requires consent
   (``ConsentRecord``: who, when, the SHA-256 of the exact text; a changed text asks again);
2. gets the practice items first, one at a time in hand-out order, each followed by feedback
   (the expected answer, in the terms the rater saw, and the item's explanation). Seeing it
   makes that answer final, as a revealed judge's verdict does (``answer_verdict_reveal``:
   the view records it before rendering);
3. with a threshold, gets real items only if their share of practice items answered as
   expected reaches it — or staff overrode it (``QualificationOverride``, undoable).

Practice answers are never data: ``Answer.objects.counted()`` leaves them out, and it is what
the statistics, the study page's figures and the exports read.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import StrEnum

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q

from annotation import kinds
from annotation.models import (
    Answer,
    Assignment,
    ConsentRecord,
    QualificationOverride,
    Rater,
    Study,
    StudyItem,
)
from annotation.services.studies import check_study_text

EXPLANATION_MAX_CHARS = 5_000
PRACTICE_LINES_MAX = 200
COMPLETION_CODE = re.compile(r"[A-Za-z0-9_-]{1,64}")


class Gate(StrEnum):
    CONSENT = "consent"  # must accept the instructions first
    PRACTICE = "practice"  # practice items left: only those are handed out
    UNQUALIFIED = "unqualified"  # below the threshold, no override: nothing is handed out
    OPEN = "open"


def consent_text_sha256(study: Study) -> str:
    return hashlib.sha256(study.instructions.encode()).hexdigest()


def consent_needed(rater: Rater) -> bool:
    study = rater.study
    if not study.consent_required:
        return False
    return not ConsentRecord.objects.filter(
        rater=rater, text_sha256=consent_text_sha256(study)
    ).exists()


def consent_accept(*, rater: Rater, text_sha256: str) -> bool:
    """Record the rater's acceptance of the text whose hash the form carried. False (nothing
    recorded) when that is no longer the study's text: they read another version. Idempotent."""
    if text_sha256 != consent_text_sha256(rater.study):
        return False
    try:
        with transaction.atomic():
            ConsentRecord.objects.create(rater=rater, text_sha256=text_sha256)
    except IntegrityError:
        pass  # accepted already (a double click): the first record stands
    return True


@dataclass(frozen=True)
class PracticeStanding:
    items: int  # practice items in the study
    answered: int  # of them, answered by the rater (live)
    correct: int
    threshold: int | None  # percent

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.answered if self.answered else None

    @property
    def finished(self) -> bool:
        return self.answered >= self.items

    @property
    def passed(self) -> bool:
        """At or above the threshold once every practice item is answered (no threshold: yes)."""
        if self.threshold is None:
            return True
        return self.finished and self.correct * 100 >= self.threshold * self.items


def practice_standings(study: Study) -> dict[int, PracticeStanding]:
    """Every rater's practice standing in the study (two queries)."""
    items = study.practice_items
    rows = (
        Answer.objects.filter(
            assignment__item__study=study,
            assignment__item__is_practice=True,
            retracted_at__isnull=True,
        )
        .values("assignment__rater_id")
        .annotate(
            answered=Count("id"),
            correct=Count("id", filter=Q(label=F("assignment__item__expected"))),
        )
    )
    standings = {
        row["assignment__rater_id"]: PracticeStanding(
            items, row["answered"], row["correct"], study.qualification_percent
        )
        for row in rows
    }
    for rater_id in study.raters.values_list("pk", flat=True):
        standings.setdefault(rater_id, PracticeStanding(items, 0, 0, study.qualification_percent))
    return standings


def practice_standing(rater: Rater) -> PracticeStanding:
    """The rater's practice standing: one query (the item count is ``Study.practice_items``)."""
    study = rater.study
    counts = Answer.objects.filter(
        assignment__rater=rater, assignment__item__is_practice=True, retracted_at__isnull=True
    ).aggregate(
        answered=Count("id"),
        correct=Count("id", filter=Q(label=F("assignment__item__expected"))),
    )
    return PracticeStanding(
        items=study.practice_items,
        answered=counts["answered"],
        correct=counts["correct"],
        threshold=study.qualification_percent,
    )


def next_practice_item(rater: Rater) -> StudyItem | None:
    """The first practice item, in hand-out order, that the rater has never held."""
    return (
        StudyItem.objects.filter(study_id=rater.study_id, is_practice=True)
        .exclude(assignments__rater=rater)
        .order_by("position")
        .first()
    )


def rater_gate(rater: Rater) -> Gate:
    """Where the rater stands (see the module docstring). Adjudicators who do not annotate
    only settle splits: consent applies to them, practice does not. No query for a study
    without onboarding."""
    study = rater.study
    if not (study.consent_required or study.practice_items or study.qualification_percent):
        return Gate.OPEN
    if consent_needed(rater):
        return Gate.CONSENT
    if not rater.annotates:
        return Gate.OPEN
    if next_practice_item(rater) is not None:
        return Gate.PRACTICE
    if rater.study.qualification_percent is None or rater.qualification_override:
        return Gate.OPEN
    return Gate.OPEN if practice_standing(rater).passed else Gate.UNQUALIFIED


@dataclass(frozen=True)
class PracticeFeedback:
    yours: str
    expected: str
    correct: bool
    explanation: str


def practice_answer_to_show(rater: Rater, shown_item_id: int | None) -> Answer | None:
    """The rater's latest live answer if it is on a practice item other than the one on
    screen: the answer whose feedback the workspace shows next. The caller records the showing
    with ``assignments.answer_verdict_reveal`` first, which makes the answer final — an undo
    after seeing the expected answer would let the rater copy it."""
    answer = (
        Answer.objects.filter(assignment__rater=rater, retracted_at__isnull=True)
        .select_related("assignment__item")
        .order_by("-submitted_at", "-id")
        .first()
    )
    if answer is None or answer.assignment.item_id == shown_item_id:
        return None
    return answer if answer.assignment.item.is_practice else None


def practice_feedback(rater: Rater, answer: Answer) -> PracticeFeedback:
    """The feedback on a practice answer: the expected answer in the terms the rater saw (a
    pairwise item's "Response 1", never its condition) and the item's explanation."""
    item = answer.assignment.item
    kind = kinds.get(rater.study.kind)
    return PracticeFeedback(
        yours=kind.answer_shown(answer),
        expected=kind.expected_shown(item.expected, answer.assignment),
        correct=answer.label == item.expected,
        explanation=item.explanation,
    )


# --- Staff ------------------------------------------------------------------------------------


@transaction.atomic
def qualification_override_set(
    *, rater: Rater, qualified: bool, by: User, reason: str = ""
) -> QualificationOverride | None:
    """Let a rater past the threshold, or undo that. Recorded every time (who, when, why); a
    no-op when already so."""
    locked = Rater.objects.select_for_update().get(pk=rater.pk)
    if locked.qualification_override == qualified:
        return None
    Rater.objects.filter(pk=rater.pk).update(qualification_override=qualified)
    rater.qualification_override = qualified
    return QualificationOverride.objects.create(
        rater=rater, qualified=qualified, by=by, reason=reason.strip()[:2000]
    )


class OnboardingInputError(Exception):
    def __init__(self, errors: dict[str, list[str]]):
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))
        self.errors = errors


@dataclass(frozen=True)
class OnboardingSpec:
    consent_required: bool = False
    qualification_percent: int | None = None
    participation_enabled: bool = False
    completion_code: str = ""
    completion_url: str = ""
    practice: str = ""  # one per line: KEY EXPECTED, optionally " | explanation"


def _parse_practice(study: Study, text: str, errors: dict[str, list[str]]) -> dict:
    """{item key: (expected label, explanation)} from the practice lines; problems by line."""
    kind = kinds.get(study.kind)
    allowed = ", ".join(kind.labels)
    practice: dict[str, tuple[str, str]] = {}
    problems = []
    lines = text.splitlines()
    if len(lines) > PRACTICE_LINES_MAX:
        errors["practice"].append(f"At most {PRACTICE_LINES_MAX} lines ({len(lines):,} given).")
        return {}
    keys = set(study.items.values_list("key", flat=True))
    for number, raw in enumerate(lines, start=1):
        line, _, explanation = raw.partition(" | ")
        line, explanation = line.strip(), explanation.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.rsplit(None, 1)
        if len(parts) != 2:
            problems.append(f"Line {number}: write the item key, a space, the answer.")
            continue
        key, label = parts
        expected = kind.normalise_label(label)
        if key not in keys:
            problems.append(f"Line {number}: no item of this study has key {key[:80]!r}.")
        elif key in practice:
            problems.append(f"Line {number}: {key[:80]!r} is given twice.")
        elif expected is None:
            problems.append(f"Line {number}: the expected answer must be one of {allowed}.")
        elif len(explanation) > EXPLANATION_MAX_CHARS:
            problems.append(f"Line {number}: at most {EXPLANATION_MAX_CHARS:,} characters.")
        else:
            practice[key] = (expected, explanation)
    errors["practice"] += problems[:20]
    # Annotators read the explanations: the creation form's blinding rule holds for them too.
    blind = check_study_text(
        study=study, name="", instructions="\n".join(e for _, e in practice.values())
    )
    errors["practice"] += blind.get("instructions", [])
    return practice


def check_onboarding(study: Study, spec: OnboardingSpec) -> dict[str, tuple[str, str]]:
    errors: dict[str, list[str]] = {
        "practice": [],
        "qualification_percent": [],
        "completion_code": [],
        "completion_url": [],
    }
    if "\x00" in spec.practice:
        errors["practice"].append("Remove the NUL character(s).")
        raise OnboardingInputError(errors)
    practice = _parse_practice(study, spec.practice, errors)
    if spec.qualification_percent is not None:
        if not 1 <= spec.qualification_percent <= 100:
            errors["qualification_percent"].append("Give a share from 1 to 100 (%), or none.")
        elif not practice:
            errors["qualification_percent"].append(
                "A threshold needs practice items to measure it on."
            )
    if spec.completion_code and not COMPLETION_CODE.fullmatch(spec.completion_code):
        errors["completion_code"].append(
            "At most 64 letters, digits, - and _ (the platform's code as given)."
        )
    if spec.completion_url and not spec.completion_url.startswith("https://"):
        errors["completion_url"].append("Give an https:// address.")
    if spec.participation_enabled and not (spec.completion_code or spec.completion_url):
        errors["completion_code"].append(
            "Participants need a completion code or a completion URL to finish with."
        )
    if any(errors.values()):
        raise OnboardingInputError({k: v for k, v in errors.items() if v})
    # Items that already have answers keep what they are: their answers were given as data
    # (or as practice), and changing that afterwards would move them in or out of the figures.
    answered = set(
        Assignment.objects.filter(item__study=study, answers__isnull=False).values_list(
            "item__key", flat=True
        )
    )
    current = dict(
        study.items.filter(is_practice=True).values_list("key", "expected")
    )  # practice now
    changed = {key for key in answered if (key in practice) != (key in current)} | {
        key for key in answered & set(practice) & set(current) if practice[key][0] != current[key]
    }
    if changed:
        shown = ", ".join(sorted(k[:60] for k in changed)[:5])
        raise OnboardingInputError(
            {
                "practice": [
                    "These items already have answers, so they cannot become practice items, "
                    f"stop being one or change their answer: {shown}."
                ]
            }
        )
    return practice


@transaction.atomic
def study_onboarding_set(*, study: Study, spec: OnboardingSpec) -> Study:
    """Set the study's onboarding and participation settings and its practice items (all or
    nothing). A practice item is gold: every annotator answers it, so its required count is
    the number of raters who annotate (``participation.participant_join`` adds one for each
    participant who joins)."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    practice = check_onboarding(study, spec)
    study.consent_required = spec.consent_required
    study.qualification_percent = spec.qualification_percent
    study.participation_enabled = spec.participation_enabled
    study.completion_code = spec.completion_code
    study.completion_url = spec.completion_url
    study.save(
        update_fields=[
            "consent_required",
            "qualification_percent",
            "participation_enabled",
            "completion_code",
            "completion_url",
        ]
    )
    annotators = study.raters.filter(annotates=True).count()
    # No longer practice: such an item stays a gold item (with its expected answer), as
    # unanswered as it was, answered by every annotator and now counted like any gold item.
    study.items.filter(is_practice=True).exclude(key__in=practice).update(
        is_practice=False, explanation=""
    )
    study.practice_items = len(practice)
    study.save(update_fields=["practice_items"])
    for key, (expected, explanation) in practice.items():
        study.items.filter(key=key).update(
            is_gold=True,
            is_practice=True,
            expected=expected,
            explanation=explanation,
            required_answers=max(annotators, 1),
        )
    return study


def practice_lines(study: Study) -> str:
    """The study's practice items as the form's lines."""
    return "\n".join(
        f"{key} {expected}" + (f" | {explanation}" if explanation else "")
        for key, expected, explanation in study.items.filter(is_practice=True)
        .order_by("position")
        .values_list("key", "expected", "explanation")
    )


def onboarding_overview(study: Study) -> dict:
    """The study page's onboarding panel: each rater's practice standing and whether they are
    let through, the override record, consents and participants so far."""
    standings = practice_standings(study) if study.practice_items else {}
    rows = []
    for rater in study.raters.select_related("user").order_by("id"):
        standing = standings.get(rater.pk)
        if standing is None or not rater.annotates:
            state = "—"
        elif standing.passed:
            state = "qualified"
        elif rater.qualification_override:
            state = "let through by staff"
        elif not standing.finished:
            state = "practising"
        else:
            state = "below the threshold"
        rows.append({"rater": rater, "standing": standing, "state": state})
    return {
        "rows": rows,
        "overrides": list(
            QualificationOverride.objects.filter(rater__study=study)
            .select_related("rater__user", "by")
            .order_by("-at", "-id")[:20]
        ),
        "consents": ConsentRecord.objects.filter(
            rater__study=study, text_sha256=consent_text_sha256(study)
        ).count(),
        "participants": study.participants.count(),
    }
