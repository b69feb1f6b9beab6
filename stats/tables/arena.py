"""The arena's ranking: Bradley–Terry ratings of the reply sources of a study's battles on the
Elo-like scale, with bootstrap CIs and ranks (``arena-ranking``), and per pair of sources the
observed and the fitted win rates (``arena-pairs``); docs/statistics.md, "Arena ranking tables".

Both tables read the same battles (``selectors.battles_for``: an arena or pairwise study's
live answers) and the same fit, made once per request. Request options: ``ties``
(half / exclude), ``anchor`` (a source fixed at the base rating), ``resamples`` (bounded:
``BATTLE_RESAMPLES_RANGE``), ``seed``, ``include_excluded``. A comparison graph that is not
connected is a ``StatsInputError`` naming its groups — never a number.
"""

from __future__ import annotations

from typing import Any, cast

from stats import charts, selectors
from stats.compute.bradley_terry import (
    BASE_RATING,
    ODDS_BASE,
    SCALE,
    TIE_RULES,
    BradleyTerryResult,
    RankingError,
    TieRule,
    bradley_terry,
)
from stats.compute.resampling import BATTLE_RESAMPLES, BATTLE_RESAMPLES_RANGE
from stats.tables.base import (
    STUDY,
    Bootstrap,
    Built,
    Cell,
    Column,
    Display,
    Table,
    TableSpec,
    ci_columns,
    register,
)

RANKING, PAIRS = "arena-ranking", "arena-pairs"
JUDGE_PANELS = (RANKING, PAIRS)
"""The tables the dashboard also draws in a run's section when the run has LLM pairwise judges:
the chosen judge's battles (``battles=judge``), beside the consistency table's flip rates."""
BOOTSTRAP = Bootstrap(BATTLE_RESAMPLES, "battles (seeded)")

RANKING_COLUMNS = (
    Column(
        "rank",
        "int",
        "1 + the number of sources whose 95% CI lies entirely above this one's (Chatbot "
        "Arena's convention): sources whose intervals overlap share a rank.",
    ),
    Column("source", "str", "The reply source (model, with condition or run where they vary)."),
    Column(
        "rating",
        "float",
        "Bradley–Terry rating on the Elo-like scale: P(i beats j) = 1 / (1 + 10^((R_j − R_i) / "
        "400)); the mean rating (or the anchor's) is 1000.",
    ),
    *ci_columns("rating", "the rating (percentile bootstrap over battles)"),
    Column("battles", "int", "Battles in the fit (ties included under ties=half)."),
    Column("wins", "int", "Battles it won."),
    Column("ties", "int", "Ties (tie or tie (bothbad)), counted in the fit or not."),
    Column("losses", "int", "Battles it lost."),
    Column(
        "win_rate",
        "float",
        "Its observed share of its battles in the fit: (wins + ties / 2) / battles under "
        "ties=half, wins / battles under ties=exclude.",
    ),
)

PAIR_COLUMNS = (
    Column("source_a", "str", "The better-rated source of the pair."),
    Column("source_b", "str", "The other source."),
    Column("comparisons", "int", "Battles between them in the fit."),
    Column("wins", "int", "Battles source_a won against source_b."),
    Column("ties", "int", "Ties between them (tie or tie (bothbad)), counted in the fit or not."),
    Column("losses", "int", "Battles source_a lost against source_b."),
    Column(
        "observed",
        "float",
        "source_a's observed win rate against source_b: a tie half a win (ties=half), or ties "
        "left out (ties=exclude); empty when they never met.",
    ),
    Column(
        "predicted",
        "float",
        "The fit's probability that source_a beats source_b: 1 / (1 + 10^((R_b − R_a) / 400)).",
    ),
)

TIE_NOTES = {
    "half": "ties (tie and tie (bothbad) alike) count as half a win to each side (ties=half; "
    "ties=exclude leaves them out)",
    "exclude": "ties (tie and tie (bothbad) alike) are left out of the fit, the win rates and "
    "the comparisons (ties=exclude; ties=half counts each as half a win to each side)",
}


