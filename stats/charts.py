"""Server-side SVG charts: the geometry is computed here, the markup is drawn by
``templates/components/svg_chart.html`` (so every label is escaped by the template engine).
Nothing is fetched from anywhere at run time.

A ``Chart`` is a list of shapes in a fixed-size view box; the builders below make the six
kinds the dashboard uses: CI bars (leaderboard, preference), grouped CI bars (phase breakdown),
stacked shares (failure modes), a scatter with CI whiskers (style sensitivity), intervals on
the data's own scale (the arena's ratings) and a heatmap of shares (the arena's win rates).

Every mark carries its value as a ``<title>`` (the browser's tooltip on hover, read out by
screen readers): a bar, its CI whiskers and its value label, a share, a point, a cell. A row of
bars or intervals also gets an invisible ``hit`` rectangle across the whole row with the same
title, so that a mark too thin to point at still shows its value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TypeGuard

WIDTH = 640
LABEL_W = 190
RIGHT_PAD = 60
ROW_H = 28
TOP = 28
# Labels are 14 view-box units tall (app.css: figure.chart svg); a row's text sits on this line.
TEXT_DY = 19


@dataclass(frozen=True)
class Shape:
    kind: str  # rect, line, text, circle; hit: an invisible rect that only holds a title
    x: float = 0
    y: float = 0
    w: float = 0
    h: float = 0
    x2: float = 0
    y2: float = 0
    r: float = 0
    css: str = ""
    text: str = ""
    title: str = ""
    anchor: str = "start"


@dataclass
class Chart:
    title: str
    width: int
    height: int
    shapes: list[Shape] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)  # (css class, label)

    def add(self, kind: str, **fields) -> None:
        self.shapes.append(Shape(kind, **fields))


def _ok(value: float | None) -> TypeGuard[float]:
    # TypeGuard, not TypeIs: a NaN is a float that is still not a value.
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _pct(value: float | None) -> str:
    return f"{100 * value:.1f}%" if _ok(value) else "n/a"


def _axis(chart: Chart, x0: float, x1: float, y0: float, y1: float, ticks=(0, 0.25, 0.5, 0.75, 1)):
    for tick in ticks:
        x = x0 + tick * (x1 - x0)
        chart.add("line", x=x, y=y0, x2=x, y2=y1, css="grid")
        chart.add("text", x=x, y=y0 - 6, text=f"{int(tick * 100)}%", css="tick", anchor="middle")


def ci_bars(
    rows: list[tuple[str, float, float, float]],
    *,
    title: str,
    reference: float | None = None,
    css: str = "bar",
) -> Chart:
    """One horizontal bar per row (label, value, CI low, CI high) on a 0–100 % axis, whiskers
    for the CI, an optional dashed reference line (e.g. 50 % for a preference)."""
    plot_w = WIDTH - LABEL_W - RIGHT_PAD
    height = TOP + ROW_H * len(rows) + 10
    chart = Chart(title, WIDTH, height)
    _axis(chart, LABEL_W, LABEL_W + plot_w, TOP, height - 8)
    if reference is not None:
        x = LABEL_W + reference * plot_w
        chart.add("line", x=x, y=TOP - 2, x2=x, y2=height - 8, css="reference")
    for i, (label, value, low, high) in enumerate(rows):
        y = TOP + i * ROW_H
        if not _ok(value):
            chart.add("text", x=LABEL_W - 8, y=y + TEXT_DY, text=label, css="label", anchor="end")
            chart.add("text", x=LABEL_W + 4, y=y + TEXT_DY, text="no data", css="tick")
            continue
        ci = f" [{_pct(low)}, {_pct(high)}]" if _ok(low) else ""
        title = f"{label}: {_pct(value)}{ci}"
        chart.add("hit", x=0, y=y, w=WIDTH, h=ROW_H, title=title)
        chart.add(
            "text", x=LABEL_W - 8, y=y + TEXT_DY, text=label, css="label", anchor="end", title=title
        )
        chart.add(
            "rect",
            x=LABEL_W,
            y=y + 5,
            w=max(value * plot_w, 0.5),
            h=ROW_H - 10,
            css=css,
            title=title,
        )
        if _ok(low) and _ok(high):
            cy = y + ROW_H / 2
            x_low, x_high = LABEL_W + low * plot_w, LABEL_W + high * plot_w
            chart.add("line", x=x_low, y=cy, x2=x_high, y2=cy, css="whisker", title=title)
            for x in (x_low, x_high):
                chart.add("line", x=x, y=cy - 5, x2=x, y2=cy + 5, css="whisker", title=title)
        chart.add(
            "text",
            x=LABEL_W + plot_w + 6,
            y=y + TEXT_DY,
            text=_pct(value),
            css="value",
            title=title,
        )
    return chart


def grouped_ci_bars(
    groups: list[tuple[str, list[tuple[str, float, float, float]]]],
    *,
    title: str,
    series: list[tuple[str, str]],
) -> Chart:
    """Per group (a model), one thin bar per series (a trigger type) with CI whiskers.
    ``series`` is [(key, css class)] in drawing order."""
    plot_w = WIDTH - LABEL_W - RIGHT_PAD
    bar_h = 11
    group_h = bar_h * len(series) + 12
    height = TOP + group_h * len(groups) + 10
    chart = Chart(title, WIDTH, height, legend=[(css, key.title()) for key, css in series])
    _axis(chart, LABEL_W, LABEL_W + plot_w, TOP, height - 8)
    css_of = dict(series)
    order = [key for key, _ in series]
    for g, (label, bars) in enumerate(groups):
        y0 = TOP + g * group_h
        chart.add(
            "text", x=LABEL_W - 8, y=y0 + group_h / 2 + 5, text=label, css="label", anchor="end"
        )
        values = {key: (value, low, high) for key, value, low, high in bars}
        for s, key in enumerate(order):
            if key not in values or not _ok(values[key][0]):
                continue
            value, low, high = values[key]
            y = y0 + 5 + s * bar_h
            title = f"{label} · {key.title()}: {_pct(value)} [{_pct(low)}, {_pct(high)}]"
            chart.add("hit", x=0, y=y, w=WIDTH, h=bar_h, title=title)
            chart.add(
                "rect",
                x=LABEL_W,
                y=y,
                w=max(value * plot_w, 0.5),
                h=bar_h - 2,
                css=css_of[key],
                title=title,
            )
            if _ok(low) and _ok(high):
                cy = y + (bar_h - 2) / 2
                chart.add(
                    "line",
                    x=LABEL_W + low * plot_w,
                    y=cy,
                    x2=LABEL_W + high * plot_w,
                    y2=cy,
                    css="whisker",
                    title=title,
                )
    return chart


def stacked_shares(
    rows: list[tuple[str, list[tuple[str, float]]]],
    *,
    title: str,
    categories: list[tuple[str, str, str]],
) -> Chart:
    """One 100 % bar per row, split into the categories' shares. ``categories`` is
    [(key, label, css class)]."""
    plot_w = WIDTH - LABEL_W - RIGHT_PAD
    height = TOP + ROW_H * len(rows) + 10
    chart = Chart(title, WIDTH, height, legend=[(css, label) for _, label, css in categories])
    _axis(chart, LABEL_W, LABEL_W + plot_w, TOP, height - 8)
    labels = {key: (label, css) for key, label, css in categories}
    for i, (row_label, shares) in enumerate(rows):
        y = TOP + i * ROW_H
        summary = "; ".join(
            f"{labels[key][0]} {_pct(share)}" for key, share in shares if _ok(share) and share > 0
        )
        title = f"{row_label}: {summary or 'no data'}"
        chart.add("hit", x=0, y=y, w=WIDTH, h=ROW_H, title=title)
        chart.add(
            "text", x=LABEL_W - 8, y=y + TEXT_DY, text=row_label, css="label", anchor="end",
            title=title,
        )  # fmt: skip
        x: float = LABEL_W
        for key, share in shares:
            if not _ok(share) or share <= 0:
                continue
            label, css = labels[key]
            chart.add(
                "rect",
                x=x,
                y=y + 5,
                w=share * plot_w,
                h=ROW_H - 10,
                css=css,
                title=f"{row_label} · {label}: {_pct(share)}",
            )
            x += share * plot_w
    return chart


def scatter(
    points: list[tuple[str, float, float, float, float]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    reference_y: float | None = None,
) -> Chart:
    """Labelled points (label, x in 0–1, y, y CI low, y CI high) with vertical CI whiskers; the
    y axis spans the data (and the reference line)."""
    height = 350
    left, right, top, bottom = 60, WIDTH - 24, 36, height - 48
    chart = Chart(title, WIDTH, height)
    values = [v for _, _, y, lo, hi in points for v in (y, lo, hi) if _ok(v)]
    if reference_y is not None:
        values.append(reference_y)
    y_min, y_max = (min(values), max(values)) if values else (0.0, 1.0)
    if y_max - y_min < 1e-9:
        y_min, y_max = y_min - 1, y_max + 1
    pad = (y_max - y_min) * 0.08
    y_min, y_max = y_min - pad, y_max + pad

    def sx(x: float) -> float:
        return left + x * (right - left)

    def sy(y: float) -> float:
        return bottom - (y - y_min) / (y_max - y_min) * (bottom - top)

    for tick in (0, 0.25, 0.5, 0.75, 1):
        chart.add("line", x=sx(tick), y=top, x2=sx(tick), y2=bottom, css="grid")
        chart.add(
            "text",
            x=sx(tick),
            y=bottom + 16,
            text=f"{int(tick * 100)}%",
            css="tick",
            anchor="middle",
        )
    for i in range(5):
        value = y_min + (y_max - y_min) * i / 4
        chart.add("line", x=left, y=sy(value), x2=right, y2=sy(value), css="grid")
        chart.add(
            "text", x=left - 6, y=sy(value) + 4, text=f"{value:.2f}", css="tick", anchor="end"
        )
    if reference_y is not None:
        chart.add("line", x=left, y=sy(reference_y), x2=right, y2=sy(reference_y), css="reference")
    chart.add(
        "text", x=(left + right) / 2, y=height - 8, text=x_label, css="axis-label", anchor="middle"
    )
    chart.add("text", x=12, y=top - 16, text=y_label, css="axis-label")
    for label, x, y, low, high in points:
        if not (_ok(x) and _ok(y)):
            continue
        ci = f" [{low:.2f}, {high:.2f}]" if _ok(low) and _ok(high) else ""
        title = f"{label}: {x_label} {_pct(x)}, {y_label} {y:.2f}{ci}"
        if _ok(low) and _ok(high):
            chart.add("line", x=sx(x), y=sy(low), x2=sx(x), y2=sy(high), css="whisker", title=title)
        chart.add("circle", x=sx(x), y=sy(y), r=5, css="point", title=title)
        right_half = x > 0.6  # keep the label inside the plot
        chart.add(
            "text",
            x=sx(x) + (-6 if right_half else 6),
            y=sy(y) - 6,
            text=label,
            css="point-label",
            anchor="end" if right_half else "start",
            title=title,
        )
    return chart


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values (steps of 1, 2 or 5 × a power of ten) covering
    [low, high]."""
    if not high > low:
        low, high = low - 1, high + 1
    raw = (high - low) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    return [first + k * step for k in range(math.ceil((high - first) / step) + 1)]


