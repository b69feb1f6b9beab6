"""What the researcher dashboard shows for one set of filters: a panel per registered table with
a display — the run's tables when there is a run, and with a study the tables that read its kind
— each with its rows drawn as the table's ``Display`` says, its charts and the CSV / JSON links
(the REST API's, so the page and scripts get the very same numbers). A run with LLM pairwise
judges also gets the ranking tables' panels of the chosen judge's battles (``battles=judge``)."""

from __future__ import annotations

import string
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from stats import charts, selectors, studies, tables
from stats.exports import RAW_EXPORTS
from stats.tables import arena
from stats.templatetags.stats_format import formatted, missing


@dataclass(frozen=True)
class Part:
    """A piece of a table cell: plain text, bold, or a span with a class (muted, a badge)."""

    text: str
    css: str = ""
    title: str = ""
    strong: bool = False
    href: str = ""


@dataclass(frozen=True)
class PanelRow:
    css: str
    cells: list[list[Part]]


@dataclass
class Panel:
    spec: tables.TableSpec
    table: tables.Table | None = None
    rows: list[PanelRow] = field(default_factory=list)
    charts: list[charts.Chart] = field(default_factory=list)
    csv_url: str = ""
    json_url: str = ""
    error: str = ""
    # A study table drawn for the run instead, from an LLM pairwise judge's battles: its
    # section id gets this suffix (the study's panel of the same table may be on the page
    # too), its heading names the judge.
    variant: str = ""
    variant_heading: str = ""

    @property
    def name(self) -> str:
        return f"{self.spec.name}-{self.variant}" if self.variant else self.spec.name

    @property
    def heading(self) -> str:
        return self.variant_heading or self.spec.heading

    @property
    def needs(self) -> str:
        """The section the panel belongs to: the run's, or the study's."""
        return tables.RUN if self.variant else self.spec.needs

    @property
    def display(self) -> tables.Display:
        assert self.spec.display is not None  # only tables with a display get a panel
        return self.spec.display


class _RowFormatter(string.Formatter):
    """``str.format`` over a row where a field's spec names a cell format and its digits:
    ``{coverage:pct}``, ``{slope:num2}``, ``{kendall_p:pvalue}``."""

    def format_field(self, value: Any, format_spec: str) -> str:
        name = format_spec.rstrip("0123456789")
        digits = format_spec[len(name) :]
        return formatted(value, name or "text", int(digits) if digits else None)


ROW_FORMATTER = _RowFormatter()


def _cell(cell: tables.Cell, row: dict[str, Any], overall: bool) -> list[Part]:
    if overall and cell.overall:
        return [Part(formatted(row.get(cell.overall)), strong=True)]
    parts = []
    if cell.column:
        value = row.get(cell.column)
        if cell.fallback and missing(value):
            value = row.get(cell.fallback)
        text = formatted(value, cell.format, cell.digits)
        if cell.also:
            text += f" ({formatted(row.get(cell.also))})"
        css = f"badge trigger-{str(value).lower()}" if cell.format == "trigger" else ""
        parts.append(Part(text, css=css))
    if cell.ci:
        low, high = (formatted(row.get(c), cell.format, cell.digits) for c in cell.ci)
        # Beside a value the interval is secondary; alone it is the cell's value.
        parts.append(Part(f"[{low}, {high}]", css="muted" if parts else ""))
    aside = cell.aside
    if aside is not None and aside.when(row):
        text = ROW_FORMATTER.vformat(aside.text, (), row)
        parts.append(Part(text, css="badge warn" if aside.badge else "muted", title=aside.title))
    return parts


def panel_rows(
    display: tables.Display, table: tables.Table, request: selectors.TableRequest | None = None
) -> list[PanelRow]:
    """Each row of ``table`` as the cells ``display`` declares; with a ``display.link`` and the
    request, the first cell links to the row's page."""
    out = []
    for row in table.rows:
        row = {**row, **{name: derive(row) for name, derive in display.derive.items()}}
        overall = display.overall is not None and row.get(display.overall[0]) == display.overall[1]
        cells = [_cell(cell, row, overall) for cell in display.cells]
        if display.link is not None and request is not None and cells and cells[0]:
            href = display.link(row, request)
            cells[0] = [replace(part, href=href) for part in cells[0]]
        out.append(PanelRow(css="overall" if overall else display.row_class, cells=cells))
    return out


