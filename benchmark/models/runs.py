"""Evaluation runs: models under test replying at trigger turns, judges scoring the replies,
and the accounting of every paid call.

A run fans out to one ``EvaluationUnit`` per trigger × model × condition × sample. Each unit is a
row with a unique key and a small state machine (pending → running → done / error), so a task
that is delivered twice, or a worker killed mid-call, can never produce two results; the
``ResponseCacheEntry`` table means a retried or resumed unit never pays twice for a call that
already completed.
"""

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from benchmark.models.corpus import ModelEndpoint, Trigger
from benchmark.vocabulary import FailureMode, Verdict


class ModelPrice(models.Model):
    """Price of a model's tokens, so every call has a cost (editable in the admin)."""

    model_name = models.CharField(
        max_length=200, unique=True, help_text="Matches ModelEndpoint.model_name."
    )
    input_usd_per_mtok = models.DecimalField(
        max_digits=10, decimal_places=4, help_text="USD per million input tokens."
    )
    output_usd_per_mtok = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        help_text="USD per million output tokens (reasoning tokens are billed as output).",
    )

    class Meta:
        ordering = ["model_name"]

    def __str__(self) -> str:
        return self.model_name

    def cost(self, *, input_tokens: int, output_tokens: int, reasoning_tokens: int) -> Decimal:
        million = Decimal(1_000_000)
        return (
            Decimal(input_tokens) * self.input_usd_per_mtok
            + Decimal(output_tokens + reasoning_tokens) * self.output_usd_per_mtok
        ) / million


class Condition(models.TextChoices):
    VANILLA = "vanilla", "Vanilla"
    RUBRIC_INJECTED = "rubric_injected", "Rubric-injected"


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    CANCELLING = "cancelling", "Cancelling"
    CANCELLED = "cancelled", "Cancelled"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class RunSource(models.TextChoices):
    PIPELINE = "pipeline", "Run here"
    IMPORTED = "imported", "Imported results"


class EvaluationRun(models.Model):
    name = models.CharField(max_length=200)
    source = models.CharField(max_length=10, choices=RunSource.choices, default=RunSource.PIPELINE)
    status = models.CharField(max_length=12, choices=RunStatus.choices, default=RunStatus.QUEUED)
    dialogues = models.ManyToManyField(
        "benchmark.Dialogue",
        blank=True,
        related_name="runs",
        help_text="Dialogues whose triggers are evaluated (default: the accepted ones).",
    )
    endpoints = models.ManyToManyField(
        ModelEndpoint, related_name="evaluated_in", help_text="Models under test."
    )
    judges = models.ManyToManyField(
        ModelEndpoint,
        blank=True,
        related_name="judging_in",
        help_text="Every judge scores every reply.",
    )
    primary_judge = models.ForeignKey(
        ModelEndpoint,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Whose verdict is the default for statistics (one of the judges).",
    )
    conditions = models.JSONField(default=list, help_text='e.g. ["vanilla", "rubric_injected"].')
    samples = models.PositiveSmallIntegerField(default=1, help_text="Replies per trigger.")
    judge_epochs = models.PositiveSmallIntegerField(
        default=1,
        help_text=(
            "Verdicts each judge gives on each reply. The first is the judgment; more are "
            "repeats (JudgmentRepeat) that measure each judge's self-consistency."
        ),
    )
    pairwise_judges = models.ManyToManyField(
        ModelEndpoint,
        blank=True,
        related_name="pairwise_judging_in",
        help_text=(
            "Every pairwise judge compares every PairwiseComparison of the run, in both orders "
            "(added by a pairwise judging step)."
        ),
    )
    judging_only = models.BooleanField(
        default=False,
        help_text=(
            "Set by a re-judge: units without a reply are left as they are, so judges and the "
            "classifier are asked but no reply is ever generated."
        ),
    )
    failure_mode_classifier = models.ForeignKey(
        ModelEndpoint,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text=(
            "Labels the failure mode of every RECOVERY reply the primary judge failed "
            "(empty: no classification)."
        ),
    )
    use_cache = models.BooleanField(
        default=True, help_text="Reuse earlier identical calls; off = fresh sampling."
    )
    lease_seconds = models.PositiveIntegerField(
        default=900,
        help_text=(
            "A unit claimed longer ago than this may be reclaimed (its worker died); the sweep "
            "dispatches it again."
        ),
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    notes = models.TextField(blank=True)
    pinned = models.BooleanField(
        default=False,
        help_text=(
            "The run the dashboard opens on, and that the statistics API and export_stats read "
            "when none is named (at most one run; none pinned: the newest finished run)."
        ),
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # One default run: pinning another unpins this one first (run_pin).
            models.UniqueConstraint(
                fields=["pinned"], condition=Q(pinned=True), name="run_one_pinned"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class UnitState(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    ERROR = "error", "Error"
    MISSING = "missing", "Missing (imported results had no row)"


class EvaluationUnit(models.Model):
    """One reply of one model, at one trigger, in one condition and sample — and its judging."""

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="units")
    trigger = models.ForeignKey(Trigger, on_delete=models.PROTECT, related_name="units")
    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.PROTECT, related_name="units")
    condition = models.CharField(max_length=16, choices=Condition.choices)
    sample_index = models.PositiveSmallIntegerField(default=0)
    state = models.CharField(max_length=8, choices=UnitState.choices, default=UnitState.PENDING)
    claim_token = models.CharField(max_length=32, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    dispatched_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text=(
            "When a failed batch handed this unit back or the sweep re-dispatched it (empty: "
            "queued by a launch or resume); a pending unit whose stamp is older than the "
            "run's lease is dispatched again."
        ),
    )
    reply = models.TextField(blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    reasoning_tokens = models.PositiveIntegerField(default=0)
    latency_s = models.FloatField(default=0)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Times a worker claimed it.")
    finished_at = models.DateTimeField(null=True, blank=True)
    extra = models.JSONField(default=dict, blank=True, help_text="Imported fields kept verbatim.")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "trigger", "endpoint", "condition", "sample_index"],
                name="unit_unique_key",
            ),
        ]
        indexes = [models.Index(fields=["run", "state"])]

    def __str__(self) -> str:
        return f"unit {self.pk} ({self.state})"


