"""LLM pairwise judging: two replies at the same trigger compared by a judge against the
trigger's rubric, once in each order (docs/pipeline.md, "Pairwise judging").

A ``PairwiseComparison`` is an unordered pair of a run's units at one trigger, stored with a
side A and a side B; each ``PairwiseJudgment`` is one judge's verdict in one order, its winner
already mapped back from the screen position to side A or B (``BattleWinner``). A verdict that
survives the swap counts; one that does not is inconsistent and is reported, never dropped
(``stats/tables/pairwise_judge_consistency.py``).
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Greatest, Least

from benchmark.models.corpus import ModelEndpoint, Trigger
from benchmark.models.runs import EvaluationRun, EvaluationUnit, JudgmentState
from benchmark.vocabulary import BattleWinner


class PairOrder(models.TextChoices):
    """Which side the judge was shown first ("Response 1")."""

    AB = "ab", "A shown first"
    BA = "ba", "B shown first"


class PairwiseComparison(models.Model):
    """Two replies of one run at the same trigger (both with a reply), to be compared by every
    pairwise judge of the run in both orders. The unit of work is side A's unit: the engine
    claims it and asks what its comparisons still lack."""

    run = models.ForeignKey(
        EvaluationRun, on_delete=models.CASCADE, related_name="pairwise_comparisons"
    )
    trigger = models.ForeignKey(Trigger, on_delete=models.PROTECT, related_name="+")
    unit_a = models.ForeignKey(
        EvaluationUnit,
        on_delete=models.CASCADE,
        related_name="comparisons_as_a",
        help_text="Side A: the reply the engine claims to judge this pair.",
    )
    unit_b = models.ForeignKey(
        EvaluationUnit, on_delete=models.CASCADE, related_name="comparisons_as_b"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # Unordered: (x, y) and (y, x) are one comparison, whichever side each was given.
            models.UniqueConstraint(
                "run",
                Least("unit_a", "unit_b"),
                Greatest("unit_a", "unit_b"),
                name="comparison_unique_unordered_pair",
            ),
            models.CheckConstraint(
                condition=~Q(unit_a=F("unit_b")), name="comparison_two_distinct_units"
            ),
        ]
        indexes = [models.Index(fields=["run", "trigger"])]

    def __str__(self) -> str:
        return f"units {self.unit_a_id} vs {self.unit_b_id}"


class PairwiseJudgment(models.Model):
    """One pairwise judge's verdict on one comparison in one order. ``winner`` is side A or B
    (or a tie), never a screen position. A judge whose output cannot be used after k tries is a
    ``judge_error`` with its raw output kept — never a default verdict."""

    comparison = models.ForeignKey(
        PairwiseComparison, on_delete=models.CASCADE, related_name="judgments"
    )
    judge = models.ForeignKey(
        ModelEndpoint, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    judge_name = models.CharField(
        max_length=120, help_text="The judge as named (an endpoint's name, or as recorded)."
    )
    order = models.CharField(max_length=2, choices=PairOrder.choices)
    state = models.CharField(max_length=12, choices=JudgmentState.choices)
    winner = models.CharField(
        max_length=16,
        choices=BattleWinner.choices,
        blank=True,
        help_text="Side A or B (mapped back from the screen position), or a tie; empty for an "
        "error.",
    )
    rationale = models.TextField(blank=True)
    raw_output = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["comparison", "judge_name", "order"], name="pairwise_judgment_unique"
            ),
            models.CheckConstraint(
                condition=Q(state="judge_error", winner="") | (Q(state="done") & ~Q(winner="")),
                name="pairwise_judgment_winner_iff_done",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.judge_name} ({self.order}): {self.winner or self.state}"
