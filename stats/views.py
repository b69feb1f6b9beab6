"""Researcher pages: the statistics dashboard, the per-trigger sample viewer and the external
benchmark scores upload."""

from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from benchmark.models import EvaluationRun, EvaluationUnit, Trigger
from core.http import HtmxHttpRequest
from core.roles import staff_like_required
from stats import dashboard as dashboard_panels
from stats import selectors, tables, viewer
from stats.forms import BenchmarkScoresUploadForm, DashboardFilterForm
from stats.models import ExternalBenchmarkScore
from stats.services import ScoresImportError, benchmark_scores_import


@staff_like_required
def dashboard(request: HtmxHttpRequest) -> HttpResponse:
    form = DashboardFilterForm(request.GET or None)
    table_request = form.to_request()
    study = form.selected_study
    panels = dashboard_panels.dashboard_panels(
        table_request,
        study_kind=study.kind if study else None,
        pairwise_judge=form.chosen_pairwise_judge,
    ).values()
    context = {
        "form": form,
        "run": table_request.run,
        "study": study,
        "seed": table_request.seed,
        "run_panels": [p for p in panels if p.needs == tables.RUN],
        "study_panels": [p for p in panels if p.needs == tables.STUDY],
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


def _viewer_filters(
    request: HttpRequest, run: EvaluationRun
) -> tuple[viewer.TriggerFilterForm, HttpResponse | None]:
    """The viewer's filter form; with a 400 response naming the fields when one is refused."""
    form = viewer.TriggerFilterForm(request.GET, run=run)
    if not form.is_valid():
        return form, HttpResponseBadRequest(
            f"Bad filter: {form.error_message()}", content_type="text/plain; charset=utf-8"
        )
    return form, None


@staff_like_required
@require_GET
def run_triggers(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(EvaluationRun, pk=run_id)
    form, refused = _viewer_filters(request, run)
    if refused is not None:
        return refused
    query = form.query()
    try:
        rows = viewer.trigger_rows(run, query)
    except selectors.StatsInputError as exc:
        return HttpResponseBadRequest(f"Bad filter: {exc}", content_type="text/plain")
    return render(
        request,
        "stats/triggers.html",
        {"run": run, "form": form, "rows": rows, "query": urlencode(query)},
    )


@staff_like_required
@require_GET
def trigger_detail(request: HttpRequest, run_id: int, trigger_id: int) -> HttpResponse:
    run = get_object_or_404(EvaluationRun, pk=run_id)
    # A trigger the run has no reply at is not one of its pages.
    trigger = get_object_or_404(
        Trigger.objects.select_related("turn__dialogue").filter(
            id__in=EvaluationUnit.objects.filter(run=run).values("trigger_id")
        ),
        pk=trigger_id,
    )
    form, refused = _viewer_filters(request, run)
    if refused is not None:
        return refused
    query = form.query()
    try:
        ids = viewer.trigger_ids(run, query)
    except selectors.StatsInputError as exc:
        return HttpResponseBadRequest(f"Bad filter: {exc}", content_type="text/plain")
    position = ids.index(trigger.pk) if trigger.pk in ids else None
    suffix = f"?{urlencode(query)}" if query else ""

    def link(index: int) -> str:
        return reverse("stats:trigger_detail", args=[run.pk, ids[index]]) + suffix

    context = {
        "run": run,
        "form": form,
        "sample": viewer.trigger_sample(run, trigger, query),
        "position": None if position is None else position + 1,
        "total": len(ids),
        "previous_url": link(position - 1) if position else "",
        "next_url": link(position + 1) if position is not None and position + 1 < len(ids) else "",
        "list_url": reverse("stats:run_triggers", args=[run.pk]) + suffix,
    }
    return render(request, "stats/trigger_detail.html", context)
