from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from benchmark import selectors
from benchmark.forms import DialogueFilterForm
from core.http import HtmxHttpRequest
from core.roles import staff_like_required

PAGE_SIZE = 50


@staff_like_required
def dialogue_list(request: HtmxHttpRequest) -> HttpResponse:
    form = DialogueFilterForm(request.GET or None)
    filters = form.to_filters() if form.is_valid() else selectors.DialogueFilters()
    page = Paginator(selectors.dialogue_list(filters=filters), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    context = {"form": form, "page": page, "overview": selectors.corpus_overview()}
    template = "benchmark/dialogue_list.html"
    if request.htmx:
        template += "#results"
    return render(request, template, context)


@staff_like_required
def dialogue_detail(request: HttpRequest, pk: int) -> HttpResponse:
    dialogue = selectors.dialogue_for_reading(pk=pk)
    findings_by_turn: dict[int | None, list[dict]] = {}
    for finding in dialogue.findings:
        findings_by_turn.setdefault(finding.get("turn"), []).append(finding)
    turns = [
        {"turn": turn, "findings": findings_by_turn.get(turn.index, [])}
        for turn in dialogue.turns.all()
    ]
    return render(
        request,
        "benchmark/dialogue_detail.html",
        {
            "dialogue": dialogue,
            "turns": turns,
            "dialogue_findings": findings_by_turn.get(None, []),
            "finding_count": len(dialogue.findings),
        },
    )


@staff_like_required
def turn_text(request: HtmxHttpRequest, pk: int, index: int, part: str) -> HttpResponse:
    """A turn's text in full: the reading page's "show all" (htmx swaps in the text alone)."""
    context = {"pk": pk, "index": index, "part": part}
    context["text"] = selectors.turn_text(pk=pk, index=index, part=part)
    template = "benchmark/turn_text.html"
    if request.htmx:
        template += "#text"
    return render(request, template, context)