def _query(request: selectors.TableRequest) -> dict[str, str | int]:
    query: dict[str, str | int] = {
        "verdicts": request.verdicts.label,
        "condition": str(request.condition),
    }
    if request.run is not None:
        query["run"] = request.run.pk
    if request.study is not None:
        query["study"] = request.study
        if request.include_excluded:
            query["include_excluded"] = "true"
    if request.majority != "drop":
        query["majority"] = request.majority
    if request.ties != "half":
        query["ties"] = request.ties
    if request.battles != "study":
        query["battles"] = request.battles
    return query


def _panel(
    spec: tables.TableSpec,
    request: selectors.TableRequest,
    *,
    variant: str = "",
    variant_heading: str = "",
) -> Panel:
    url = reverse("stats_api:table", args=[spec.name])
    query = _query(request)
    panel = Panel(
        spec=spec,
        csv_url=f"{url}?{urlencode({**query, 'format': 'csv'})}",
        json_url=f"{url}?{urlencode(query)}",
        variant=variant,
        variant_heading=variant_heading,
    )
    try:
        panel.table = tables.build(spec.name, request)
    except selectors.StatsInputError as exc:
        panel.error = str(exc)
        return panel
    panel.rows = panel_rows(panel.display, panel.table, request)
    if spec.charts is not None and panel.table.rows:
        panel.charts = spec.charts(panel.table)
    return panel


def dashboard_panels(
    request: selectors.TableRequest, *, study_kind: str | None = None, pairwise_judge: str = ""
) -> dict[str, Panel]:
    """Every panel for these filters, by panel name in the registry's order: the run tables'
    (when there is a run) and, with a study of ``study_kind``, those of the tables that read its
    kind. Tables without a display have no panel. With ``pairwise_judge`` (one of the run's
    pairwise judges), the run's panels end with the ranking tables of that judge's battles
    (``arena.JUDGE_PANELS``, ``battles=judge``), fitted once for both."""
    read = studies.tables_for_kind(study_kind) if request.study is not None and study_kind else ()
    panels = {}
    for spec in tables.all_specs():
        if spec.display is None:
            continue
        if (spec.needs == tables.RUN and request.run is not None) or (
            spec.needs == tables.STUDY and spec.name in read
        ):
            panels[spec.name] = _panel(spec, request)
    if request.run is not None and pairwise_judge:
        # A request of its own: its cache holds this judge's battles and fit, not the study's.
        judged = replace(
            request,
            battles="judge",
            verdicts=selectors.VerdictSource("judge", pairwise_judge),
            study=None,
            include_excluded=False,
            cache={},
        )
        for name in arena.JUDGE_PANELS:
            spec = tables.get(name)
            panel = _panel(
                spec,
                judged,
                variant="judge",
                variant_heading=f"{spec.heading} · LLM pairwise judge {pairwise_judge}",
            )
            panels[panel.name] = panel
    return panels


def raw_export_links(request: selectors.TableRequest) -> list[tuple[str, str, str]]:
    """(what, CSV url, JSONL url) per raw export: limited to the selected study where the export
    reads studies, else to the selected run where it reads runs, else everything."""
    links = []
    for name, export in RAW_EXPORTS.items():
        if "study" in export.filters and request.study is not None:
            query, what = {"study": request.study}, f"{name.title()} of study {request.study}"
        elif "study" in export.filters:
            query, what = {}, f"{name.title()} of every study"
        elif request.run is not None:
            query, what = {"run": request.run.pk}, f"{name.title()} of run {request.run.pk}"
        else:
            query, what = {}, name.title()
        suffix = f"?{urlencode(query)}" if query else ""
        links.append(
            (
                what,
                reverse("stats_api:raw-export", args=[name, "csv"]) + suffix,
                reverse("stats_api:raw-export", args=[name, "jsonl"]) + suffix,
            )
        )
    return links
