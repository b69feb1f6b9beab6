"""Admin for model runs: launch, watch (live progress), cancel, resume, retry errors; endpoint
connection tests; prices; and read-only views of units, judgments, calls and the cache."""

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.html import format_html

from benchmark.evaluation import pairwise as pairwise_service
from benchmark.evaluation import runs as run_service
from benchmark.models import (
    AuditAction,
    AuditVia,
    Condition,
    EvaluationRun,
    EvaluationUnit,
    JudgeDisagreement,
    Judgment,
    ModelEndpoint,
    ModelPrice,
    PairwiseComparison,
    PairwiseJudgment,
    ProviderCall,
    ResponseCacheEntry,
    RunAuditEvent,
    RunStatus,
)
from benchmark.tasks import launch_run, resume_run

# What a run is: frozen once it has started, so that its results always match it.
RUN_DEFINITION = (
    "name",
    "dialogues",
    "endpoints",
    "judges",
    "primary_judge",
    "conditions",
    "samples",
    "use_cache",
)


def _enqueue_after_commit(task, run_id: int) -> None:
    transaction.on_commit(lambda: task.delay(run_id))


def _audit(request: HttpRequest, run: EvaluationRun, action: AuditAction, note: str = "") -> None:
    run_service.run_audit_record(
        run=run, action=action, via=AuditVia.ADMIN, actor=request.user, note=note
    )


class EvaluationRunForm(forms.ModelForm):
    conditions = forms.MultipleChoiceField(
        choices=Condition.choices,
        initial=[Condition.VANILLA],
        widget=forms.CheckboxSelectMultiple,
    )

    class Meta:
        model = EvaluationRun
        fields = [*RUN_DEFINITION, "lease_seconds", "notes"]

    def clean(self):
        super().clean()
        data = self.cleaned_data
        judges, primary = data.get("judges"), data.get("primary_judge")
        if primary and judges is not None and primary not in judges:
            self.add_error("primary_judge", "The primary judge must be one of the judges.")
        # No dialogues chosen = the default, frozen on the run when it is saved (as run_create
        # does), so that the page shows what will be evaluated.
        if "dialogues" in data and not data["dialogues"]:
            data["dialogues"] = run_service.dialogues_default()
            if not data["dialogues"].exists():
                self.add_error("dialogues", f"{run_service.NO_ACCEPTED_DIALOGUES} here.")
        return data


class RejudgeForm(forms.Form):
    """What a re-judge adds to a finished run (``run_service.run_rejudge``)."""

    judges = forms.ModelMultipleChoiceField(
        queryset=ModelEndpoint.objects.order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Each judge scores every reply; a judge the run already has is asked only "
        "where it has not answered.",
    )
    epochs = forms.IntegerField(
        min_value=1,
        max_value=20,
        required=False,
        help_text="Verdicts per judge per reply (empty: unchanged). More than 1 measures each "
        "judge's self-consistency.",
    )
    classifier = forms.ModelChoiceField(
        queryset=ModelEndpoint.objects.order_by("name"),
        required=False,
        help_text="Labels the failure mode of every RECOVERY reply the primary judge failed.",
    )

    def clean(self):
        data = super().clean() or {}
        if not (data.get("judges") or data.get("epochs") or data.get("classifier")):
            raise forms.ValidationError("Choose a judge, a number of epochs or a classifier.")
        return data


class PairwiseJudgeForm(forms.Form):
    """What a pairwise judging step adds to a finished run (``pairwise_service``)."""

    judges = forms.ModelMultipleChoiceField(
        queryset=ModelEndpoint.objects.order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Each pairwise judge compares every pair of the run twice, once in each order; "
        "a judge the run already has is asked only where it has not answered.",
    )
    pairs = forms.ChoiceField(
        choices=list(pairwise_service.PAIR_SCHEMES.items()),
        initial="models",
        widget=forms.RadioSelect,
        help_text="Which replies are paired (a study's pairs: manage.py judge_pairs RUN "
        "--pairs study=ID).",
    )
    max_pairs = forms.IntegerField(
        min_value=1,
        max_value=pairwise_service.MAX_PAIRS_LIMIT,
        required=False,
        help_text="At most this many pairs, a seeded sample balanced over pairs of sources "
        "(empty: all).",
    )
    seed = forms.IntegerField(initial=0, min_value=0, required=False)

    def clean(self):
        data = super().clean() or {}
        if data.get("seed") is None:
            data["seed"] = 0
        return data