def check_options(request: selectors.TableRequest) -> None:
    """The ranking options, checked before anything is read."""
    if request.ties not in TIE_RULES:
        raise selectors.StatsInputError(f"ties is {' or '.join(TIE_RULES)}, not {request.ties!r}")
    low, high = BATTLE_RESAMPLES_RANGE
    if not low <= request.resamples <= high:
        raise selectors.StatsInputError(
            f"resamples is between {low:,} and {high:,}, not {request.resamples:,}"
        )


def ranking_for(
    request: selectors.TableRequest, *, table: str
) -> tuple[BradleyTerryResult | None, list[str]]:
    """The Bradley–Terry fit of the request's battles (None when there are none yet) and the
    notes of both tables; fitted once per request."""
    check_options(request)
    if "bradley-terry" in request.cache:
        return request.cache["bradley-terry"]
    battles, notes = selectors.battles_for(request, table=table)
    notes = list(notes)
    if request.anchor and request.anchor not in battles.sources:
        raise selectors.StatsInputError(
            f"anchor {request.anchor!r} is not one of the sources: "
            f"{', '.join(battles.sources) or 'none yet'}"
        )
    if len(battles) == 0:
        result: tuple[BradleyTerryResult | None, list[str]] = (None, notes)
        request.cache["bradley-terry"] = result
        return result
    try:
        fit = bradley_terry(
            battles,
            ties=cast(TieRule, request.ties),  # one of TIE_RULES: checked above
            resamples=request.resamples,
            seed=request.seed,
            anchor=request.anchor or None,
        )
    except RankingError as exc:  # disconnected groups (named), one source, only ties left out
        raise selectors.StatsInputError(str(exc)) from exc
    anchored = (
        f"{fit.anchor} fixed at {fit.base:g} (anchor; its interval is a point)"
        if fit.anchor
        else f"the mean rating is {fit.base:g} (anchor=SOURCE fixes one source there instead)"
    )
    notes += [
        f"{fit.n_battles:,} battles in the fit among {len(fit.sources)} sources; {fit.n_ties:,} "
        f"of all battles are ties: {TIE_NOTES[fit.tie_rule]}",
        f"Bradley–Terry maximum likelihood (normal prior, sd {fit.prior_sd:g} in log-strength); "
        f"Elo-like scale: {SCALE:g} points per factor of {ODDS_BASE:g} in the odds of winning; "
        f"{anchored}",
        f"95% CIs: percentile bootstrap, {fit.resamples:,} resamples of the battles, seed "
        f"{request.seed}; rank = 1 + the sources whose interval lies entirely above",
        *fit.notes(),
    ]
    request.cache["bradley-terry"] = (fit, notes)
    return fit, notes


def ranking_rows(fit: BradleyTerryResult) -> list[dict[str, Any]]:
    rows = []
    for r in fit.rows():
        score = r.wins + (r.ties / 2 if fit.tie_rule == "half" else 0)
        rows.append(
            {
                "rank": r.rank,
                "source": r.source,
                "rating": r.rating,
                "rating_ci_low": r.ci_low,
                "rating_ci_high": r.ci_high,
                "battles": r.battles,
                "wins": r.wins,
                "ties": r.ties,
                "losses": r.losses,
                "win_rate": score / r.battles if r.battles else float("nan"),
            }
        )
    return rows


def pair_rows(fit: BradleyTerryResult) -> list[dict[str, Any]]:
    """Every pair of sources once, in the ranking's order: source_a the better-rated, rows by
    source_a's place, then source_b's."""
    order = [fit.sources.index(r.source) for r in fit.rows()]
    rows = []
    for place, i in enumerate(order):
        for j in order[place + 1 :]:
            rows.append(
                {
                    "source_a": fit.sources[i],
                    "source_b": fit.sources[j],
                    "comparisons": int(fit.comparisons[i, j]),
                    "wins": int(fit.wins[i, j]),
                    "ties": int(fit.ties[i, j]),
                    "losses": int(fit.wins[j, i]),
                    "observed": float(fit.win_rate[i, j]),
                    "predicted": float(fit.predicted[i, j]),
                }
            )
    return rows


def build_ranking(request: selectors.TableRequest) -> Built:
    fit, notes = ranking_for(request, table=RANKING)
    return (ranking_rows(fit) if fit else []), notes


def build_pairs(request: selectors.TableRequest) -> Built:
    fit, notes = ranking_for(request, table=PAIRS)
    return (pair_rows(fit) if fit else []), notes


