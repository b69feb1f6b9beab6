"""What the researcher dashboard shows for one set of filters: each panel's table, its chart
and the CSV link (the REST API's, so the page and scripts get the very same numbers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.urls import reverse

from benchmark.vocabulary import FAILURE_MODES
from stats import charts, selectors, studies
from stats.compute.leaderboard import ALL, TYPE_ORDER
from stats.exports import RAW_EXPORTS
from stats.tables import Table

PHASES = [(t, f"phase-{t.lower()}") for t in TYPE_ORDER]
FAILURE_MODE_STYLE = [
    (m, m.replace("_", " ").capitalize(), f"mode-{i}") for i, m in enumerate(FAILURE_MODES)
]


@dataclass
class Panel:
    name: str
    table: Table | None = None
    charts: list[charts.Chart] = field(default_factory=list)
    csv_url: str = ""
    json_url: str = ""
    error: str = ""


def _query(request: selectors.TableRequest) -> dict:
    query = {"verdicts": request.verdicts.label, "condition": str(request.condition)}
    if request.run is not None:
        query["run"] = request.run.pk
    if request.study is not None:
        query["study"] = request.study
        if request.include_excluded:
            query["include_excluded"] = "true"
    return query


def _panel(name: str, request: selectors.TableRequest) -> Panel:
    url = reverse(f"stats_api:table-{name}")
    query = _query(request)
    panel = Panel(
        name=name,
        csv_url=f"{url}?{urlencode({**query, 'format': 'csv'})}",
        json_url=f"{url}?{urlencode(query)}",
    )
    try:
        panel.table = selectors.stats_table(name, request)
    except selectors.StatsInputError as exc:
        panel.error = str(exc)
    return panel


def _label(row: dict) -> str:
    return row.get("model_display") or row["model"]


def leaderboard_charts(table: Table) -> list[charts.Chart]:
    overall = [r for r in table.rows if r["trigger_type"] == ALL]
    by_model: dict[str, list] = {}
    for row in table.rows:
        if row["trigger_type"] != ALL:
            by_model.setdefault(_label(row), []).append(
                (row["trigger_type"], row["pass_rate"], row["pass_ci_low"], row["pass_ci_high"])
            )
    return [
        charts.ci_bars(
            [(_label(r), r["pass_rate"], r["pass_ci_low"], r["pass_ci_high"]) for r in overall],
            title="Pass rate, all triggers (95% bootstrap CI)",
        ),
        charts.ci_bars(
            [
                (_label(r), r["weighted_score"], r["weighted_ci_low"], r["weighted_ci_high"])
                for r in overall
            ],
            title="Weighted score (Pass 1, Partial 0.5, Fail 0)",
            css="bar alt",
        ),
        charts.grouped_ci_bars(
            list(by_model.items()), title="Pass rate by phase (trigger type)", series=PHASES
        ),
    ]


def style_chart(table: Table) -> charts.Chart:
    return charts.scatter(
        [
            (_label(r), r["pass_rate"], r["slope"], r["slope_ci_low"], r["slope_ci_high"])
            for r in table.rows
        ],
        title="Style sensitivity: b_m against pass rate (1 = tracks style difficulty)",
        x_label="pass rate",
        y_label="b_m",
        reference_y=1.0,
    )


def failure_mode_chart(table: Table) -> charts.Chart:
    return charts.stacked_shares(
        [(r["model"], [(m, r[f"share_{m}"]) for m in FAILURE_MODES]) for r in table.rows],
        title="Failure modes of failed replies",
        categories=FAILURE_MODE_STYLE,
    )


def preference_chart(table: Table) -> charts.Chart:
    rows = [r for r in table.rows if r["raters"] == "all"]
    return charts.ci_bars(
        [
            (
                "All items" if r["stratum"] == ALL else f"Vanilla judged {r['stratum'].title()}",
                r["injected_rate"],
                r["bootstrap_low"],
                r["bootstrap_high"],
            )
            for r in rows
        ],
        title="Prefer the rubric-injected reply (ties excluded; item-clustered 95% CI)",
        reference=0.5,
    )


RUN_PANELS = (
    "leaderboard",
    "judge-agreement",
    "style-sensitivity",
    "disclosure-distance",
    "benchmark-correlation",
)
STUDY_PANELS = ("preference", "preference-raters", "failure-modes", "human-agreement")


def dashboard_panels(
    request: selectors.TableRequest, *, study_kind: str | None = None
) -> dict[str, Panel]:
    """Every panel for these filters: the run's (when there is a run) and, with a study of
    ``study_kind``, those of the tables that read its kind."""
    names = list(RUN_PANELS) if request.run is not None else []
    if request.study is not None and study_kind is not None:
        names += [n for n in STUDY_PANELS if n in studies.tables_for_kind(study_kind)]
    panels = {name: _panel(name, request) for name in names}
    chart_makers = {
        "leaderboard": leaderboard_charts,
        "style-sensitivity": lambda t: [style_chart(t)],
        "failure-modes": lambda t: [failure_mode_chart(t)],
        "preference": lambda t: [preference_chart(t)],
    }
    for name, make in chart_makers.items():
        panel = panels.get(name)
        if panel is not None and panel.table is not None and panel.table.rows:
            panel.charts = make(panel.table)
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