@admin.register(EvaluationRun)
class EvaluationRunAdmin(admin.ModelAdmin):
    form = EvaluationRunForm
    list_display = (
        "name",
        "source",
        "status",
        "progress_bar",
        "pinned",
        "created_at",
        "created_by",
    )
    list_filter = ("status", "source")
    search_fields = ("name", "notes")
    filter_horizontal = ("dialogues", "endpoints", "judges")
    actions = ["launch_runs", "cancel_runs", "resume_runs", "retry_errors", "pin_run", "unpin_runs"]
    change_form_template = "admin/benchmark/evaluationrun/change_form.html"

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and obj.status != RunStatus.QUEUED:
            return (*RUN_DEFINITION, "source", "status", "pinned")
        return ("source", "status", "pinned")

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

    def get_queryset(self, request):
        return run_service.with_unit_counts(super().get_queryset(request))

    @admin.display(description="progress")
    def progress_bar(self, obj: EvaluationRun) -> str:
        total, finished = obj.units_total, obj.units_finished  # type: ignore[attr-defined]
        return format_html(
            '<progress max="{}" value="{}"></progress> {} / {}',
            total or 1,
            finished,
            finished,
            total,
        )

    # --- actions (all enqueue after commit: the request never waits for the work) ----------

    @admin.action(description="Launch selected runs")
    def launch_runs(self, request, queryset):
        launched = 0
        for run in queryset:
            try:
                run_service.run_check_launchable(run=run)
            except run_service.RunActionError as exc:
                messages.error(request, f"{run}: not launched: {exc}.")
                continue
            _audit(request, run, AuditAction.LAUNCH)
            _enqueue_after_commit(launch_run, run.pk)
            launched += 1
        if launched:
            messages.info(request, f"Launching {launched} run(s); progress updates live.")

    @admin.action(description="Cancel selected runs")
    def cancel_runs(self, request, queryset):
        for run in queryset:
            try:
                run_service.run_cancel(run_id=run.pk)
            except run_service.RunActionError as exc:
                messages.warning(request, f"{run}: {exc}")
            else:
                _audit(request, run, AuditAction.CANCEL)
                messages.info(request, f"{run}: cancelling — no new calls are made.")

    @admin.action(description="Resume selected runs")
    def resume_runs(self, request, queryset):
        resumed = 0
        for run in queryset:
            if run.status == RunStatus.QUEUED:  # resuming it launches it
                try:
                    run_service.run_check_launchable(run=run)
                except run_service.RunActionError as exc:
                    messages.error(request, f"{run}: not resumed: {exc}.")
                    continue
            _audit(request, run, AuditAction.RESUME)
            _enqueue_after_commit(resume_run, run.pk)
            resumed += 1
        if resumed:
            messages.info(request, f"Resuming {resumed} run(s).")

    @admin.action(description="Retry errored units")
    def retry_errors(self, request, queryset):
        total = 0
        for run in queryset:
            retried = run_service.run_retry_errors(run_id=run.pk)
            _audit(request, run, AuditAction.RETRY_ERRORS, note=f"{retried} errored unit(s)")
            total += retried
        messages.info(request, f"{total} errored unit(s) re-enqueued.")

    @admin.action(description="Pin to the dashboard (one run)")
    def pin_run(self, request, queryset):
        runs = list(queryset[:2])
        if len(runs) != 1:
            messages.error(request, "Select one run: the dashboard opens on one.")
            return
        run_service.run_pin(run_id=runs[0].pk)
        messages.info(request, f"{runs[0]}: pinned; the dashboard opens on it.")

    @admin.action(description="Unpin (the dashboard opens on the newest finished run)")
    def unpin_runs(self, request, queryset):
        if queryset.filter(pinned=True).exists():
            run_service.run_pin(run_id=None)
        messages.info(request, "No run pinned: the dashboard opens on the newest finished run.")

    # --- live progress ---------------------------------------------------------------------

    def get_urls(self):
        return [
            path(
                "<int:run_id>/progress/",
                self.admin_site.admin_view(self.progress_view),
                name="benchmark_evaluationrun_progress",
            ),
            path(
                "<int:run_id>/rejudge/",
                self.admin_site.admin_view(self.rejudge_view),
                name="benchmark_evaluationrun_rejudge",
            ),
            path(
                "<int:run_id>/pairwise/",
                self.admin_site.admin_view(self.pairwise_view),
                name="benchmark_evaluationrun_pairwise",
            ),
            path(
                "<int:run_id>/do/<str:action>/",
                self.admin_site.admin_view(self.action_view),
                name="benchmark_evaluationrun_action",
            ),
            *super().get_urls(),
        ]

    @staticmethod
    def _live_context(run: EvaluationRun) -> dict:
        """What the progress fragment and the run's buttons are drawn from."""
        progress = run_service.run_progress(run=run)
        return {
            "run": run,
            "progress": progress,
            "activity": run_service.run_endpoint_activity(run=run, counts=progress.call_counts),
            "actions": run_service.run_actions(run=run, progress=progress),
        }

    def change_view(self, request, object_id, form_url="", extra_context=None):
        # The admin's own lookup: None for an id that is no run's ("²" included).
        run = self.get_object(request, object_id)
        if run is not None:
            extra_context = {**(extra_context or {}), **self._live_context(run)}
        return super().change_view(request, object_id, form_url, extra_context)

    def progress_view(self, request: HttpRequest, run_id: int) -> HttpResponse:
        """The progress fragment the run's page polls, with the run's buttons swapped in out
        of band (they live in the page's object tools, outside the polled element)."""
        run = get_object_or_404(EvaluationRun, pk=run_id)
        return TemplateResponse(
            request, "admin/benchmark/evaluationrun/progress.html", self._live_context(run)
        )

    def rejudge_view(self, request: HttpRequest, run_id: int) -> HttpResponse:
        """Add judges, epochs or a failure-mode classifier to a finished run; its page then
        shows the progress as for any run."""
        run = get_object_or_404(EvaluationRun, pk=run_id)
        if not self.has_change_permission(request, run):
            return redirect("admin:benchmark_evaluationrun_change", run_id)
        form = RejudgeForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                outcome = run_service.run_rejudge(
                    run_id=run.pk,
                    judges=list(data["judges"]),
                    epochs=data["epochs"],
                    classifier=data["classifier"],
                    via=AuditVia.ADMIN,
                    actor=request.user,
                )
            except run_service.RunActionError as exc:
                form.add_error(None, f"Not re-judged: {exc}.")
            else:
                messages.info(
                    request,
                    f"{run}: {outcome.units} replies re-enqueued for judging; progress updates "
                    "live.",
                )
                return redirect("admin:benchmark_evaluationrun_change", run_id)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Add judges or classify: {run}",
            "run": run,
            "form": form,
            "opts": self.model._meta,
            "judges": list(run.judges.order_by("name").values_list("name", flat=True)),
        }
        return TemplateResponse(request, "admin/benchmark/evaluationrun/rejudge.html", context)

    def pairwise_view(self, request: HttpRequest, run_id: int) -> HttpResponse:
        """Add pairwise judges and pairs to a finished run; its page then shows the pairwise
        verdicts per judge with the progress."""
        run = get_object_or_404(EvaluationRun, pk=run_id)
        if not self.has_change_permission(request, run):
            return redirect("admin:benchmark_evaluationrun_change", run_id)
        form = PairwiseJudgeForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                outcome = pairwise_service.run_pairwise_judge(
                    run_id=run.pk,
                    judges=list(data["judges"]),
                    pairs=data["pairs"],
                    max_pairs=data["max_pairs"],
                    seed=data["seed"],
                    via=AuditVia.ADMIN,
                    actor=request.user,
                )
            except run_service.RunActionError as exc:
                form.add_error(None, f"Not judged: {exc}.")
            else:
                messages.info(
                    request,
                    f"{run}: {outcome.chosen} pairs ({outcome.created} new); {outcome.units} "
                    "replies enqueued for pairwise judging; progress updates live.",
                )
                return redirect("admin:benchmark_evaluationrun_change", run_id)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Judge pairs: {run}",
            "run": run,
            "form": form,
            "opts": self.model._meta,
            "judges": list(run.pairwise_judges.order_by("name").values_list("name", flat=True)),
            "comparisons": run.pairwise_comparisons.count(),
        }
        return TemplateResponse(request, "admin/benchmark/evaluationrun/pairwise.html", context)

    def action_view(self, request: HttpRequest, run_id: int, action: str) -> HttpResponse:
        """The Launch / Cancel / Resume / Retry errors buttons on a run's page (POST only)."""
        if request.method != "POST" or not self.has_change_permission(request):
            return redirect("admin:benchmark_evaluationrun_change", run_id)
        queryset = EvaluationRun.objects.filter(pk=run_id)
        handlers = {
            "launch": self.launch_runs,
            "cancel": self.cancel_runs,
            "resume": self.resume_runs,
            "retry": self.retry_errors,
        }
        if action in handlers:
            handlers[action](request, queryset)
        return redirect("admin:benchmark_evaluationrun_change", run_id)