def ranking_chart(table: Table) -> list[charts.Chart]:
    anchor = table.params.get("anchor")
    return [
        charts.intervals(
            [
                (
                    r["source"],
                    r["rating"],
                    r["rating_ci_low"],
                    r["rating_ci_high"],
                    f"rank {r['rank']} · {r['battles']:,} battles ({r['wins']} won, "
                    f"{r['ties']} ties, {r['losses']} lost)",
                )
                for r in table.rows
            ],
            title="Rating (Bradley–Terry, Elo-like scale; 95% bootstrap CI)"
            + (f"; {anchor} = {BASE_RATING:g}" if anchor else f"; mean {BASE_RATING:g}"),
            reference=BASE_RATING,
        )
    ]


def win_rate_chart(table: Table) -> list[charts.Chart]:
    """The observed win-rate matrix, row source against column source, in the ranking's order
    (the rows' order: ``pair_rows``)."""
    sources: list[str] = []
    for row in table.rows:
        for source in (row["source_a"], row["source_b"]):
            if source not in sources:
                sources.append(source)
    place = {source: k for k, source in enumerate(sources)}
    cells: dict[tuple[int, int], tuple[float, str]] = {}
    for r in table.rows:
        i, j = place[r["source_a"]], place[r["source_b"]]
        for (first, second), (won, lost), observed, predicted in (
            ((i, j), (r["wins"], r["losses"]), r["observed"], r["predicted"]),
            ((j, i), (r["losses"], r["wins"]), 1 - r["observed"], 1 - r["predicted"]),
        ):
            a, b = sources[first], sources[second]
            if r["comparisons"]:
                tooltip = (
                    f"{a} vs {b}: won {100 * observed:.1f}% of {r['comparisons']} "
                    f"({won} won, {r['ties']} ties, {lost} lost); predicted {100 * predicted:.1f}%"
                )
            else:
                tooltip = f"{a} vs {b}: never met; predicted {100 * predicted:.1f}%"
            cells[(first, second)] = (observed, tooltip)
    return [
        charts.heatmap(
            sources,
            cells,
            title="Observed win rate, row source against column source (ties as the table "
            "counts them)",
        )
    ]


ARENA_RANKING = register(
    TableSpec(
        name=RANKING,
        title="Arena ranking",
        description="Per reply source of an arena or pairwise study's battles: Bradley–Terry "
        "rating on the Elo-like scale with a seeded bootstrap 95% CI, rank (shared where "
        "intervals overlap), battles, wins, ties, losses. Options: ties, anchor, resamples, "
        "seed; a comparison graph that is not connected is a 400 naming its groups.",
        columns=RANKING_COLUMNS,
        needs=STUDY,
        build=build_ranking,
        display=Display(
            empty="No battles yet.",
            cells=(
                Cell("Rank", "rank"),
                Cell("Source", "source"),
                Cell(
                    "Rating [95% CI]",
                    "rating",
                    "num",
                    digits=0,
                    ci=("rating_ci_low", "rating_ci_high"),
                ),
                Cell("Battles", "battles"),
                Cell("Won", "wins"),
                Cell("Ties", "ties"),
                Cell("Lost", "losses"),
                Cell("Win %", "win_rate", "pct"),
            ),
        ),
        charts=ranking_chart,
        bootstrap=BOOTSTRAP,
    )
)

ARENA_PAIRS = register(
    TableSpec(
        name=PAIRS,
        title="Arena pairs",
        description="Per pair of sources of an arena or pairwise study's battles: comparisons, "
        "wins, ties, losses, the observed win rate of the better-rated and the Bradley–Terry "
        "fit's predicted one. Same options and messages as arena-ranking.",
        columns=PAIR_COLUMNS,
        needs=STUDY,
        build=build_pairs,
        display=Display(
            notes=False,  # the ranking panel's notes: the same battles and fit
            empty="No battles yet.",
            cells=(
                Cell("Source A", "source_a"),
                Cell("Source B", "source_b"),
                Cell("Battles", "comparisons"),
                Cell("A won", "wins"),
                Cell("Ties", "ties"),
                Cell("A lost", "losses"),
                Cell("Observed A %", "observed", "pct"),
                Cell("Predicted A %", "predicted", "pct"),
            ),
        ),
        charts=win_rate_chart,
    )
)
