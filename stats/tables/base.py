"""What a statistics table is, and the registry of them.

A ``TableSpec`` declares one table once: its name (the URL slug, the ``export_stats`` choice,
the dashboard section's id), title, description and columns (both feed the OpenAPI schema),
what it needs (a run, or a study), the builder that turns a ``TableRequest`` into rows and
notes, and optionally how the dashboard shows it (``Display``) and its charts. The dashboard,
the REST API, its schema and ``export_stats`` read the registry and nothing else, so adding a
table is writing one module that registers its spec (docs/statistics.md, "Adding a statistics
table").

A ``Table`` is one computed result: named columns with a type and a description, rows as dicts.
Rates and shares are proportions (0–1), never percentages; a value that is undefined (no data, a
degenerate resample) is NaN here, ``null`` in JSON and an empty field in CSV.

Nothing here touches the ORM; builders reach the data through ``stats.selectors``.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

import numpy as np

from core.registry import Registry

if TYPE_CHECKING:
    from stats.charts import Chart
    from stats.selectors import TableRequest

RUN: Final = "run"
STUDY: Final = "study"
Needs = Literal["run", "study"]


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # str, int, float, bool
    description: str


@dataclass
class Table:
    name: str
    title: str
    columns: tuple[Column, ...]
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def as_json(self) -> dict[str, Any]:
        """JSON-ready: NaN becomes null (JSON has no NaN)."""
        return {
            "table": self.name,
            "title": self.title,
            "params": self.params,
            "columns": self.column_names,
            "rows": [{k: json_value(row.get(k)) for k in self.column_names} for row in self.rows],
            "notes": self.notes,
        }


def json_value(value: Any) -> Any:
    if isinstance(value, np.generic):  # NumPy scalars as Python ones
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def ci_columns(prefix: str, what: str) -> tuple[Column, Column]:
    return (
        Column(f"{prefix}_ci_low", "float", f"Lower end of the 95% CI of {what}."),
        Column(f"{prefix}_ci_high", "float", f"Upper end of the 95% CI of {what}."),
    )


def model_columns() -> tuple[Column, Column]:
    return (
        Column("model", "str", "The model's endpoint handle (unique)."),
        Column("model_display", "str", "The model's display name."),
    )


# --- How the dashboard shows a table ----------------------------------------------------------

FORMATS = ("text", "title", "pct", "num", "pvalue", "trigger")
"""A cell's value as: itself; Title-cased (EMERGENT → Emergent); a percentage with one decimal;
a number with ``digits`` decimals (3 unless said); a p-value (3 decimals, or 2.6e-13 below
0.001); a trigger type's badge. Undefined values (None, NaN) show as a dash."""


@dataclass(frozen=True)
class Aside:
    """Text after a cell's value, on the rows where ``when(row)`` holds: muted, or a warning
    badge. ``text`` is a ``str.format`` template over the row whose fields may name a format,
    e.g. ``"({n_models} models, p {kendall_p:pvalue})"``."""

    text: str
    when: Callable[[dict[str, Any]], bool]
    badge: bool = False
    title: str = ""

    def columns(self) -> list[str]:
        return [name for _, name, _, _ in string.Formatter().parse(self.text) if name]


@dataclass(frozen=True)
class Cell:
    """One column of the dashboard's table: a header (may be marked safe for markup such as
    ``<sub>``) and what each row shows under it."""

    header: str
    column: str = ""  # the row's value shown (a table column or a ``Display.derive`` name)
    format: str = "text"  # one of FORMATS
    digits: int | None = None  # decimals for num
    ci: tuple[str, str] | None = None  # "[low, high]" in the same format: muted after the value,
    # or the cell's whole content when there is no column
    also: str = ""  # a second value in brackets after the first: "144 (12)"
    fallback: str = ""  # shown where ``column`` is empty
    overall: str = ""  # on the overall rows this column instead, in bold
    aside: Aside | None = None

    def columns(self) -> list[str]:
        """Every row value the cell shows."""
        shown = [self.column, *(self.ci or ()), self.also, self.fallback, self.overall]
        return [c for c in shown if c] + (self.aside.columns() if self.aside else [])