@admin.register(EvaluationUnit)
class EvaluationUnitAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "endpoint", "condition", "trigger", "state", "attempts")
    list_filter = ("state", "condition", "run", "endpoint")
    search_fields = ("trigger__turn__dialogue__unique_id_eval", "reply", "error")
    list_select_related = ("run", "endpoint", "trigger__turn__dialogue")
    raw_id_fields = ("run", "trigger", "endpoint")

    def has_add_permission(self, request):
        return False


@admin.register(Judgment)
class JudgmentAdmin(admin.ModelAdmin):
    list_display = ("id", "unit", "judge_name", "state", "verdict", "evidence_status")
    list_filter = ("state", "verdict", "evidence_status", "judge_name")
    search_fields = ("rationale", "evidence", "raw_output")
    raw_id_fields = ("unit", "judge")

    def has_add_permission(self, request):
        return False


@admin.register(PairwiseComparison)
class PairwiseComparisonAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "trigger", "unit_a", "unit_b", "created_at")
    list_filter = ("run",)
    raw_id_fields = ("run", "trigger", "unit_a", "unit_b")

    def has_add_permission(self, request):
        return False


@admin.register(PairwiseJudgment)
class PairwiseJudgmentAdmin(admin.ModelAdmin):
    list_display = ("id", "comparison", "judge_name", "order", "state", "winner", "attempts")
    list_filter = ("state", "winner", "order", "judge_name")
    search_fields = ("rationale", "raw_output")
    raw_id_fields = ("comparison", "judge")

    def has_add_permission(self, request):
        return False


