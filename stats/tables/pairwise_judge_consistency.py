"""Pairwise judge consistency: each LLM pairwise judge of a run, on the comparisons it judged in
both orders — the share whose verdict survives the swap, the flip rate (the verdicts that do
not: position bias), side reversals, the share of decisive verdicts naming the reply shown
first, and ties (docs/statistics.md, "Pairwise judge consistency"). Only consistent verdicts
are battles for a ranking (``selectors.run_pairwise_battles``); this table says how many were
left out, per judge."""

from __future__ import annotations

from stats import selectors
from stats.compute.pairwise_consistency import pairwise_consistency
from stats.tables.base import (
    RUN,
    Aside,
    Built,
    Cell,
    Column,
    Display,
    TableSpec,
    ci_cell,
    ci_columns,
    register,
)

NAME = "pairwise-judge-consistency"

COLUMNS = (
    Column("judge", "str", "The pairwise judge, by the name its verdicts are stored under."),
    Column("n_comparisons", "int", "Comparisons the judge gave a usable verdict in both orders."),
    Column("n_consistent", "int", "Of those, the comparisons whose verdict survives the swap."),
    Column("consistent_share", "float", "n_consistent / n_comparisons."),
    Column(
        "flip_rate",
        "float",
        "Share of the comparisons whose verdict does not survive the swap (1 - consistent "
        "share); they are no battles in a ranking.",
    ),
    *ci_columns("flip_rate", "the flip rate (Wilson)"),
    Column(
        "n_side_reversals",
        "int",
        "Comparisons whose winner swapped sides with the order (A in one, B in the other).",
    ),
    Column("n_decisive", "int", "Verdicts (either order) naming a side rather than a tie."),
    Column(
        "first_position_share",
        "float",
        "Of the decisive verdicts, the share naming the reply shown first (0.5: no position bias).",
    ),
    *ci_columns("first_position_share", "the first-position share (Wilson)"),
    Column("first_position_p", "float", "Two-sided exact binomial p of that share against 0.5."),
    Column("tie_share", "float", "Share of the usable verdicts (either order) that are ties."),
    Column("n_judge_errors", "int", "Verdicts (either order) the judge could not give."),
    Column("n_one_order_only", "int", "Comparisons with a usable verdict in one order only."),
)


def build(request: selectors.TableRequest) -> Built:
    found = selectors.pairwise_verdicts_for(request)
    if not found:
        return [], ["no pairwise verdicts: judge pairs with judge_pairs or the run's Judge pairs"]
    rows = []
    for judge in found:
        c = pairwise_consistency(judge.ab, judge.ba)
        rows.append(
            {
                "judge": judge.judge,
                "n_comparisons": c.pairs,
                "n_consistent": c.consistent,
                "consistent_share": c.consistent_share,
                "flip_rate": c.flip_rate,
                "flip_rate_ci_low": c.flip_ci[0],
                "flip_rate_ci_high": c.flip_ci[1],
                "n_side_reversals": c.reversals,
                "n_decisive": c.decisive,
                "first_position_share": c.first_position.rate,
                "first_position_share_ci_low": c.first_position.wilson[0],
                "first_position_share_ci_high": c.first_position.wilson[1],
                "first_position_p": c.first_position.p_value,
                "tie_share": c.tie_share,
                "n_judge_errors": c.errors,
                "n_one_order_only": c.one_order_only,
            }
        )
    return rows, [
        "every comparison of the run, whatever its condition; a verdict counts only if it "
        "survives the swap of the two replies: the flips are left out of rankings"
    ]


PAIRWISE_JUDGE_CONSISTENCY = register(
    TableSpec(
        name=NAME,
        title="Pairwise judge consistency",
        description="Per LLM pairwise judge: the comparisons judged in both orders, the share "
        "whose verdict survives the swap, the flip rate (Wilson CI), side reversals, the share "
        "of decisive verdicts naming the reply shown first (position bias, Wilson CI, exact "
        "binomial p against 0.5) and ties.",
        columns=COLUMNS,
        needs=RUN,
        build=build,
        display=Display(
            empty="No pairwise verdicts: judge pairs with judge_pairs or the run's Judge pairs.",
            cells=(
                Cell("Judge", "judge"),
                Cell("Pairs (consistent)", "n_comparisons", also="n_consistent"),
                ci_cell("Flip rate % [CI]", "flip_rate", "pct"),
                Cell("Side reversals", "n_side_reversals"),
                Cell(
                    "First shown chosen % [CI]",
                    "first_position_share",
                    "pct",
                    ci=("first_position_share_ci_low", "first_position_share_ci_high"),
                    aside=Aside(
                        "(p {first_position_p:pvalue})", when=lambda row: bool(row["n_decisive"])
                    ),
                ),
                Cell("Ties %", "tie_share", "pct"),
                Cell(
                    "Errors",
                    "n_judge_errors",
                    aside=Aside(
                        "{n_one_order_only} in one order only",
                        when=lambda row: bool(row["n_one_order_only"]),
                    ),
                ),
            ),
        ),
    )
)
