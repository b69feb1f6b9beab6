"""Admin for human studies: create a study from a selection (the same form and service as the
researchers' page), import one from the release, archive and unarchive, and read everything.
Answers, assignments and items are read-only and never deleted here; a study that has answers
cannot be deleted (its page has no Delete, the bulk action refuses it): it is archived."""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected
from django.db import transaction
from django.db.models import Count, Exists, OuterRef
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from annotation.forms import (
    BattleImportForm,
    CheckpointImportForm,
    ProposalImportForm,
    StudyCreateForm,
    StudyImportForm,
)
from annotation.models import (
    Answer,
    Assignment,
    ConsentRecord,
    ItemFlag,
    ItemSkip,
    Participant,
    QualificationOverride,
    Rater,
    RaterExclusion,
    Study,
    StudyArchiveEvent,
    StudyItem,
    StudyStatus,
)
from annotation.services.battles import battles_import
from annotation.services.checkpoints import checkpoints_import
from annotation.services.importer import StudyImportError, study_import
from annotation.services.proposals import proposal_study_import
from annotation.services.studies import (
    INSTRUCTIONS_MAX_CHARS,
    StudyHasAnswers,
    StudyInputError,
    check_study_text,
    study_archive,
    study_create,
    study_delete,
    study_unarchive,
)
from core.http import signed_in_user


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


