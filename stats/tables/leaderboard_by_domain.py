"""The leaderboard by domain: per model × domain and overall, the leaderboard's figures (n,
pass / partial rates, the weighted score, bootstrap CIs), then every model pooled per domain
(docs/statistics.md, "Leaderboard by domain")."""

from __future__ import annotations

from stats import selectors
from stats.compute.leaderboard import ALL, POOLED, leaderboard_by_domain
from stats.tables.base import RUN, Built, Cell, Column, Display, TableSpec, model_columns, register
from stats.tables.leaderboard import BOOTSTRAP, SCORE_CELLS, SCORE_COLUMNS, score_fields

ALL_DOMAINS = "All domains"
POOLED_DISPLAY = "All models (pooled)"

COLUMNS = (
    *model_columns(),
    Column("domain", "str", "ALL (every domain, micro-averaged) or the domain's key."),
    Column("domain_name", "str", "The domain's name (All domains for ALL)."),
    *SCORE_COLUMNS,
)


def build(request: selectors.TableRequest) -> Built:
    replies = selectors.replies_for(request)
    names = selectors.domain_names()
    rows = leaderboard_by_domain(
        models=replies.model,
        domains=replies.domain,
        order=list(names),
        clusters=replies.trigger_id,
        verdicts=replies.verdict,
        resamples=BOOTSTRAP.resamples,
        seed=request.seed,
    )
    display = {**replies.display, POOLED: POOLED_DISPLAY}
    out = [
        {
            **score_fields(
                row,
                display=display,
                condition=str(request.condition),
                verdicts=request.verdicts.label,
            ),
            "domain": row.group,
            "domain_name": ALL_DOMAINS if row.group == ALL else names.get(row.group, row.group),
        }
        for row in rows
    ]
    return out, []


LEADERBOARD_BY_DOMAIN = register(
    TableSpec(
        name="leaderboard-by-domain",
        title="Leaderboard by domain",
        description="Per model x domain and overall, then every model pooled per domain: n, "
        "pass rate, partial rate, weighted score, bootstrap CIs.",
        columns=COLUMNS,
        needs=RUN,
        build=build,
        display=Display(
            # A model's ALL row (its leaderboard row) names it; its domain rows, indented, name
            # the domain; the pooled model comes last.
            overall=("domain", ALL),
            row_class="phase",
            empty="No replies in this condition.",
            cells=(Cell("Model", "domain_name", overall="model_display"), *SCORE_CELLS),
        ),
        bootstrap=BOOTSTRAP,
    )
)
