"""Human studies: a study of one kind, its items, who works on it (raters), who holds which
item (assignments, with leases) and every answer ever given.

No answer is ever deleted: an undo soft-retracts it (``retracted_at``) and the assignment goes
back to "leased"; answers are PROTECTed, so a study that has any answer (live or retracted)
cannot be deleted, by the admin, a queryset or ``delete()`` alike: it is archived instead
(``StudyStatus.ARCHIVED``, reversible, each time recorded in ``StudyArchiveEvent``). A study
without answers may be deleted, and its items, raters and leases go with it. Invariants the
database enforces: one assignment per (item, rater), at most one live (unretracted) answer per
assignment, one idempotency key per answer.

Blinding: an item carries its sources (dialogue, trigger, units, disagreement) for the server
only. Annotators see items through opaque random tokens; which side of a pair is which condition,
and which judge is "Judge A", lives in ``Assignment.display`` and never reaches the page.
"""

import secrets

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from annotation.kinds.registry import kind_choices


def new_token() -> str:
    """An opaque, unguessable handle (URL-safe; 22 characters)."""
    return secrets.token_urlsafe(16)


class StudyStatus(models.TextChoices):
    OPEN = "open", "Open"
    CLOSED = "closed", "Closed"
    # Closed to annotators (like CLOSED) and hidden from their pages and the staff list, but
    # read by the statistics. Only ``study_archive`` / ``study_unarchive`` move a study in or out.
    ARCHIVED = "archived", "Archived"


class StudySource(models.TextChoices):
    CREATED = "created", "Created here"
    IMPORTED = "imported", "Imported from the release"


