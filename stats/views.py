"""Researcher pages: the statistics dashboard and the external benchmark scores upload."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from core.http import HtmxHttpRequest
from core.roles import staff_like_required
from stats import dashboard as dashboard_panels
from stats import tables
from stats.forms import BenchmarkScoresUploadForm, DashboardFilterForm
from stats.models import ExternalBenchmarkScore
from stats.services import ScoresImportError, benchmark_scores_import


@staff_like_required
def dashboard(request: HtmxHttpRequest) -> HttpResponse:
    form = DashboardFilterForm(request.GET or None)
    table_request = form.to_request()
    study = form.selected_study
    panels = dashboard_panels.dashboard_panels(
        table_request, study_kind=study.kind if study else None
    ).values()
    context = {
        "form": form,
        "run": table_request.run,
        "study": study,
        "seed": table_request.seed,
        "run_panels": [p for p in panels if p.spec.needs == tables.RUN],
        "study_panels": [p for p in panels if p.spec.needs == tables.STUDY],
        "raw_exports": dashboard_panels.raw_export_links(table_request),
    }
    template = "stats/dashboard.html"
    if request.htmx:
        template += "#content"
    return render(request, template, context)


@staff_like_required
@require_http_methods(["GET", "POST"])
def benchmark_scores(request: HttpRequest) -> HttpResponse:
    form = BenchmarkScoresUploadForm(request.POST or None, request.FILES or None)
    errors: list[str] = []
    if request.method == "POST" and form.is_valid():
        try:
            summary = benchmark_scores_import(
                stream=form.cleaned_data["file"], uploaded_by=request.user
            )
        except ScoresImportError as exc:
            errors = [str(e) for e in exc.errors]
        else:
            messages.success(
                request,
                f"Uploaded {summary.created + summary.updated} score(s) "
                f"({summary.created} new, {summary.updated} replaced) for "
                f"{len(summary.models)} model(s) on {', '.join(summary.benchmarks)}.",
            )
            return redirect("stats:benchmark_scores")
    scores = ExternalBenchmarkScore.objects.select_related("endpoint").order_by(
        "benchmark", "endpoint__display_name"
    )
    return render(
        request,
        "stats/benchmark_scores.html",
        {"form": form, "errors": errors, "scores": scores},
        status=400 if errors or (form.is_bound and form.errors) else 200,
    )