class JudgmentState(models.TextChoices):
    DONE = "done", "Done"
    JUDGE_ERROR = "judge_error", "Judge error"


class EvidenceStatus(models.TextChoices):
    EXACT = "exact", "Verbatim in the reply"
    CLOSE = "close", "Close (some fragments condensed)"
    NOT_FOUND = "not_found", "Not found in the reply"
    NONE = "none", "No evidence given"


class JudgeOutput(models.Model):
    """What one judge said about one unit's reply, once: the fields a judgment and its repeats
    share. Never a default score: a judge whose output cannot be parsed or verified after k
    tries is a ``judge_error`` with its raw output kept."""

    unit = models.ForeignKey(EvaluationUnit, on_delete=models.CASCADE, related_name="+")
    judge = models.ForeignKey(
        ModelEndpoint, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    judge_name = models.CharField(
        max_length=120, help_text="The judge as named (an endpoint's name, or as imported)."
    )
    state = models.CharField(max_length=12, choices=JudgmentState.choices)
    verdict = models.CharField(max_length=8, choices=Verdict.choices, blank=True)
    rationale = models.TextField(blank=True)
    evidence = models.TextField(blank=True)
    evidence_status = models.CharField(
        max_length=10, choices=EvidenceStatus.choices, default=EvidenceStatus.NONE
    )
    evidence_found_share = models.FloatField(
        null=True, blank=True, help_text="Share of evidence fragments found in the reply."
    )
    raw_output = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.judge_name}: {self.verdict or self.state}"


class Judgment(JudgeOutput):
    """One judge's verdict on one unit's reply: the one every statistic reads."""

    unit = models.ForeignKey(EvaluationUnit, on_delete=models.CASCADE, related_name="judgments")
    judge = models.ForeignKey(
        ModelEndpoint, null=True, blank=True, on_delete=models.PROTECT, related_name="judgments"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["unit", "judge_name"], name="judgment_unique_per_judge"
            ),
            models.CheckConstraint(
                condition=Q(state="judge_error", verdict="") | (Q(state="done") & ~Q(verdict="")),
                name="judgment_verdict_iff_done",
            ),
        ]