class Study(models.Model):
    name = models.CharField(
        max_length=200, help_text="Annotators see it: never name a model or a condition."
    )
    # The registered kinds (annotation/kinds/): read when validated or shown, so the choices
    # follow the registry without a migration.
    kind = models.CharField(max_length=20, choices=kind_choices)
    status = models.CharField(max_length=8, choices=StudyStatus.choices, default=StudyStatus.OPEN)
    source = models.CharField(
        max_length=10, choices=StudySource.choices, default=StudySource.CREATED
    )
    instructions = models.TextField(blank=True, help_text="Shown above every item.")
    overlap = models.PositiveSmallIntegerField(
        default=2,
        validators=[MinValueValidator(1), MaxValueValidator(20)],
        help_text="k: annotators per item (a dialogue audit: 2, plus a third when they split).",
    )
    reason_required = models.BooleanField(
        default=False, help_text="Whether every answer needs a reason / note."
    )
    lease_minutes = models.PositiveSmallIntegerField(
        default=30,
        validators=[MinValueValidator(1)],
        help_text="An item held this long without an answer may go to someone else.",
    )
    reveal_judge_verdict = models.BooleanField(
        default=False,
        help_text="Direct rating: after each answer, show the annotator the run's primary "
        "judge's verdict on that reply. Off by default: it can anchor their next ratings; "
        "once shown, the answer it follows is final (no undo).",
    )
    item_time_limit_s = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(10), MaxValueValidator(24 * 3600)],
        help_text="Optional time limit per item, in seconds (10 s to a day; empty: none). "
        "When it runs out the item is released as a skip (cause: time limit) and the next one "
        "is offered; an answer arriving later is kept but not counted.",
    )
    # Onboarding (docs/annotation.md, "Onboarding and qualification").
    consent_required = models.BooleanField(
        default=False,
        help_text="The instructions are a consent screen: each annotator accepts them (recorded, "
        "with the text's hash) before their first item, and again if the text changes.",
    )
    qualification_percent = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Minimum share (%) of practice items answered as expected; below it an "
        "annotator gets no real items until staff override. Empty: no threshold.",
    )
    practice_items = models.PositiveIntegerField(
        default=0,
        editable=False,
        help_text="How many of its items are practice items (kept by study_onboarding_set), so "
        "that a study without onboarding costs Next no query for it.",
    )
    # Crowd-platform participation (docs/annotation.md, "Running a study on Prolific").
    participation_enabled = models.BooleanField(
        default=False,
        help_text="The participation link creates a participant account scoped to this study.",
    )
    participation_token = models.CharField(
        max_length=32,
        unique=True,
        default=new_token,
        editable=False,
        help_text="The opaque part of the participation link.",
    )
    completion_code = models.CharField(
        max_length=64,
        blank=True,
        help_text="Shown to a participant who has finished (letters, digits, - and _).",
    )
    completion_url = models.URLField(
        max_length=500,
        blank=True,
        help_text="Where a participant who has finished is sent, e.g. "
        "https://app.prolific.com/submissions/complete?cc=CODE (https only).",
    )
    run = models.ForeignKey(
        "benchmark.EvaluationRun",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="studies",
        help_text="The run its items come from (none for audits and imported studies).",
    )
    selection = models.JSONField(
        default=dict, blank=True, help_text="The selection the items were drawn with, as given."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "studies"
        constraints = [
            models.CheckConstraint(condition=Q(overlap__gte=1), name="study_overlap_positive"),
            models.CheckConstraint(condition=Q(lease_minutes__gte=1), name="study_lease_positive"),
            models.CheckConstraint(
                condition=Q(item_time_limit_s__isnull=True) | Q(item_time_limit_s__gte=10),
                name="study_time_limit_at_least_10s",
            ),
            models.CheckConstraint(
                condition=Q(qualification_percent__isnull=True)
                | Q(qualification_percent__gte=1, qualification_percent__lte=100),
                name="study_qualification_percent_1_100",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Rater(models.Model):
    """Someone who answers in a study: a user, or (imported studies) a release annotator id."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="raters")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="study_raters",
    )
    external_id = models.CharField(
        max_length=64, blank=True, help_text="The release's annotator_id (imported studies)."
    )
    annotates = models.BooleanField(default=True, help_text="Takes regular items.")
    adjudicates = models.BooleanField(
        default=False, help_text="Dialogue audit: may be the third auditor when two split."
    )
    excluded = models.BooleanField(
        default=False, help_text="Left out of the statistics (see the exclusion log)."
    )
    qualification_override = models.BooleanField(
        default=False,
        help_text="Staff let them past the qualification threshold (see the override record).",
    )

    class Meta:
        ordering = ["study_id", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "user"], condition=Q(user__isnull=False), name="rater_user_once"
            ),
            models.UniqueConstraint(
                fields=["study", "external_id"],
                condition=~Q(external_id=""),
                name="rater_external_once",
            ),
            models.CheckConstraint(
                condition=Q(user__isnull=False) | ~Q(external_id=""), name="rater_has_identity"
            ),
        ]

    def __str__(self) -> str:
        return self.user.get_username() if self.user is not None else self.external_id


class RaterExclusion(models.Model):
    """The record of every exclusion and re-inclusion (the latest row is the current state,
    mirrored in ``Rater.excluded``)."""

    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="exclusions")
    excluded = models.BooleanField(help_text="True: excluded from then on; False: included again.")
    reason = models.TextField(blank=True)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.rater} {'excluded' if self.excluded else 'included'} at {self.at:%Y-%m-%d}"


class QualificationOverride(models.Model):
    """The record of every staff override of the qualification threshold and its undoing (the
    latest row is the current state, mirrored in ``Rater.qualification_override``)."""

    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="overrides")
    qualified = models.BooleanField(help_text="True: let past the threshold; False: undone.")
    reason = models.TextField(blank=True)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        what = "qualified" if self.qualified else "override undone"
        return f"{self.rater} {what} at {self.at:%Y-%m-%d}"


class ConsentRecord(models.Model):
    """An annotator's acceptance of a study's instructions / consent text: who, when, and the
    SHA-256 of the exact text accepted (a changed text needs a new acceptance)."""

    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="consents")
    text_sha256 = models.CharField(max_length=64, help_text="SHA-256 of the text accepted.")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["rater", "text_sha256"], name="consent_once_per_text")
        ]

    def __str__(self) -> str:
        return f"{self.rater} accepted {self.text_sha256[:12]} at {self.at:%Y-%m-%d %H:%M}"


class Participant(models.Model):
    """A crowd-platform participant: an account made by the study's participation link, for
    that study only (its one ``Rater``). ``external_id`` is the platform's participant id
    (Prolific's ``PROLIFIC_PID``, or the generic ``participant``); the same id on the same
    study's link is the same account, on another study's link another account."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="participants")
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="participant"
    )
    external_id = models.CharField(max_length=64)
    platform_study_id = models.CharField(max_length=64, blank=True, help_text="STUDY_ID.")
    session_id = models.CharField(max_length=64, blank=True, help_text="The last SESSION_ID.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["study_id", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "external_id"], name="participant_once_per_study"
            )
        ]

    def __str__(self) -> str:
        return f"{self.study_id}/{self.external_id}"


class StudyArchiveEvent(models.Model):
    """The record of every archiving and unarchiving of a study (the latest row explains the
    current state; ``previous_status`` is what unarchiving gives back)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="archive_events")
    archived = models.BooleanField(help_text="True: archived from then on; False: unarchived.")
    previous_status = models.CharField(
        max_length=8, choices=StudyStatus.choices, help_text="The study's status before."
    )
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        what = "archived" if self.archived else "unarchived"
        return f"{self.study} {what} at {self.at:%Y-%m-%d %H:%M}"


class StudyItem(models.Model):
    """One thing to answer. ``required_answers`` is k (every rater for a gold item; 3 for an
    audit whose two auditors split); ``completed_answers`` counts live answers and is only
    changed with the item's row locked."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="items")
    token = models.CharField(max_length=32, unique=True, default=new_token, editable=False)
    position = models.PositiveIntegerField(
        help_text="Random order in which items are handed out (uncorrelated with anything)."
    )
    key = models.CharField(
        max_length=400, help_text="Staff-facing source key (may name models: never shown)."
    )
    dialogue = models.ForeignKey(
        "benchmark.Dialogue", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    trigger = models.ForeignKey(
        "benchmark.Trigger", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    unit = models.ForeignKey(
        "benchmark.EvaluationUnit",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The reply rated; in a pairwise item, Case A (vanilla).",
    )
    unit_b = models.ForeignKey(
        "benchmark.EvaluationUnit",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Pairwise only: Case B (rubric-injected).",
    )
    disagreement = models.ForeignKey(
        "benchmark.JudgeDisagreement",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="study_items",
    )
    payload = models.JSONField(
        default=dict,
        blank=True,
        help_text="Imported items: the release record verbatim. Failure modes: the suggestion.",
    )
    is_gold = models.BooleanField(default=False)
    expected = models.CharField(
        max_length=32, blank=True, help_text="Gold items: the expected label."
    )
    is_practice = models.BooleanField(
        default=False,
        help_text="A gold item given first, with feedback after the answer; never counted in "
        "the statistics (its answers decide qualification).",
    )
    explanation = models.TextField(
        blank=True, help_text="Practice items: why the expected answer is right (Markdown)."
    )
    required_answers = models.PositiveSmallIntegerField()
    completed_answers = models.PositiveSmallIntegerField(default=0)
    needs_adjudication = models.BooleanField(
        default=False, help_text="Dialogue audit: the two auditors split; a third decides."
    )
    outcome = models.CharField(
        max_length=32,
        blank=True,
        help_text="Audit: pass/fail once decided; adjudication: the final verdict.",
    )

    class Meta:
        ordering = ["study_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["study", "key"], name="item_key_once_per_study"),
            models.CheckConstraint(
                condition=Q(is_gold=False) | ~Q(expected=""), name="gold_has_expected"
            ),
            models.CheckConstraint(
                condition=Q(is_practice=False) | Q(is_gold=True), name="practice_is_gold"
            ),
        ]
        indexes = [
            # Next walks the open items in hand-out order and stops at the first with room: an
            # index of exactly those rows, in exactly that order. With their ids (PostgreSQL),
            # a rater's progress joins the open items from the index alone: the planner cannot
            # tell how few rows its condition leaves, and chose to read every item of the study
            # rather than fetch each open one's row (sql.progress_counts).
            models.Index(
                fields=["study", "-needs_adjudication", "position"],
                condition=Q(completed_answers__lt=models.F("required_answers")),
                include=["id"],
                name="item_open_in_order",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.study_id}/{self.key}"


class AssignmentState(models.TextChoices):
    LEASED = "leased", "In progress"
    DONE = "done", "Done"
    LAPSED = "lapsed", "Lapsed (lease expired, item went to someone else)"
    # Given back by its rater (or by the item's time limit): the place is free for others at
    # once, and the rater is never handed the item again (their assignment row stays).
    SKIPPED = "skipped", "Skipped (given back; never handed to this rater again)"


class AssignmentRole(models.TextChoices):
    ANNOTATE = "annotate", "Annotator"
    ADJUDICATE = "adjudicate", "Adjudicator (third auditor)"


class Assignment(models.Model):
    """An item held by a rater. A leased assignment counts towards the item's k while its lease
    runs; a done one for good. ``display`` is what this rater is shown (side order, judge
    order, the suggested label), fixed when the item is first handed out.

    CASCADE from the item and the rater: deleting a study takes its leases with it, while its
    answers (PROTECT below) stop the whole deletion. So "a study with answers cannot be
    deleted" is the schema's rule, not only the admin's."""

    item = models.ForeignKey(StudyItem, on_delete=models.CASCADE, related_name="assignments")
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="assignments")
    state = models.CharField(
        max_length=8, choices=AssignmentState.choices, default=AssignmentState.LEASED
    )
    role = models.CharField(
        max_length=10, choices=AssignmentRole.choices, default=AssignmentRole.ANNOTATE
    )
    display = models.JSONField(default=dict, blank=True)
    leased_at = models.DateTimeField(help_text="When it was last handed out (or reopened).")
    reopened = models.BooleanField(
        default=False,
        help_text="An undo reopened it at least once (its undone answers refill the form).",
    )
    lease_expires_at = models.DateTimeField()
    time_limit_ends_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="A study with an item time limit: when this rater's time on the item runs out "
        "(set when it is handed out or reopened; a lease renewal does not move it).",
    )
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["item", "rater"], name="assignment_once_per_rater"),
        ]
        indexes = [
            # Covering (PostgreSQL; a plain index on SQLite): a rater's progress (done, and the
            # items they held that are still open: sql.progress_counts) reads their whole
            # history on every workspace request, so it is read from this index alone, not
            # from a heap page per assignment.
            models.Index(
                fields=["rater", "state"], include=["item", "id"], name="assignment_by_rater"
            ),
            models.Index(fields=["item", "state"]),
        ]

    def __str__(self) -> str:
        return f"{self.item} → {self.rater} ({self.state})"


class RetractionReason(models.TextChoices):
    UNDO = "undo", "Undone by the annotator"
    LAPSED = "lapsed", "Arrived after the item went to someone else"
    SUPERSEDED = "superseded", "Replaced by a later answer (imported)"
    TIME_LIMIT = "time_limit", "Arrived after the item's time limit ran out"


class AnswerQuerySet(models.QuerySet):
    def counted(self) -> "AnswerQuerySet":
        """The answers the statistics read: live, and not on a practice item (practice is
        training and qualification, never data)."""
        return self.filter(retracted_at__isnull=True, assignment__item__is_practice=False)


class Answer(models.Model):
    """One submitted answer. ``label`` is normalised per kind (``StudyKind.labels``)."""

    assignment = models.ForeignKey(Assignment, on_delete=models.PROTECT, related_name="answers")
    idempotency_key = models.CharField(
        max_length=64, unique=True, help_text="From the form: a resubmission is the same answer."
    )
    label = models.CharField(max_length=32)
    confidence = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(5)]
    )
    note = models.TextField(blank=True, help_text="Reason, rationale or note.")
    details = models.JSONField(
        default=dict,
        blank=True,
        help_text="Per kind: checklist, the side clicked, the suggestion and whether it changed.",
    )
    display = models.JSONField(
        default=dict, blank=True, help_text="What was on screen (side order, judge order, …)."
    )
    started_at = models.DateTimeField(help_text="When the item was put on screen.")
    submitted_at = models.DateTimeField()
    received_at = models.DateTimeField(
        default=timezone.now, help_text="When the server got it (imported: as recorded)."
    )
    time_on_item_s = models.FloatField(help_text="Seconds on the item (the browser's count).")
    retracted_at = models.DateTimeField(null=True, blank=True)
    retraction_reason = models.CharField(
        max_length=10, choices=RetractionReason.choices, blank=True
    )
    verdict_revealed_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the judge's verdict on this item was shown to the rater, after this "
        "answer (a study with reveal_judge_verdict); from then on the answer cannot be undone.",
    )

    objects = AnswerQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["assignment"],
                condition=Q(retracted_at__isnull=True),
                # Covering (PostgreSQL): the seconds of a rater's progress are summed from it.
                include=["time_on_item_s"],
                name="one_live_answer_per_assignment",
            ),
            models.CheckConstraint(
                condition=Q(confidence__isnull=True) | Q(confidence__gte=1, confidence__lte=5),
                name="answer_confidence_1_5",
            ),
            models.CheckConstraint(
                condition=Q(retracted_at__isnull=True, retraction_reason="")
                | (Q(retracted_at__isnull=False) & ~Q(retraction_reason="")),
                name="answer_retraction_has_reason",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.assignment}: {self.label}{' (retracted)' if self.retracted_at else ''}"


