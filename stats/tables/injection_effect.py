"""The paired injection effect: per model × trigger type and overall, the pass rate and weighted
score of the vanilla and the rubric-injected replies to the same triggers, their difference
with paired bootstrap CIs, and McNemar's exact test (docs/statistics.md, "Injection effect").

The table compares the two conditions, so the request's condition does not change it."""

from __future__ import annotations

from typing import Any

from benchmark.models import Condition
from stats import selectors
from stats.compute.injection_effect import EffectRow, injection_effects, pair_units
from stats.compute.leaderboard import ALL
from stats.compute.resampling import LEADERBOARD_RESAMPLES
from stats.tables.base import (
    RUN,
    Bootstrap,
    Built,
    Cell,
    Column,
    Display,
    TableSpec,
    ci_columns,
    model_columns,
    register,
)

BOOTSTRAP = Bootstrap(LEADERBOARD_RESAMPLES, "paired triggers")

COLUMNS = (
    *model_columns(),
    Column(
        "trigger_type",
        "str",
        "ALL (every trigger, micro-averaged) or EMERGENT/CRITICAL/RECOVERY/INTERVENTION.",
    ),
    Column("verdicts", "str", "Verdict source: primary, adjudicated, or a judge's handle."),
    Column(
        "n_pairs",
        "int",
        "Pairs: the model's vanilla and rubric-injected replies to one trigger and sample, both "
        "scored.",
    ),
    Column("vanilla_pass_rate", "float", "PASS share of the pairs' vanilla replies."),
    Column("injected_pass_rate", "float", "PASS share of the pairs' rubric-injected replies."),
    Column("vanilla_weighted", "float", "Weighted score (Pass 1, Partial 0.5) of the vanilla."),
    Column("injected_weighted", "float", "Weighted score of the rubric-injected replies."),
    Column("delta_pass", "float", "injected_pass_rate − vanilla_pass_rate."),
    *ci_columns(
        "delta_pass",
        f"delta_pass ({BOOTSTRAP.resamples:,} paired bootstrap resamples of the triggers)",
    ),
    Column("delta_weighted", "float", "injected_weighted − vanilla_weighted."),
    *ci_columns("delta_weighted", "delta_weighted (the same resamples)"),
    Column("b", "int", "Discordant pairs: vanilla PASS, rubric-injected not PASS."),
    Column("c", "int", "Discordant pairs: rubric-injected PASS, vanilla not PASS."),
    Column(
        "mcnemar_p",
        "float",
        "Two-sided exact McNemar p on pass / not pass: binomial test of min(b, c) of b + c at "
        "1/2 (1 when b + c = 0).",
    ),
)


def effect_rows(rows: list[EffectRow], *, display: dict[str, str], verdicts: str) -> list[dict]:
    out: list[dict[str, Any]] = []
    for row in rows:
        out.append(
            {
                "model": row.model,
                "model_display": display.get(row.model, row.model),
                "trigger_type": row.trigger_type,
                "verdicts": verdicts,
                "n_pairs": row.n_pairs,
                "vanilla_pass_rate": row.vanilla_pass_rate,
                "injected_pass_rate": row.injected_pass_rate,
                "vanilla_weighted": row.vanilla_weighted,
                "injected_weighted": row.injected_weighted,
                "delta_pass": row.delta_pass,
                "delta_pass_ci_low": row.delta_pass_ci[0],
                "delta_pass_ci_high": row.delta_pass_ci[1],
                "delta_weighted": row.delta_weighted,
                "delta_weighted_ci_low": row.delta_weighted_ci[0],
                "delta_weighted_ci_high": row.delta_weighted_ci[1],
                "b": row.b,
                "c": row.c,
                "mcnemar_p": row.mcnemar_p,
            }
        )
    return out


def build(request: selectors.TableRequest) -> Built:
    run = selectors.require_run(request)
    vanilla = selectors.replies_in(request, Condition.VANILLA)
    injected = selectors.replies_in(request, Condition.RUBRIC_INJECTED)
    missing = [
        str(condition)
        for condition, replies in (
            (Condition.VANILLA, vanilla),
            (Condition.RUBRIC_INJECTED, injected),
        )
        if replies.unit_id.size == 0
    ]
    if missing:
        return [], [
            f"run {run.pk} has no {' and no '.join(missing)} replies: the injection effect "
            "needs both conditions (vanilla and rubric_injected) of the same triggers"
        ]
    iv, ii = pair_units(
        (vanilla.model, vanilla.trigger_id, vanilla.sample),
        (injected.model, injected.trigger_id, injected.sample),
    )
    rows = injection_effects(
        models=vanilla.model[iv],
        trigger_types=vanilla.trigger_type[iv],
        clusters=vanilla.trigger_id[iv],
        vanilla=vanilla.verdict[iv],
        injected=injected.verdict[ii],
        resamples=BOOTSTRAP.resamples,
        seed=request.seed,
    )
    display = {**injected.display, **vanilla.display}
    notes = [
        "Δ = rubric-injected − vanilla on the same trigger and sample; both conditions are read "
        "whatever the condition chosen."
    ]
    unpaired = int(
        vanilla.unit_id.size
        + injected.unit_id.size
        - 2 * sum(r.n_pairs for r in rows if r.trigger_type == ALL)
    )
    if unpaired:
        notes.append(
            f"{unpaired} replies left out: unscored, or without a scored counterpart in the other "
            "condition."
        )
    return effect_rows(rows, display=display, verdicts=request.verdicts.label), notes


INJECTION_EFFECT = register(
    TableSpec(
        name="injection-effect",
        title="Injection effect (paired)",
        description="Per model x trigger type and overall: pass rate and weighted score of the "
        "vanilla and rubric-injected replies to the same triggers, their difference with paired "
        "bootstrap CIs, and McNemar's exact test on pass / not pass.",
        columns=COLUMNS,
        needs=RUN,
        build=build,
        display=Display(
            overall=("trigger_type", ALL),
            row_class="phase",
            empty="No paired replies: the injection effect needs both conditions.",
            cells=(
                Cell("Model", "trigger_type", "trigger", overall="model_display"),
                Cell("Pairs", "n_pairs"),
                Cell("Pass % vanilla", "vanilla_pass_rate", "pct"),
                Cell("Pass % injected", "injected_pass_rate", "pct"),
                Cell(
                    "Δ pass % [95% CI]",
                    "delta_pass",
                    "pct",
                    ci=("delta_pass_ci_low", "delta_pass_ci_high"),
                ),
                Cell(
                    "Δ weighted % [95% CI]",
                    "delta_weighted",
                    "pct",
                    ci=("delta_weighted_ci_low", "delta_weighted_ci_high"),
                ),
                Cell("b (c)", "b", also="c"),
                Cell("McNemar p", "mcnemar_p", "pvalue"),
            ),
        ),
        bootstrap=BOOTSTRAP,
    )
)