class JudgmentRepeat(JudgeOutput):
    """The same judge asked again about the same reply (epoch 1, 2, … of a run with
    ``judge_epochs`` > 1; epoch 0 is the ``Judgment``). Read only by the self-consistency
    statistics, so repeating a judge never changes a verdict anything else reports."""

    unit = models.ForeignKey(
        EvaluationUnit, on_delete=models.CASCADE, related_name="judgment_repeats"
    )
    epoch = models.PositiveSmallIntegerField(help_text="1, 2, …: the repeat's number.")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["unit", "judge_name", "epoch"], name="judgment_repeat_unique"
            ),
            models.CheckConstraint(condition=Q(epoch__gte=1), name="judgment_repeat_epoch_gte_1"),
            models.CheckConstraint(
                condition=Q(state="judge_error", verdict="") | (Q(state="done") & ~Q(verdict="")),
                name="judgment_repeat_verdict_iff_done",
            ),
        ]


class ClassificationState(models.TextChoices):
    DONE = "done", "Done"
    CLASSIFIER_ERROR = "classifier_error", "Classifier error"


class FailureModeClassification(models.Model):
    """An LLM's failure-mode label for a RECOVERY reply its run's primary judge failed, with a
    verbatim quote from the reply verified like judge evidence. A classifier whose output cannot
    be parsed, or whose quote is not in the reply, after k tries is a ``classifier_error`` with
    its raw output kept — never a default label."""

    unit = models.ForeignKey(
        EvaluationUnit, on_delete=models.CASCADE, related_name="failure_mode_classifications"
    )
    classifier = models.ForeignKey(
        ModelEndpoint, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    classifier_name = models.CharField(
        max_length=120, help_text="The classifier as named (an endpoint's name, or as recorded)."
    )
    state = models.CharField(max_length=16, choices=ClassificationState.choices)
    failure_mode = models.CharField(max_length=24, choices=FailureMode.choices, blank=True)
    quote = models.TextField(blank=True, help_text="Verbatim from the reply.")
    quote_status = models.CharField(
        max_length=10, choices=EvidenceStatus.choices, default=EvidenceStatus.NONE
    )
    quote_found_share = models.FloatField(null=True, blank=True)
    rationale = models.TextField(blank=True)
    raw_output = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["unit", "classifier_name"], name="classification_unique_per_classifier"
            ),
            models.CheckConstraint(
                condition=Q(state="classifier_error", failure_mode="")
                | (Q(state="done") & ~Q(failure_mode="")),
                name="classification_mode_iff_done",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.classifier_name}: {self.failure_mode or self.state}"


class JudgeDisagreement(models.Model):
    """A reply the judges scored differently: the adjudication queue's raw material."""

    unit = models.OneToOneField(
        EvaluationUnit, on_delete=models.CASCADE, related_name="disagreement"
    )
    verdicts = models.JSONField(help_text="judge name → verdict")
    created_at = models.DateTimeField(auto_now_add=True)
    # Written by the annotation app's adjudication study; statistics' "adjudicated" verdict
    # source takes final_verdict where it is set and the primary judge's verdict elsewhere.
    final_verdict = models.CharField(max_length=10, choices=Verdict.choices, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="adjudications",
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution_note = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"disagreement on unit {self.unit_id}"


class CallPurpose(models.TextChoices):
    REPLY = "reply", "Model reply"
    JUDGMENT = "judgment", "Judgment"
    CLASSIFICATION = "classify", "Failure-mode classification"
    PAIRWISE = "pairwise", "Pairwise judgment"
    CURATION = "curation", "Curation"
    CONNECTION_TEST = "test", "Connection test"


class ProviderCall(models.Model):
    """Every call that reached a provider (cache hits are not calls): tokens, latency, cost."""

    run = models.ForeignKey(
        EvaluationRun, null=True, blank=True, on_delete=models.CASCADE, related_name="calls"
    )
    unit = models.ForeignKey(
        EvaluationUnit, null=True, blank=True, on_delete=models.SET_NULL, related_name="calls"
    )
    curation_job = models.ForeignKey(
        "benchmark.CurationJob",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="calls",
        help_text="The curation job whose dialogue made the call (curation calls only).",
    )
    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.PROTECT, related_name="calls")
    purpose = models.CharField(max_length=10, choices=CallPurpose.choices)
    cache_key = models.CharField(max_length=64, db_index=True)
    ok = models.BooleanField(default=True)
    error = models.TextField(blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    reasoning_tokens = models.PositiveIntegerField(default=0)
    latency_s = models.FloatField(default=0)
    attempts = models.PositiveSmallIntegerField(default=1)
    request_id = models.CharField(max_length=200, blank=True)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["run", "ok"])]

    def __str__(self) -> str:
        return f"{self.purpose} call to {self.endpoint_id}"