class ArchiveEventInline(admin.TabularInline):
    model = StudyArchiveEvent
    fields = ("archived", "previous_status", "by", "at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = "archive history"

    def has_add_permission(self, request, obj=None):
        return False


class StudyAdminForm(forms.ModelForm):
    # Archiving is recorded, so it is done by its action and button, never by editing the field.
    status = forms.ChoiceField(
        choices=[(StudyStatus.OPEN, "Open"), (StudyStatus.CLOSED, "Closed")],
        help_text="Closed: annotators can no longer take items or answer. "
        "To take a study off every list, archive it (the button above).",
    )
    instructions = forms.CharField(
        required=False,
        max_length=INSTRUCTIONS_MAX_CHARS,
        widget=forms.Textarea,
        help_text=Study._meta.get_field("instructions").help_text,
    )

    class Meta:
        model = Study
        fields = (
            "name",
            "status",
            "instructions",
            "reason_required",
            "lease_minutes",
            "item_time_limit_s",
            "reveal_judge_verdict",
        )

    def clean(self):
        """An edit keeps the study blind (the rule of its creation, ``check_study_text``)."""
        data = super().clean() or {}
        if self.instance.pk is not None and ("name" in data or "instructions" in data):
            errors = check_study_text(
                study=self.instance,
                name=data.get("name", self.instance.name),
                instructions=data.get("instructions", self.instance.instructions),
            )
            for field_name, messages_ in errors.items():
                for message in messages_:
                    self.add_error(field_name, message)
        return data


def _with_answers(queryset):
    return queryset.filter(Exists(Answer.objects.filter(assignment__item__study=OuterRef("pk"))))


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    form = StudyAdminForm
    list_display = ("name", "kind", "status", "source", "n_items", "created_at", "page_link")
    list_filter = ("kind", "status", "source")
    actions = ["archive_studies", "unarchive_studies", "delete_studies_without_answers"]
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
    fields = (*StudyAdminForm.Meta.fields, *readonly_fields)
    inlines = [RaterInline, ArchiveEventInline]
    change_list_template = "admin/annotation/study/change_list.html"
    change_form_template = "admin/annotation/study/change_form.html"

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(item_count=Count("items"))

    @admin.display(description="items", ordering="item_count")
    def n_items(self, obj: Study) -> int:
        return obj.item_count  # type: ignore[attr-defined]  # annotated by get_queryset

    @admin.display(description="")
    def page_link(self, obj: Study) -> str:
        return format_html(
            '<a href="{}">progress &amp; quality</a>',
            reverse("annotation:study_detail", args=[obj.pk]),
        )

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and obj.status == StudyStatus.ARCHIVED:
            return ("status", *self.readonly_fields)
        return self.readonly_fields

    # --- deleting: only a study without answers ---------------------------------------------

    def has_delete_permission(self, request, obj=None):
        if obj is not None and _with_answers(Study.objects.filter(pk=obj.pk)).exists():
            return False
        return super().has_delete_permission(request, obj)

    def get_actions(self, request):
        # Django's own "delete selected" is replaced by one that refuses studies with answers
        # before its confirmation page.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        if not self.has_delete_permission(request):
            actions.pop("delete_studies_without_answers", None)
        return actions

    @admin.action(description="Delete selected studies (only those without answers)")
    def delete_studies_without_answers(self, request, queryset):
        refused = list(_with_answers(queryset).order_by("pk"))
        if refused:
            names = ", ".join(f"{s.name!r} ({s.pk})" for s in refused)
            self.message_user(
                request,
                f"Nothing deleted: {names} {'has' if len(refused) == 1 else 'have'} answers. "
                "A study with answers cannot be deleted: archive it instead.",
                messages.ERROR,
            )
            return None
        try:
            with transaction.atomic():
                return delete_selected(self, request, queryset)
        except StudyHasAnswers as exc:  # an answer arrived after the confirmation page
            self.message_user(request, f"Nothing deleted: {exc}", messages.ERROR)
            return None

    def get_deleted_objects(self, objs, request):
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        # A study's items, leases and exclusion records go with it (their own admins refuse to
        # delete them one by one): the permission that counts is the study's.
        perms_needed -= {
            str(model._meta.verbose_name) for model in (StudyItem, Assignment, RaterExclusion)
        }
        return deleted, counts, perms_needed, protected

    def delete_model(self, request, obj):
        study_delete(study=obj)

    def delete_queryset(self, request, queryset):
        for study in queryset:
            study_delete(study=study)

    def delete_view(self, request, object_id, extra_context=None):
        try:
            return super().delete_view(request, object_id, extra_context)
        except StudyHasAnswers as exc:  # an answer arrived after the confirmation page
            self.message_user(request, str(exc), messages.ERROR)
            return redirect("admin:annotation_study_change", object_id)

    # --- archiving -------------------------------------------------------------------------

    @admin.action(description="Archive selected studies")
    def archive_studies(self, request, queryset):
        done = [s for s in queryset if study_archive(study=s, by=signed_in_user(request))]
        self.message_user(request, f"{len(done)} study(ies) archived.")

    @admin.action(description="Unarchive selected studies")
    def unarchive_studies(self, request, queryset):
        done = [s for s in queryset if study_unarchive(study=s, by=signed_in_user(request))]
        self.message_user(request, f"{len(done)} study(ies) unarchived.")

    def archive_view(self, request: HttpRequest, study_id: int, archived: bool) -> HttpResponse:
        """The Archive / Unarchive button on a study's page (POST only; GET goes back)."""
        study = get_object_or_404(Study, pk=study_id)
        if request.method == "POST" and self.has_change_permission(request, study):
            if archived:
                done = study_archive(study=study, by=signed_in_user(request))
            else:
                done = study_unarchive(study=study, by=signed_in_user(request))
            if done:
                what = "archived" if archived else f"unarchived ({study.get_status_display()})"
                self.message_user(request, f"Study {study.pk} {what}.")
        return redirect("admin:annotation_study_change", study_id)

    def get_urls(self):
        return [
            path(
                "import/",
                self.admin_site.admin_view(self.import_view),
                name="annotation_study_import",
            ),
            path(
                "import-battles/",
                self.admin_site.admin_view(self.import_battles_view),
                name="annotation_study_import_battles",
            ),
            path(
                "import-halo/",
                self.admin_site.admin_view(self.import_halo_view),
                name="annotation_study_import_halo",
            ),
            path(
                "import-proposals/",
                self.admin_site.admin_view(self.import_proposals_view),
                name="annotation_study_import_proposals",
            ),
            path(
                "<int:study_id>/archive/",
                self.admin_site.admin_view(self.archive_view),
                {"archived": True},
                name="annotation_study_archive",
            ),
            path(
                "<int:study_id>/unarchive/",
                self.admin_site.admin_view(self.archive_view),
                {"archived": False},
                name="annotation_study_unarchive",
            ),
            *super().get_urls(),
        ]

    def add_view(self, request: HttpRequest, form_url="", extra_context=None) -> HttpResponse:
        """Create a study from a selection (all or nothing; errors shown on their fields)."""
        if not self.has_add_permission(request):
            return redirect("admin:index")
        # Bound on every POST, even an empty one: an empty submission gets its errors too.
        form = StudyCreateForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            try:
                study = study_create(spec=form.to_spec(), created_by=signed_in_user(request))
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
        posted = request.method == "POST"
        form = StudyImportForm(request.POST if posted else None, request.FILES if posted else None)
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
                    imported_by=signed_in_user(request),
                )
            except StudyImportError as exc:
                context["import_errors"] = exc
            else:
                messages.success(request, f"Imported study {study.pk}: {study.name}.")
                return redirect("admin:annotation_study_change", study.pk)
        return TemplateResponse(request, "admin/annotation/study/import.html", context)

    def import_battles_view(self, request: HttpRequest) -> HttpResponse:
        """Upload battles in the Chatbot Arena format: same as ``import_battles``."""
        if not self.has_add_permission(request):
            return redirect("admin:index")
        posted = request.method == "POST"
        form = BattleImportForm(request.POST if posted else None, request.FILES if posted else None)
        context = {
            **self.admin_site.each_context(request),
            "form": form,
            "title": "Import battles (Chatbot Arena format)",
            "opts": self.model._meta,
        }
        if posted and form.is_valid():
            upload = form.cleaned_data["battles"]
            try:
                result = battles_import(
                    stream=upload,
                    source_name=upload.name,
                    name=form.cleaned_data["name"],
                    imported_by=signed_in_user(request),
                )
            except StudyImportError as exc:
                context["import_errors"] = exc
            else:
                study = result.study
                messages.success(
                    request,
                    f"Imported study {study.pk}: {study.name} ({result.battles} battles, "
                    f"{result.items} items, {result.judges} judges).",
                )
                return redirect("admin:annotation_study_change", study.pk)
        return TemplateResponse(request, "admin/annotation/study/import_battles.html", context)

    def import_halo_view(self, request: HttpRequest) -> HttpResponse:
        """Upload HALO checkpoints as a new, open diagnosis study: same as ``import_halo``."""
        if not self.has_add_permission(request):
            return redirect("admin:index")
        posted = request.method == "POST"
        form = CheckpointImportForm(
            request.POST if posted else None, request.FILES if posted else None
        )
        context = {
            **self.admin_site.each_context(request),
            "form": form,
            "title": "Import HALO checkpoints",
            "opts": self.model._meta,
        }
        if posted and form.is_valid():
            data = form.cleaned_data
            try:
                study = checkpoints_import(
                    stream=data["checkpoints"],
                    file_name=data["checkpoints"].name,
                    name=data["name"],
                    annotators=list(data["annotators"]),
                    overlap=data["overlap"],
                    instructions=data["instructions"],
                    max_items=data["max_items"],
                    seed=data["seed"],
                    created_by=signed_in_user(request),
                )
            except StudyImportError as exc:
                context["import_errors"] = exc
            except StudyInputError as exc:
                for field_name, errors in exc.errors.items():
                    for error in errors:
                        known = field_name in form.fields
                        form.add_error(field_name if known else None, error)
            else:
                messages.success(
                    request, f"Study {study.pk} created: {study.items.count()} checkpoints."
                )
                return redirect("admin:annotation_study_change", study.pk)
        return TemplateResponse(request, "admin/annotation/study/import_halo.html", context)

    def import_proposals_view(self, request: HttpRequest) -> HttpResponse:
        """Upload a file of contexts and proposals: an open proposal-review study (the same
        service as ``import_proposals``)."""
        if not self.has_add_permission(request):
            return redirect("admin:index")
        posted = request.method == "POST"
        form = ProposalImportForm(
            request.POST if posted else None, request.FILES if posted else None
        )
        context = {
            **self.admin_site.each_context(request),
            "form": form,
            "title": "Import contexts and proposals to review",
            "opts": self.model._meta,
        }
        if posted and form.is_valid():
            data = form.cleaned_data
            try:
                study = proposal_study_import(
                    stream=data["file"],
                    source_name=data["file"].name,
                    name=data["name"],
                    annotators=list(data["annotators"]),
                    overlap=data["overlap"],
                    instructions=data["instructions"],
                    lease_minutes=data["lease_minutes"],
                    reason_required=data["reason_required"],
                    seed=data["seed"],
                    created_by=signed_in_user(request),
                )
            except StudyInputError as exc:
                for field_name, errors in exc.errors.items():
                    for error in errors:
                        form.add_error(field_name if field_name in form.fields else None, error)
            except StudyImportError as exc:
                context["import_errors"] = exc
            else:
                messages.success(
                    request, f"Created study {study.pk}: {study.items.count()} contexts."
                )
                return redirect("admin:annotation_study_change", study.pk)
        return TemplateResponse(request, "admin/annotation/study/import_proposals.html", context)


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