@admin.register(JudgeDisagreement)
class JudgeDisagreementAdmin(admin.ModelAdmin):
    list_display = ("unit", "verdicts", "created_at")
    raw_id_fields = ("unit",)
    search_fields = ("unit__trigger__turn__dialogue__unique_id_eval",)


@admin.register(ProviderCall)
class ProviderCallAdmin(admin.ModelAdmin):
    list_display = (
        "created_at",
        "endpoint",
        "purpose",
        "ok",
        "input_tokens",
        "output_tokens",
        "latency_s",
        "attempts",
        "cost_usd",
    )
    list_filter = ("purpose", "ok", "endpoint")
    search_fields = ("request_id", "cache_key", "error")
    raw_id_fields = ("run", "unit", "curation_job", "endpoint")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ResponseCacheEntry)
class ResponseCacheEntryAdmin(admin.ModelAdmin):
    list_display = ("key", "endpoint_name", "input_tokens", "output_tokens", "created_at")
    search_fields = ("key", "endpoint_name", "request_id")
    list_filter = ("endpoint_name",)

    def has_add_permission(self, request):
        return False


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    list_display = ("model_name", "input_usd_per_mtok", "output_usd_per_mtok")
    search_fields = ("model_name",)


@admin.register(RunAuditEvent)
class RunAuditEventAdmin(admin.ModelAdmin):
    """Read-only for everyone, superusers included: an audit log nobody can edit from here."""

    list_display = ("created_at", "action", "run_name", "actor_name", "via", "note")
    list_filter = ("action", "via")
    search_fields = ("run_name", "actor_name", "note")
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