class SkipCause(models.TextChoices):
    ANNOTATOR = "annotator", "Skipped by the annotator"
    TIME_LIMIT = "time_limit", "Time limit"


class ItemSkip(models.Model):
    """The record of an item given back: by its rater (Skip, with an optional reason) or by the
    study's item time limit. Its assignment is ``SKIPPED``; one skip per assignment."""

    assignment = models.OneToOneField(
        Assignment, on_delete=models.PROTECT, related_name="skip", help_text="Rater and item."
    )
    cause = models.CharField(max_length=10, choices=SkipCause.choices)
    reason = models.CharField(
        max_length=500, blank=True, help_text="The annotator's reason, if they gave one."
    )
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.assignment} skipped ({self.cause}) at {self.at:%Y-%m-%d %H:%M}"


class FlagCategory(models.TextChoices):
    BROKEN = "broken", "Broken (missing or garbled content)"
    OFFENSIVE = "offensive", "Offensive"
    UNCLEAR = "unclear", "Unclear (cannot be answered as asked)"


class ItemFlag(models.Model):
    """An annotator's flag on one of their items, for staff (the study page lists them). Not an
    answer: the rater may flag and still answer or skip. One per rater, item and category: a
    repeat replaces the note."""

    assignment = models.ForeignKey(
        Assignment, on_delete=models.PROTECT, related_name="flags", help_text="Rater and item."
    )
    category = models.CharField(max_length=10, choices=FlagCategory.choices)
    note = models.CharField(max_length=2000, blank=True)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["assignment", "category"], name="flag_once_per_category"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.assignment} flagged {self.category}"
