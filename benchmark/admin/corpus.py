from __future__ import annotations

import zipfile
from contextlib import ExitStack
from typing import TYPE_CHECKING, TypedDict

from django.contrib import admin, messages
from django.db import models
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from benchmark.corpus.images import ImageSource, NoSource, ZipSource
from benchmark.corpus.importer import CorpusError, CorpusImportError, corpus_import
from benchmark.forms import CorpusUploadForm, ScenarioTurnImageForm, ScenarioTurnImageFormSet
from benchmark.models import (
    Anchor,
    Blueprint,
    CommunicationStyle,
    Dialogue,
    Domain,
    ModelEndpoint,
    Persona,
    Scenario,
    ScenarioTurnImage,
    Trigger,
    Turn,
)

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


@admin.register(Domain)
class DomainAdmin(admin.ModelAdmin):
    list_display = ("name", "key", "order")
    search_fields = ("name", "key")


@admin.register(CommunicationStyle)
class CommunicationStyleAdmin(admin.ModelAdmin):
    list_display = (
        "index",
        "code",
        "min_words",
        "max_words",
        "expressiveness",
        "preciseness",
        "questioningness",
        "verbal_aggressiveness",
        "emotionality",
        "impression_manipulativeness",
    )
    list_filter = (
        "expressiveness",
        "preciseness",
        "questioningness",
        "verbal_aggressiveness",
        "emotionality",
        "impression_manipulativeness",
    )
    search_fields = ("code", "description")


@admin.register(Persona)
class PersonaAdmin(admin.ModelAdmin):
    list_display = ("external_id", "name")
    search_fields = ("external_id", "name", "summary")


class ScenarioTurnImageInline(admin.StackedInline):
    """The images a scenario shows with its user turns (docs/curation.md): a curated
    dialogue's turn carries them, and an insufficient one allows an INTERVENTION trigger."""

    model = ScenarioTurnImage
    form = ScenarioTurnImageForm
    formset = ScenarioTurnImageFormSet
    extra = 0
    readonly_fields = ("stored",)
    fields = ("turn", "upload", "stored", "description", "alt", "problem", "intervention")

    @admin.display(description="Stored image")
    def stored(self, image: ScenarioTurnImage) -> str:
        if not image.file:
            return "—"
        return f"{image.media_type}, {image.width}×{image.height}, {image.byte_size:,} bytes"


@admin.register(Scenario)
class ScenarioAdmin(admin.ModelAdmin):
    list_display = ("key", "title", "domain", "persona")
    list_filter = ("domain",)
    search_fields = ("key", "title", "hidden_goal", "surface_request", "persona__name")
    list_select_related = ("domain", "persona")
    raw_id_fields = ("persona",)
    inlines = [ScenarioTurnImageInline]


@admin.register(Blueprint)
class BlueprintAdmin(admin.ModelAdmin):
    list_display = ("key", "scenario", "style")
    list_filter = ("style", "scenario__domain")
    search_fields = ("key", "scenario__key", "strategic_overview")
    list_select_related = ("scenario", "style")
    raw_id_fields = ("scenario",)


class TurnInline(admin.StackedInline):
    model = Turn
    extra = 0
    fields = ("index", "user_message", "assistant_response", "planner")
    show_change_link = True


class HasFindingsFilter(admin.SimpleListFilter):
    title = "protocol findings"
    parameter_name = "findings"

    def lookups(self, request, model_admin):
        return (("yes", "With findings"), ("no", "None"))

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.exclude(findings=[])
        if self.value() == "no":
            return queryset.filter(findings=[])
        return queryset


class _TriggerCount(TypedDict):
    n_triggers: int  # DialogueAdmin.get_queryset's annotation