@admin.register(ItemSkip)
class ItemSkipAdmin(ReadOnlyAdmin):
    list_display = ("assignment", "cause", "reason", "at")
    list_filter = ("cause", "assignment__item__study")
    list_select_related = ("assignment__item", "assignment__rater__user")
    search_fields = ("assignment__item__key", "reason")


@admin.register(ItemFlag)
class ItemFlagAdmin(ReadOnlyAdmin):
    list_display = ("assignment", "category", "note", "at")
    list_filter = ("category", "assignment__item__study")
    list_select_related = ("assignment__item", "assignment__rater__user")
    search_fields = ("assignment__item__key", "note")


# Onboarding and participation records (docs/annotation.md): written by their services only.


@admin.register(ConsentRecord)
class ConsentRecordAdmin(ReadOnlyAdmin):
    list_display = ("rater", "text_sha256", "at")
    list_select_related = ("rater__user", "rater__study")
    list_filter = ("rater__study",)


@admin.register(QualificationOverride)
class QualificationOverrideAdmin(ReadOnlyAdmin):
    list_display = ("rater", "qualified", "reason", "by", "at")
    list_select_related = ("rater__user", "by")
    list_filter = ("rater__study",)


@admin.register(Participant)
class ParticipantAdmin(ReadOnlyAdmin):
    list_display = ("external_id", "study", "platform_study_id", "session_id", "created_at")
    list_select_related = ("study",)
    list_filter = ("study",)
    search_fields = ("external_id",)
