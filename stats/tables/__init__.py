"""Every statistics table the Workbench serves: one module per table declares its ``TableSpec``
(columns, builder, dashboard display, charts) and registers it; the dashboard, the REST API and
its schema, and ``export_stats`` read the registry (``all_specs``, ``get``) and nothing else.
"""

from importlib import import_module

from stats.selectors import StatsInputError, TableRequest
from stats.tables.base import (
    RUN,
    STUDY,
    Aside,
    Bootstrap,
    Built,
    Cell,
    Column,
    Display,
    Table,
    TableSpec,
    UnknownTable,
    all_specs,
    get,
    json_value,
    register,
    registered,
    unregister,
)

TABLE_MODULES = (
    "leaderboard",
    "leaderboard_by_domain",
    "injection_effect",
    "judge_agreement",
    "judge_self_consistency",
    "pairwise_judge_consistency",
    "style",
    "disclosure",
    "benchmark_correlation",
    "preference",
    "arena",
    "pairwise_judge_human",
    "failure_modes",
    "failure_modes_llm",
    "failure_modes_llm_vs_human",
    "proposals",
    "human_agreement",
    "judge_human_alignment",
    # HALO diagnosis studies (issue #17)
    "halo",
    "halo_comparison",
)
"""The table modules, listed rather than discovered: importing them registers their tables, and
this order is the registration order — the order of the dashboard's panels (run tables, then
study tables), of the API's operations and of ``export_stats``' choices, chosen for reading
rather than left to the alphabet."""

for _module in TABLE_MODULES:
    import_module(f"{__name__}.{_module}")

__all__ = [
    "RUN",
    "STUDY",
    "TABLE_MODULES",
    "Aside",
    "Bootstrap",
    "Built",
    "Cell",
    "Column",
    "Display",
    "Table",
    "TableSpec",
    "UnknownTable",
    "all_specs",
    "get",
    "json_value",
    "register",
    "registered",
    "unregister",
]


def build(name: str, request: TableRequest) -> Table:
    """The registered table ``name`` for ``request``; ``StatsInputError`` if there is no such
    table or the data cannot answer it."""
    try:
        spec = get(name)
    except UnknownTable as exc:
        raise StatsInputError(str(exc)) from None
    return spec.table(request)
