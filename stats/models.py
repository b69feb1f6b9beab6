"""The one thing statistics store: scores of the models on other benchmarks, uploaded by
researchers (``services.benchmark_scores_import``), to correlate with trigger-type scores."""

from django.conf import settings
from django.db import models

from benchmark.models import ModelEndpoint


class ExternalBenchmarkScore(models.Model):
    endpoint = models.ForeignKey(
        ModelEndpoint,
        on_delete=models.CASCADE,
        related_name="external_scores",
        help_text="The model that was scored.",
    )
    benchmark = models.CharField(
        max_length=80, help_text="Benchmark name as uploaded, e.g. GPQA, MMLU, IFEval."
    )
    score = models.FloatField(help_text="The model's score, in the benchmark's own unit.")
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    uploaded_at = models.DateTimeField(help_text="When this score was last uploaded.")

    class Meta:
        ordering = ["benchmark", "endpoint__display_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["endpoint", "benchmark"], name="external_score_unique_per_benchmark"
            )
        ]

    def __str__(self) -> str:
        return f"{self.endpoint} · {self.benchmark}: {self.score:g}"