class ResponseCacheEntry(models.Model):
    """A completed call, by a hash of (endpoint, model, parameters, messages, sample index)."""

    key = models.CharField(max_length=64, unique=True)
    endpoint_name = models.CharField(max_length=80)
    text = models.TextField()
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    reasoning_tokens = models.PositiveIntegerField(default=0)
    latency_s = models.FloatField(default=0)
    request_id = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "response cache entries"

    def __str__(self) -> str:
        return self.key


class ResultRecordMeta(models.Model):
    """Per (run, model, dialogue) keys of an imported results line that no other row holds
    (token usage, source paths, unknown keys), kept so that an export gives them back."""

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="record_meta")
    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.PROTECT, related_name="+")
    dialogue = models.ForeignKey("benchmark.Dialogue", on_delete=models.PROTECT, related_name="+")
    meta = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "endpoint", "dialogue"], name="result_meta_unique"
            )
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} · {self.endpoint_id} · dialogue {self.dialogue_id}"


class CallInFlight(models.Model):
    """A provider call being made right now, by key. Two units that need the identical call at
    the same moment would otherwise both pay for it (the cache only helps once one finished):
    the second waits for the first's cached result instead. Expires with the unit's lease, so a
    killed worker's claim does not block anyone for longer than its units do."""

    key = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "calls in flight"

    def __str__(self) -> str:
        return self.key


class AuditAction(models.TextChoices):
    LAUNCH = "launch", "Launch"
    RESUME = "resume", "Resume"
    CANCEL = "cancel", "Cancel"
    RETRY_ERRORS = "retry_errors", "Retry errors"
    REJUDGE = "rejudge", "Re-judge"
    CLASSIFY = "classify", "Classify failure modes"
    GIVE_UP = "give_up", "Give up"
    PAIRWISE = "pairwise", "Pairwise judging"


class AuditVia(models.TextChoices):
    ADMIN = "admin", "Admin"
    COMMAND = "command", "Management command"
    SWEEP = "sweep", "Sweep (Celery beat)"


class RunAuditEvent(models.Model):
    """An action that spends money on model calls — launching, resuming or retrying a run or a
    curation job — with who took it, how and when. Written by the admin actions and the
    commands, and by the curation sweep when it dispatches again (or gives up) a curation job's
    dialogues whose worker died; read-only in the admin, and kept (with the run's name) if the
    run is deleted."""

    run = models.ForeignKey(
        EvaluationRun,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_events",
        help_text="The run acted on (empty once the run is deleted).",
    )
    curation_job = models.ForeignKey(
        "benchmark.CurationJob",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_events",
        help_text="The curation job acted on, when the event is about one (not a run).",
    )
    run_name = models.CharField(
        max_length=200, help_text="The run's (or curation job's) name at the time."
    )
    action = models.CharField(max_length=16, choices=AuditAction.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The admin who acted (empty for a command, or once the user is deleted).",
    )
    actor_name = models.CharField(
        max_length=200, help_text="The username, or the system user who ran the command."
    )
    via = models.CharField(max_length=10, choices=AuditVia.choices)
    note = models.CharField(max_length=500, blank=True, help_text="e.g. how many units.")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # An event is about a run or a curation job, never both. "Exactly one" cannot hold:
            # both links are emptied when their object is deleted, and the event is kept.
            models.CheckConstraint(
                condition=Q(run__isnull=True) | Q(curation_job__isnull=True),
                name="audit_event_one_subject",
            )
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_name} {self.action} {self.run_name}"