@admin.register(Dialogue)
class DialogueAdmin(admin.ModelAdmin):
    list_display = (
        "unique_id_eval",
        "domain",
        "style",
        "status",
        "trigger_count",
        "finding_count",
        "is_demo",
        "read_link",
    )
    list_filter = ("status", "domain", "style", "is_demo", HasFindingsFilter, "curation_model")
    search_fields = ("unique_id_eval", "uuid", "scenario__key", "scenario__title", "persona__name")
    list_select_related = ("domain", "style")
    raw_id_fields = ("blueprint", "scenario", "persona")
    readonly_fields = ("findings", "imported_at", "updated_at")
    inlines = [TurnInline]
    change_list_template = "admin/benchmark/dialogue/change_list.html"

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_triggers=Count("turns__trigger"))

    @admin.display(description="triggers", ordering="n_triggers")
    def trigger_count(self, obj: WithAnnotations[Dialogue, _TriggerCount]) -> int:
        return obj.n_triggers

    @admin.display(description="findings")
    def finding_count(self, obj: Dialogue) -> int:
        return len(obj.findings)

    @admin.display(description="")
    def read_link(self, obj: Dialogue) -> str:
        return format_html(
            '<a href="{}">read</a>', reverse("benchmark:dialogue_detail", args=[obj.pk])
        )

    def get_urls(self):
        return [
            path(
                "import/",
                self.admin_site.admin_view(self.import_view),
                name="benchmark_dialogue_import",
            ),
            *super().get_urls(),
        ]

    def import_view(self, request: HttpRequest) -> HttpResponse:
        """Upload final_dialogues.jsonl: same checks and guarantees as ``import_corpus``."""
        if not self.has_add_permission(request):
            return redirect("admin:index")
        form = CorpusUploadForm(request.POST or None, request.FILES or None)
        context = {
            **self.admin_site.each_context(request),
            "form": form,
            "title": "Import corpus",
            "opts": self.model._meta,
        }
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            archive = form.cleaned_data["images"]
            try:
                with ExitStack() as stack:
                    images: ImageSource = NoSource()
                    if archive is not None:
                        try:
                            images = ZipSource(
                                stack.enter_context(zipfile.ZipFile(archive)), archive.name
                            )
                        except zipfile.BadZipFile as exc:
                            raise CorpusImportError(
                                [CorpusError(1, "images", f"not a zip archive: {exc}")], 1
                            ) from None
                    summary = corpus_import(
                        stream=upload.file if hasattr(upload, "file") else upload,
                        source=upload.name,
                        dry_run=form.cleaned_data["dry_run"],
                        strict=form.cleaned_data["strict"],
                        images=images,
                    )
            except CorpusImportError as exc:
                context["import_errors"] = exc
            else:
                if summary.dry_run:
                    context["summary"] = summary
                else:
                    for line in summary.lines_of_text():
                        messages.success(request, line)
                    return redirect("admin:benchmark_dialogue_changelist")
        return TemplateResponse(request, "admin/benchmark/dialogue/import.html", context)


@admin.register(Turn)
class TurnAdmin(admin.ModelAdmin):
    list_display = ("dialogue", "index")
    search_fields = ("dialogue__unique_id_eval", "user_message", "assistant_response")
    list_select_related = ("dialogue",)
    raw_id_fields = ("dialogue",)


@admin.register(Trigger)
class TriggerAdmin(admin.ModelAdmin):
    list_display = ("__str__", "type", "turn_index")
    list_filter = ("type", "turn__dialogue__domain")
    search_fields = ("turn__dialogue__unique_id_eval", "pass_criteria", "fail_criteria")
    list_select_related = ("turn__dialogue",)
    raw_id_fields = ("turn",)
    filter_horizontal = ("anchors",)

    @admin.display(description="turn", ordering="turn__index")
    def turn_index(self, obj: Trigger) -> int:
        return obj.turn.index


@admin.register(Anchor)
class AnchorAdmin(admin.ModelAdmin):
    list_display = ("dialogue", "key", "text", "disclosed_in")
    search_fields = ("dialogue__unique_id_eval", "key", "text")
    list_select_related = ("dialogue", "disclosed_in")
    raw_id_fields = ("dialogue", "disclosed_in")


@admin.register(ModelEndpoint)
class ModelEndpointAdmin(admin.ModelAdmin):
    list_display = (
        "display_name",
        "name",
        "provider",
        "model_name",
        "base_url",
        "api_key_env",
        "is_active",
    )
    list_filter = ("provider", "is_active")
    search_fields = ("name", "display_name", "model_name")
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    actions = ["test_connection"]
    readonly_fields = ("limits_in_force",)

    @admin.display(description="Limits in force")
    def limits_in_force(self, obj: ModelEndpoint) -> str:
        """What every worker obeys now: the limits configured here, those learnt from the
        vendor's headers (shared through Redis), the calls in flight against the cap."""
        if obj.pk is None:
            return "Configured below (default params); the rest is learnt once it is called."
        from benchmark.providers.activity import endpoint_activity, limits_text

        activity = endpoint_activity({}, [obj])
        text = limits_text(activity.endpoints[0])
        return f"{text}. {activity.shared}" if activity.shared else text

    @admin.action(description="Test connection")
    def test_connection(self, request, queryset):
        """One tiny call per endpoint; the message says what answered and how fast."""
        from benchmark.providers.base import ProviderError
        from benchmark.providers.factory import test_connection

        for endpoint in queryset:
            try:
                result = test_connection(endpoint)
            except ProviderError as exc:
                messages.error(request, f"{endpoint}: {exc}")
            else:
                messages.success(
                    request, f"{endpoint}: answered {result.text[:40]!r} in {result.latency_s:.2f}s"
                )
