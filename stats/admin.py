from django.contrib import admin

from stats.models import ExternalBenchmarkScore


@admin.register(ExternalBenchmarkScore)
class ExternalBenchmarkScoreAdmin(admin.ModelAdmin):
    list_display = ("endpoint", "benchmark", "score", "uploaded_by", "uploaded_at")
    list_filter = ("benchmark",)
    search_fields = ("endpoint__name", "endpoint__display_name", "benchmark")
    list_select_related = ("endpoint", "uploaded_by")
