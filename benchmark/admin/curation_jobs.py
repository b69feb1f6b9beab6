"""Admin for curation jobs: launch (endpoints × scenarios × styles), watch per dialogue and turn
(live progress), cancel and resume — the run admin's patterns, and its audit log."""

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path

from benchmark.curation import jobs
from benchmark.evaluation.runs import RunActionError
from benchmark.models import (
    AuditVia,
    CommunicationStyle,
    CurationJob,
    CurationTarget,
    ModelEndpoint,
    RunStatus,
    Scenario,
)


class CurationJobLaunchForm(forms.Form):
    name = forms.CharField(max_length=200)
    planner = forms.ModelChoiceField(ModelEndpoint.objects.filter(is_active=True))
    user_agent = forms.ModelChoiceField(ModelEndpoint.objects.filter(is_active=True))
    assistant = forms.ModelChoiceField(ModelEndpoint.objects.filter(is_active=True))
    scenarios = forms.ModelMultipleChoiceField(
        Scenario.objects.select_related("persona").order_by("key", "persona__external_id")
    )
    styles = forms.ModelMultipleChoiceField(
        CommunicationStyle.objects.order_by("index"),
        help_text="One dialogue per chosen scenario × style.",
    )


class CurationTargetInline(admin.TabularInline):
    model = CurationTarget
    fields = (
        "scenario", "style", "state", "turn", "max_turns", "claims", "heartbeat_at", "dialogue",
        "error",
    )  # fmt: skip
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(CurationJob)
class CurationJobAdmin(admin.ModelAdmin):
    list_display = ("name", "status", "created_at", "created_by", "finished_at")
    list_filter = ("status",)
    search_fields = ("name",)
    inlines = [CurationTargetInline]
    change_form_template = "admin/benchmark/curationjob/change_form.html"
    readonly_fields = (
        "name", "status", "planner", "user_agent", "assistant", "created_by", "created_at",
        "started_at", "finished_at",
    )  # fmt: skip

    def get_urls(self):
        return [
            path(
                "<int:job_id>/progress/",
                self.admin_site.admin_view(self.progress_view),
                name="benchmark_curationjob_progress",
            ),
            path(
                "<int:job_id>/do/<str:action>/",
                self.admin_site.admin_view(self.action_view),
                name="benchmark_curationjob_action",
            ),
            *super().get_urls(),
        ]

    def add_view(self, request, form_url="", extra_context=None):
        """The launch form: a job is made and enqueued in one step (there is no draft job)."""
        if not self.has_add_permission(request):
            return redirect("admin:index")
        form = CurationJobLaunchForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            job = jobs.curation_job_launch(
                name=data["name"],
                planner=data["planner"],
                user_agent=data["user_agent"],
                assistant=data["assistant"],
                targets=[(sc, st) for sc in data["scenarios"] for st in data["styles"]],
                via=AuditVia.ADMIN,
                actor=request.user,
            )
            messages.info(request, f"{job}: launched; progress updates live.")
            return redirect("admin:benchmark_curationjob_change", job.pk)
        context = {
            **self.admin_site.each_context(request),
            "title": "Launch a curation job",
            "form": form,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/benchmark/curationjob/launch.html", context)

    @staticmethod
    def _live_context(job: CurationJob) -> dict:
        counts = jobs.curation_job_call_counts(job=job)
        return {
            "job": job,
            "targets": job.targets.select_related("scenario__persona", "style", "dialogue"),
            "spend": jobs.curation_job_spend(job=job, counts=counts),
            "activity": jobs.curation_job_endpoint_activity(job=job, counts=counts),
            "can_cancel": job.status in (RunStatus.QUEUED, RunStatus.RUNNING),
            "can_resume": job.status
            in (RunStatus.CANCELLING, RunStatus.CANCELLED, RunStatus.FAILED, RunStatus.DONE),
        }

    def change_view(self, request, object_id, form_url="", extra_context=None):
        job = self.get_object(request, object_id)
        if job is not None:
            extra_context = {**(extra_context or {}), **self._live_context(job)}
        return super().change_view(request, object_id, form_url, extra_context)

    def progress_view(self, request: HttpRequest, job_id: int) -> HttpResponse:
        """The fragment the job's page polls, with its buttons swapped in out of band."""
        if not self.has_view_permission(request):
            return redirect("admin:index")
        job = get_object_or_404(CurationJob, pk=job_id)
        return TemplateResponse(
            request, "admin/benchmark/curationjob/progress.html", self._live_context(job)
        )

    def action_view(self, request: HttpRequest, job_id: int, action: str) -> HttpResponse:
        """The Cancel / Resume buttons (POST only, for those who may change a job)."""
        if request.method != "POST" or not self.has_change_permission(request):
            return redirect("admin:benchmark_curationjob_change", job_id)
        job = get_object_or_404(CurationJob, pk=job_id)
        try:
            if action == "cancel":
                jobs.curation_job_cancel(job_id=job.pk, via=AuditVia.ADMIN, actor=request.user)
                messages.info(
                    request, f"{job}: cancelling — each dialogue stops before its next call."
                )
            elif action == "resume":
                count = jobs.curation_job_resume(
                    job_id=job.pk, via=AuditVia.ADMIN, actor=request.user
                )
                messages.info(request, f"{job}: {count} dialogue(s) re-enqueued.")
        except RunActionError as exc:
            messages.warning(request, f"{job}: {exc}")
        return redirect("admin:benchmark_curationjob_change", job_id)