def intervals(
    rows: list[tuple[str, float, float, float, str]],
    *,
    title: str,
    reference: float | None = None,
    digits: int = 0,
) -> Chart:
    """One row per entry (label, value, CI low, CI high, detail): a point at the value with
    whiskers for the CI, on an axis spanning the data (not 0–100 %), an optional dashed
    reference line; the point's tooltip holds the value, the interval and the detail."""
    plot_w = WIDTH - LABEL_W - RIGHT_PAD
    height = TOP + ROW_H * len(rows) + 10
    chart = Chart(title, WIDTH, height)
    values = [v for _, value, low, high, _ in rows for v in (value, low, high) if _ok(v)]
    if reference is not None:
        values.append(reference)
    ticks = nice_ticks(min(values), max(values)) if values else [0.0, 1.0]
    x_min, x_max = ticks[0], ticks[-1]

    def sx(x: float) -> float:
        return LABEL_W + (x - x_min) / (x_max - x_min) * plot_w

    for tick in ticks:
        chart.add("line", x=sx(tick), y=TOP, x2=sx(tick), y2=height - 8, css="grid")
        chart.add("text", x=sx(tick), y=TOP - 6, text=f"{tick:g}", css="tick", anchor="middle")
    if reference is not None:
        x = sx(reference)
        chart.add("line", x=x, y=TOP - 2, x2=x, y2=height - 8, css="reference")
    for i, (label, value, low, high, detail) in enumerate(rows):
        y = TOP + i * ROW_H
        cy = y + ROW_H / 2
        if not _ok(value):
            chart.add("text", x=LABEL_W - 8, y=y + TEXT_DY, text=label, css="label", anchor="end")
            chart.add("text", x=LABEL_W + 4, y=y + TEXT_DY, text="no data", css="tick")
            continue
        shown = f"{value:.{digits}f}"
        interval = f" [{low:.{digits}f}, {high:.{digits}f}]" if _ok(low) and _ok(high) else ""
        title = f"{label}: {shown}{interval}" + (f" · {detail}" if detail else "")
        chart.add("hit", x=0, y=y, w=WIDTH, h=ROW_H, title=title)
        chart.add(
            "text", x=LABEL_W - 8, y=y + TEXT_DY, text=label, css="label", anchor="end", title=title
        )
        if _ok(low) and _ok(high):
            chart.add("line", x=sx(low), y=cy, x2=sx(high), y2=cy, css="whisker", title=title)
            for x in (sx(low), sx(high)):
                chart.add("line", x=x, y=cy - 5, x2=x, y2=cy + 5, css="whisker", title=title)
        chart.add("circle", x=sx(value), y=cy, r=5, css="point", title=title)
        chart.add(
            "text", x=LABEL_W + plot_w + 6, y=y + TEXT_DY, text=shown, css="value", title=title
        )
    return chart


