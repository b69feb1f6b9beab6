"""Admin for human studies: create a study from a selection (the same form and service as the
researchers' page), import one from the release, and read everything. Answers, assignments and
items are read-only and never deleted here; a study that has answers cannot be deleted."""

from django.contrib import admin, messages
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from annotation.forms import StudyCreateForm, StudyImportForm
from annotation.models import Answer, Assignment, Rater, RaterExclusion, Study, StudyItem
from annotation.services.importer import StudyImportError, study_import
from annotation.services.studies import StudyInputError, study_create


class ReadOnlyAdmin(admin.ModelAdmin):
    """History is written by the services only."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class RaterInline(admin.TabularInline):
    model = Rater
    fields = ("user", "external_id", "annotates", "adjudicates", "excluded")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "status", "source", "n_items", "created_at", "page_link")
    list_filter = ("kind", "status", "source")
    search_fields = ("name", "instructions")
    readonly_fields = (
        "kind",
        "source",
        "overlap",
        "run",
        "selection",
        "created_by",
        "created_at",
    )
    fields = (
        "name",
        "status",
        "instructions",
        "reason_required",
        "lease_minutes",
        *readonly_fields,
    )
    inlines = [RaterInline]
    change_list_template = "admin/annotation/study/change_list.html"

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(item_count=Count("items"))

    @admin.display(description="items", ordering="item_count")
    def n_items(self, obj: Study) -> int:
        return obj.item_count

    @admin.display(description="")
    def page_link(self, obj: Study) -> str:
        return format_html(
            '<a href="{}">progress &amp; quality</a>',
            reverse("annotation:study_detail", args=[obj.pk]),
        )

    def has_delete_permission(self, request, obj=None):
        if obj is not None and Assignment.objects.filter(item__study=obj).exists():
            return False
        return super().has_delete_permission(request, obj)

    def get_urls(self):
        return [
            path(
                "import/",
                self.admin_site.admin_view(self.import_view),
                name="annotation_study_import",
            ),
            *super().get_urls(),
        ]

    def add_view(self, request: HttpRequest, form_url="", extra_context=None) -> HttpResponse:
        """Create a study from a selection (all or nothing; errors shown on their fields)."""
        if not self.has_add_permission(request):
            return redirect("admin:index")
        form = StudyCreateForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                study = study_create(spec=form.to_spec(), created_by=request.user)
            except StudyInputError as exc:
                for field_name, errors in exc.errors.items():
                    for error in errors:
                        form.add_error(None if field_name == "__all__" else field_name, error)
            else:
                messages.success(request, f"Study {study.pk} created: {study.items.count()} items.")
                return redirect("admin:annotation_study_change", study.pk)
        context = {
            **self.admin_site.each_context(request),
            "form": form,
            "fields": [form[name] for name in form.fields],
            "title": "Create a study from a selection",
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/annotation/study/create.html", context)

    def import_view(self, request: HttpRequest) -> HttpResponse:
        """Upload a release study (items + ratings files): same as ``import_study``."""
        if not self.has_add_permission(request):
            return redirect("admin:index")
        form = StudyImportForm(request.POST or None, request.FILES or None)
        context = {
            **self.admin_site.each_context(request),
            "form": form,
            "title": "Import a study from the release",
            "opts": self.model._meta,
        }
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                study = study_import(
                    kind=data["kind"],
                    items=(data["items"].name, data["items"]),
                    ratings=[(f.name, f) for f in data["ratings"]],
                    name=data["name"],
                    imported_by=request.user,
                )
            except StudyImportError as exc:
                context["import_errors"] = exc
            else:
                messages.success(request, f"Imported study {study.pk}: {study.name}.")
                return redirect("admin:annotation_study_change", study.pk)
        return TemplateResponse(request, "admin/annotation/study/import.html", context)


@admin.register(StudyItem)
class StudyItemAdmin(ReadOnlyAdmin):
    list_display = (
        "key",
        "study",
        "position",
        "completed_answers",
        "required_answers",
        "is_gold",
        "expected",
        "needs_adjudication",
        "outcome",
    )
    list_filter = ("study__kind", "is_gold", "needs_adjudication", "study")
    search_fields = ("key", "token")
    list_select_related = ("study",)


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = ("item", "rater", "state", "role", "leased_at", "lease_expires_at")
    list_filter = ("state", "role", "item__study")
    list_select_related = ("item", "rater__user")
    search_fields = ("item__key", "rater__user__username", "rater__external_id")


@admin.register(Answer)
class AnswerAdmin(ReadOnlyAdmin):
    list_display = (
        "assignment",
        "label",
        "confidence",
        "time_on_item_s",
        "submitted_at",
        "retracted_at",
        "retraction_reason",
    )
    list_filter = ("assignment__item__study__kind", "retraction_reason", "assignment__item__study")
    list_select_related = ("assignment__item", "assignment__rater__user")
    search_fields = ("assignment__item__key", "note", "idempotency_key")


@admin.register(RaterExclusion)
class RaterExclusionAdmin(ReadOnlyAdmin):
    list_display = ("rater", "excluded", "reason", "by", "at")
    list_select_related = ("rater__user", "by")
