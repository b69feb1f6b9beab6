"""Read-side queries for the corpus pages. Each returns what a page needs in a fixed number
of queries, whatever the size of the corpus."""

from dataclasses import dataclass

from django.db.models import Count, Prefetch, Q, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from benchmark.models import (
    Anchor,
    Dialogue,
    DialogueStatus,
    Trigger,
    TriggerType,
    Turn,
)


@dataclass(frozen=True)
class DialogueFilters:
    q: str = ""
    domain: str = ""
    style: int | None = None
    status: str = ""
    trigger_type: str = ""
    with_findings: bool = False


def dialogue_list(*, filters: DialogueFilters) -> QuerySet[Dialogue]:
    queryset = (
        Dialogue.objects.select_related("domain", "style", "persona", "scenario")
        .annotate(
            trigger_count=Count("turns__trigger", distinct=True),
            turn_count=Count("turns", distinct=True),
        )
        .order_by("id")
    )
    if filters.q:
        queryset = queryset.filter(
            Q(unique_id_eval__icontains=filters.q)
            | Q(scenario__title__icontains=filters.q)
            | Q(persona__name__icontains=filters.q)
        )
    if filters.domain:
        queryset = queryset.filter(domain__key=filters.domain)
    if filters.style:
        queryset = queryset.filter(style__index=filters.style)
    if filters.status:
        queryset = queryset.filter(status=filters.status)
    if filters.trigger_type:
        queryset = queryset.filter(turns__trigger__type=filters.trigger_type).distinct()
    if filters.with_findings:
        queryset = queryset.exclude(findings=[])
    return queryset


def corpus_overview() -> dict:
    """Headline counts for the corpus page."""
    by_type = dict(
        Trigger.objects.values_list("type").annotate(n=Count("id")).values_list("type", "n")
    )
    by_status = dict(
        Dialogue.objects.values_list("status").annotate(n=Count("id")).values_list("status", "n")
    )
    return {
        "dialogues": sum(by_status.values()),
        "triggers": sum(by_type.values()),
        "by_type": [(t.label, by_type.get(t.value, 0)) for t in TriggerType],
        "by_status": [(s.label, by_status.get(s.value, 0)) for s in DialogueStatus],
    }


def dialogue_for_reading(*, pk: int) -> Dialogue:
    """One dialogue with everything the reading page shows, in a handful of queries."""
    queryset = Dialogue.objects.select_related(
        "domain", "style", "persona", "scenario", "blueprint"
    ).prefetch_related(
        Prefetch(
            "turns",
            queryset=Turn.objects.order_by("index")
            .select_related("trigger")
            .prefetch_related("anchors_disclosed", "trigger__anchors", "images"),
        ),
        Prefetch("anchors", queryset=Anchor.objects.select_related("disclosed_in").order_by("id")),
    )
    return get_object_or_404(queryset, pk=pk)


# A turn's two texts, by the name its "show all" URL gives them.
TURN_TEXTS = {"user": "user_message", "assistant": "assistant_response"}


def turn_text(*, pk: int, index: int, part: str) -> str:
    """One of a dialogue's turn texts in full (a long one is shown cut on the reading page);
    404 for a turn or a part that does not exist."""
    field = TURN_TEXTS.get(part)
    if field is None:
        raise Http404(f"a turn has no {part!r} text")
    return get_object_or_404(
        Turn.objects.values_list(field, flat=True), dialogue_id=pk, index=index
    )