HEAT_STEPS = 10  # a share's colour class: heat-0 (0 %) … heat-10 (100 %), in 10 % steps
HEAT_CELL = 40  # the largest cell side; more labels make the cells smaller


def heatmap(
    labels: list[str],
    cells: dict[tuple[int, int], tuple[float, str]],
    *,
    title: str,
) -> Chart:
    """A square matrix of shares: row i, column j coloured by ``cells[(i, j)]``'s share (0–1)
    with its percentage written in the cell when it fits, and the cell's tooltip. Rows are
    labelled ``n. label``, columns by ``n``; the diagonal and cells not given are blank."""
    size = len(labels)
    cell = min(HEAT_CELL, (WIDTH - LABEL_W - 10) / max(size, 1))
    height = TOP + cell * size + 10
    legend = [("heat-0", "0 %"), ("heat-5", "50 %"), (f"heat-{HEAT_STEPS}", "100 %")]
    chart = Chart(title, WIDTH, int(math.ceil(height)), legend=legend)
    for j in range(size):
        x = LABEL_W + j * cell + cell / 2
        chart.add("text", x=x, y=TOP - 6, text=str(j + 1), css="tick", anchor="middle")
    for i, label in enumerate(labels):
        y = TOP + i * cell
        chart.add(
            "text",
            x=LABEL_W - 8,
            y=y + cell / 2 + 4,
            text=f"{i + 1}. {label}",
            css="label",
            anchor="end",
        )
        for j in range(size):
            x = LABEL_W + j * cell
            share, tooltip = cells.get((i, j), (math.nan, ""))
            if i == j or not _ok(share):
                css = "heat-self" if i == j else "heat-none"
                chart.add("rect", x=x, y=y, w=cell - 1, h=cell - 1, css=css, title=tooltip)
                continue
            step = round(min(max(share, 0.0), 1.0) * HEAT_STEPS)
            chart.add("rect", x=x, y=y, w=cell - 1, h=cell - 1, css=f"heat-{step}", title=tooltip)
            if cell >= 28:  # room for "100%"
                chart.add(
                    "text",
                    x=x + cell / 2,
                    y=y + cell / 2 + 4,
                    text=f"{100 * share:.0f}%",
                    css="cell-value",
                    anchor="middle",
                    title=tooltip,
                )
    return chart