def ci_cell(header: str, prefix: str, format: str = "num") -> Cell:
    """The cell of ``prefix`` with its 95% CI (``ci_columns(prefix, …)``) after it: two
    decimals for a number."""
    return Cell(
        header,
        prefix,
        format,
        digits=2 if format == "num" else None,
        ci=(f"{prefix}_ci_low", f"{prefix}_ci_high"),
    )


@dataclass(frozen=True)
class Display:
    """How the dashboard shows a table: the cells of its table, and what surrounds it."""

    cells: tuple[Cell, ...]
    heading: str = ""  # the section's heading; the spec's title unless given
    overall: tuple[str, str] | None = None  # (column, value) of the totals rows: ALL, POOLED …
    row_class: str = ""  # the class of the other rows
    empty: str = ""  # the message in an empty table; without one an empty table is left out
    notes: bool = True
    note_link: tuple[str, str] | None = None  # (text, URL name): a link after each note
    derive: Mapping[str, Callable[[dict[str, Any]], Any]] = field(default_factory=dict)
    # values for the cells only, computed from a row (not part of the table's columns)
    template: str = "stats/panel.html"  # a table that needs more names its own panel template
    link: Callable[[dict[str, Any], TableRequest], str] | None = None
    # a page about the row (its first cell links there), e.g. the leaderboard cell's triggers


@dataclass(frozen=True)
class Bootstrap:
    """The resampling behind a table's intervals, for the dashboard's caption; the builder passes
    the same ``resamples`` to the computation."""

    resamples: int
    of: str  # what is resampled

    @property
    def caption(self) -> str:
        return f"bootstrap: {self.resamples:,} resamples of {self.of}"


Built = tuple[list[dict[str, Any]], list[str]]
"""What a builder returns: the rows, and notes for the reader."""


@dataclass(frozen=True, eq=False)
class TableSpec:
    name: str  # a slug: the URL, the command's choice, the dashboard section's id
    title: str
    description: str  # the API operation's description
    columns: tuple[Column, ...]
    # RUN: a run's verdicts (default: the pinned run, else the newest finished); STUDY: a study
    needs: Needs
    build: Callable[[TableRequest], Built]
    display: Display | None = None  # None: not on the dashboard (API and command only)
    charts: Callable[[Table], list[Chart]] | None = None  # drawn when the table has rows
    bootstrap: Bootstrap | None = None

    def table(self, request: TableRequest) -> Table:
        rows, notes = self.build(request)
        return Table(
            name=self.name,
            title=self.title,
            columns=self.columns,
            rows=rows,
            notes=list(notes),
            params=request.params(),
        )

    @property
    def heading(self) -> str:
        return (self.display and self.display.heading) or self.title


# --- The registry -----------------------------------------------------------------------------

SLUG = re.compile(r"[-a-zA-Z0-9_]+")


class UnknownTable(LookupError):
    pass


def _check(spec: TableSpec) -> None:
    """Fail at import, not on a page: a name that cannot be a URL, a cell showing a column the
    table does not have, a format nobody draws."""
    if not SLUG.fullmatch(spec.name):
        raise ValueError(f"table name {spec.name!r} is not a slug")
    if spec.needs not in (RUN, STUDY):
        raise ValueError(f"table {spec.name}: needs is {RUN!r} or {STUDY!r}")
    if spec.display is None:
        return
    known = {c.name for c in spec.columns} | set(spec.display.derive)
    for cell in spec.display.cells:
        if cell.format not in FORMATS:
            raise ValueError(f"table {spec.name}, {cell.header}: unknown format {cell.format!r}")
        missing = [c for c in cell.columns() if c not in known]
        if missing:
            raise ValueError(f"table {spec.name}, {cell.header}: no column {', '.join(missing)}")


TABLES: Registry[TableSpec] = Registry(
    "table", key=lambda spec: spec.name, check=_check, unknown=UnknownTable
)
register = TABLES.register
unregister = TABLES.unregister
registered = TABLES.registered
get = TABLES.get


def all_specs() -> tuple[TableSpec, ...]:
    """Every registered table, in registration order (the dashboard's order of panels)."""
    return TABLES.all()
