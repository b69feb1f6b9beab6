"""Curation jobs: a set of (scenario, style) dialogues to curate with three endpoints, launched,
watched, cancelled and resumed like evaluation runs (states from ``RunStatus``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from benchmark.models.corpus import CommunicationStyle, Dialogue, ModelEndpoint, Scenario
from benchmark.models.runs import RunStatus


class TargetState(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class CurationJob(models.Model):
    name = models.CharField(max_length=200)
    status = models.CharField(max_length=12, choices=RunStatus.choices, default=RunStatus.QUEUED)
    planner = models.ForeignKey(ModelEndpoint, on_delete=models.PROTECT, related_name="+")
    user_agent = models.ForeignKey(ModelEndpoint, on_delete=models.PROTECT, related_name="+")
    assistant = models.ForeignKey(ModelEndpoint, on_delete=models.PROTECT, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name


class CurationTarget(models.Model):
    """One dialogue to curate. ``turn`` is the turn the loop has reached (0 before the first);
    ``dialogue`` is set only once the whole dialogue is saved.

    A running target is held under a lease, as evaluation units are: the task that claimed it
    stamps ``claim_token`` and refreshes ``heartbeat_at`` at every turn and before every call
    that reaches a provider; a heartbeat older than ``settings.CURATION_LEASE_S`` means its
    worker died, and the target may be taken over (``benchmark/curation/jobs.py``)."""

    job = models.ForeignKey(CurationJob, on_delete=models.CASCADE, related_name="targets")
    scenario = models.ForeignKey(Scenario, on_delete=models.PROTECT, related_name="+")
    style = models.ForeignKey(CommunicationStyle, on_delete=models.PROTECT, related_name="+")
    state = models.CharField(
        max_length=10, choices=TargetState.choices, default=TargetState.PENDING
    )
    turn = models.PositiveSmallIntegerField(default=0)
    max_turns = models.PositiveSmallIntegerField(default=10)
    dialogue = models.ForeignKey(
        Dialogue, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    error = models.TextField(blank=True)
    claim_token = models.CharField(
        max_length=40,
        blank=True,
        help_text="The claim of the task running it; every write of that task is conditioned "
        "on it (a sweep's dispatch stamps its own).",
    )
    claims = models.PositiveSmallIntegerField(
        default=0,
        help_text="How many times a task has claimed it (a resume starts again from 0); the "
        "sweep gives it up after jobs.TARGET_MAX_CLAIMS.",
    )
    heartbeat_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Its last sign of life: the claim, each turn, each call made, the outcome.",
    )
    dispatched_at = models.DateTimeField(
        null=True, blank=True, help_text="When a task for it was last sent to the queue."
    )
    sample = models.PositiveSmallIntegerField(
        default=0,
        help_text="The cache key's sample index for its calls: raised when a curation fails "
        "its checks, so that the next try draws fresh answers instead of replaying the failure.",
    )
    # auto_now: QuerySet.update() does not touch it, so the lease never reads it.
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["job", "scenario", "style"], name="curation_target_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.scenario} × style {self.style_id}"
