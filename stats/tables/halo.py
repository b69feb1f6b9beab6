"""HALO diagnosis tables, per model (docs/statistics.md, "HALO diagnosis"): acceptability,
over- / under-proactive rejections, timing × intensity, action levels. The comparisons — paired,
effort beside quality, agreement per question — are in ``halo_comparison``. Every HALO table
reads the study's diagnoses once per request (``selectors.halo_judgments_for``) and computes in
``stats.compute.halo``."""

from __future__ import annotations

from typing import Any

from benchmark.vocabulary import ACTION_LEVELS, INTENSITIES
from stats import charts, selectors
from stats.compute import halo
from stats.tables.base import (
    STUDY,
    Aside,
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

CHECKPOINTS = Bootstrap(halo.CHECKPOINT_RESAMPLES, "checkpoints (each keeping all its judgments)")
MODEL = Column("model", "str", "The reply's source (a model's handle), or POOLED for all.")
POOLED_ROWS = ("model", halo.POOLED)
NAN = float("nan")
UNIT_NOTE = (
    "unit: a judgment (one annotator's diagnosis of one reply); a reply judged by k annotators "
    "counts k times"
)


def judgments_for(request: selectors.TableRequest, table: str):
    return selectors.halo_judgments_for(request, table=table)


def ci_values(prefix: str, ci: tuple[float, float]) -> dict[str, float]:
    return {f"{prefix}_ci_low": ci[0], f"{prefix}_ci_high": ci[1]}


# --- Acceptability ----------------------------------------------------------------------------

SHARE_NAMES = {
    "justified_restraint": "accepted L0 replies (justified restraint)",
    "inaction": "rejected L0 replies (inaction)",
    "premature": "rejected interventions judged premature",
    "belated": "rejected interventions judged belated",
    "insufficient": "rejected interventions judged insufficient",
    "excessive": "rejected interventions judged excessive",
    "other_issues": "rejected replies with at least one other issue",
}
ACCEPTABILITY_COLUMNS = (
    MODEL,
    Column("n_checkpoints", "int", "Checkpoints with a judged reply of the model."),
    Column("n_replies", "int", "Distinct replies judged."),
    Column("n_judgments", "int", "Judgments (replies × their annotators)."),
    Column("n_acceptable", "int", "Judgments accepting the reply."),
    Column("acceptability", "float", "n_acceptable / n_judgments."),
    *ci_columns("acceptability", f"acceptability ({CHECKPOINTS.caption})"),
    *(
        Column(f"share_{name}", "float", f"Share of all judgments: {what}.")
        for name, what in SHARE_NAMES.items()
    ),
)


def build_acceptability(request: selectors.TableRequest) -> Built:
    judgments, notes = judgments_for(request, "halo-acceptability")
    rows = halo.acceptability_table(judgments, seed=request.seed, resamples=CHECKPOINTS.resamples)
    return [
        {
            "model": r.model,
            "n_checkpoints": r.n_checkpoints,
            "n_replies": r.n_replies,
            "n_judgments": r.n_judgments,
            "n_acceptable": r.n_acceptable,
            "acceptability": r.acceptability,
            **ci_values("acceptability", r.ci),
            **{f"share_{name}": r.shares[name] for name in SHARE_NAMES},
        }
        for r in rows
    ], [*notes, UNIT_NOTE]


def acceptability_chart(table: Table) -> list[charts.Chart]:
    return [
        charts.ci_bars(
            [
                (
                    r["model"],
                    r["acceptability"],
                    r["acceptability_ci_low"],
                    r["acceptability_ci_high"],
                )
                for r in table.rows
            ],
            title="Acceptable replies (checkpoint-bootstrap 95% CI)",
        )
    ]


register(
    TableSpec(
        name="halo-acceptability",
        title="HALO: acceptability",
        description="Per model and pooled: the share of judgments accepting the reply, with a "
        "checkpoint-bootstrap CI, and HALO's Table 1 shares (restraint, inaction, premature, "
        "belated, insufficient, excessive, other issues) of all judgments.",
        columns=ACCEPTABILITY_COLUMNS,
        needs=STUDY,
        build=build_acceptability,
        display=Display(
            overall=POOLED_ROWS,
            cells=(
                Cell("Model", "model"),
                Cell("Replies (judgments)", "n_replies", also="n_judgments"),
                Cell(
                    "Acceptable % [CI]",
                    "acceptability",
                    "pct",
                    ci=("acceptability_ci_low", "acceptability_ci_high"),
                ),
                Cell("Restraint %", "share_justified_restraint", "pct"),
                Cell("Inaction %", "share_inaction", "pct"),
                Cell("Premature %", "share_premature", "pct"),
                Cell("Belated %", "share_belated", "pct"),
                Cell("Insufficient %", "share_insufficient", "pct"),
                Cell("Excessive %", "share_excessive", "pct"),
                Cell("Other issues %", "share_other_issues", "pct"),
            ),
        ),
        charts=acceptability_chart,
        bootstrap=CHECKPOINTS,
    )
)


# --- Over- / under-proactive ------------------------------------------------------------------

PROACTIVITY_COLUMNS = (
    MODEL,
    Column("n_rejected", "int", "Judgments rejecting the reply."),
    Column("n_over", "int", "Rejections that are over-proactive: premature or excessive."),
    Column(
        "n_under", "int", "Rejections that are under-proactive: belated, insufficient or inaction."
    ),
    Column("n_both", "int", "Rejections that are both (e.g. premature and insufficient)."),
    Column("n_neither", "int", "Rejections that are neither (timing and intensity appropriate)."),
    Column("over_share", "float", "n_over / n_rejected."),
    *ci_columns("over_share", "the over-proactive share"),
    Column("under_share", "float", "n_under / n_rejected (not exclusive of over_share)."),
    *ci_columns("under_share", "the under-proactive share"),
)


def build_proactivity(request: selectors.TableRequest) -> Built:
    judgments, notes = judgments_for(request, "halo-proactivity")
    rows = halo.proactivity_table(judgments, seed=request.seed, resamples=CHECKPOINTS.resamples)
    return [
        {
            "model": r.model,
            "n_rejected": r.n_rejected,
            "n_over": r.n_over,
            "n_under": r.n_under,
            "n_both": r.n_both,
            "n_neither": r.n_neither,
            "over_share": r.over_share,
            **ci_values("over_share", r.over_ci),
            "under_share": r.under_share,
            **ci_values("under_share", r.under_ci),
        }
        for r in rows
    ], [
        *notes,
        "a rejection both premature and insufficient (or excessive and belated, or …) counts in "
        "both shares and in n_both: the shares may add up to more than 100%",
        UNIT_NOTE,
    ]


def proactivity_chart(table: Table) -> list[charts.Chart]:
    return [
        charts.grouped_ci_bars(
            [
                (
                    r["model"],
                    [
                        ("over", r["over_share"], r["over_share_ci_low"], r["over_share_ci_high"]),
                        (
                            "under",
                            r["under_share"],
                            r["under_share_ci_low"],
                            r["under_share_ci_high"],
                        ),
                    ],
                )
                for r in table.rows
            ],
            title="Rejected replies: over- and under-proactive (95% CI)",
            series=[("over", "mode-1"), ("under", "mode-3")],
        )
    ]


register(
    TableSpec(
        name="halo-proactivity",
        title="HALO: over- and under-proactive rejections",
        description="Per model and pooled: of the rejected replies, the share over-proactive "
        "(premature or excessive) and under-proactive (belated, insufficient or inaction), "
        "with checkpoint-bootstrap CIs; not exclusive.",
        columns=PROACTIVITY_COLUMNS,
        needs=STUDY,
        build=build_proactivity,
        display=Display(
            overall=POOLED_ROWS,
            cells=(
                Cell("Model", "model"),
                Cell("Rejected", "n_rejected"),
                Cell(
                    "Over-proactive % [CI]",
                    "over_share",
                    "pct",
                    ci=("over_share_ci_low", "over_share_ci_high"),
                ),
                Cell(
                    "Under-proactive % [CI]",
                    "under_share",
                    "pct",
                    ci=("under_share_ci_low", "under_share_ci_high"),
                ),
                Cell("Both", "n_both"),
                Cell("Neither", "n_neither"),
            ),
        ),
        charts=proactivity_chart,
        bootstrap=CHECKPOINTS,
    )
)


# --- Timing × intensity -----------------------------------------------------------------------

TIMING_INTENSITY_COLUMNS = (
    MODEL,
    Column("timing", "str", "premature, belated or appropriate."),
    *(
        Column(f"n_{i}", "int", f"Rejected interventions with this timing, intensity {i}.")
        for i in INTENSITIES
    ),
    Column(
        "n_interventions", "int", "The model's rejected interventions (L1–L3): the denominator."
    ),
    *(Column(f"share_{i}", "float", f"n_{i} / n_interventions.") for i in INTENSITIES),
)


def build_timing_intensity(request: selectors.TableRequest) -> Built:
    judgments, notes = judgments_for(request, "halo-timing-intensity")
    out = []
    for r in halo.timing_intensity_table(judgments):
        row: dict[str, Any] = {"model": r.model, "timing": r.timing}
        row.update({f"n_{i}": r.counts[i] for i in INTENSITIES})
        row["n_interventions"] = r.n_interventions
        row.update(
            {
                f"share_{i}": r.counts[i] / r.n_interventions if r.n_interventions else NAN
                for i in INTENSITIES
            }
        )
        out.append(row)
    return out, [
        *notes,
        "timing and intensity are asked of rejected interventions (L1–L3) only: the nine cells "
        "of a model add up to its n_interventions",
    ]


register(
    TableSpec(
        name="halo-timing-intensity",
        title="HALO: timing × intensity of rejected interventions",
        description="Per model and pooled, per timing: the rejected interventions by intensity, "
        "as counts and as shares of the model's rejected interventions.",
        columns=TIMING_INTENSITY_COLUMNS,
        needs=STUDY,
        build=build_timing_intensity,
        display=Display(
            overall=POOLED_ROWS,
            cells=(
                Cell("Model", "model"),
                Cell("Timing", "timing", "title"),
                *(
                    Cell(
                        f"{i.title()} % (n)",
                        f"share_{i}",
                        "pct",
                        aside=Aside(f"({{n_{i}}})", when=lambda r: True),
                    )
                    for i in INTENSITIES
                ),
            ),
        ),
    )
)


# --- Action levels ----------------------------------------------------------------------------

LEVEL_COLUMNS = (
    MODEL,
    Column("n_judgments", "int", "Judgments."),
    *(Column(f"n_{lv}", "int", f"Judgments settling on level {lv}.") for lv in ACTION_LEVELS),
    *(Column(f"share_{lv}", "float", f"n_{lv} / n_judgments.") for lv in ACTION_LEVELS),
    Column("intervention_rate", "float", "Share of judgments at L1–L3."),
    *ci_columns("intervention_rate", "the intervention rate"),
    Column("n_suggested", "int", "Judgments whose level was pre-filled."),
    Column("n_changed", "int", "… of which the annotator changed the pre-filled level."),
    Column("changed_share", "float", "n_changed / n_suggested."),
)


def build_levels(request: selectors.TableRequest) -> Built:
    judgments, notes = judgments_for(request, "halo-levels")
    out = []
    for r in halo.level_table(judgments, seed=request.seed, resamples=CHECKPOINTS.resamples):
        row: dict[str, Any] = {"model": r.model, "n_judgments": r.n_judgments}
        row.update({f"n_{lv}": r.counts[lv] for lv in ACTION_LEVELS})
        row.update(
            {
                f"share_{lv}": r.counts[lv] / r.n_judgments if r.n_judgments else NAN
                for lv in ACTION_LEVELS
            }
        )
        row["intervention_rate"] = r.intervention_rate
        row.update(ci_values("intervention_rate", r.intervention_ci))
        row["n_suggested"], row["n_changed"] = r.n_suggested, r.n_changed
        row["changed_share"] = r.n_changed / r.n_suggested if r.n_suggested else NAN
        out.append(row)
    return out, [*notes, "levels as the annotators settled on them (confirmed or changed)"]


register(
    TableSpec(
        name="halo-levels",
        title="HALO: action levels",
        description="Per model and pooled: the share of judgments at each action level (L0 "
        "observe … L3 execute), the intervention rate (L1–L3) with a checkpoint-bootstrap CI, "
        "and how often a pre-filled level was changed.",
        columns=LEVEL_COLUMNS,
        needs=STUDY,
        build=build_levels,
        display=Display(
            overall=POOLED_ROWS,
            cells=(
                Cell("Model", "model"),
                Cell("Judgments", "n_judgments"),
                *(Cell(f"{lv} %", f"share_{lv}", "pct") for lv in ACTION_LEVELS),
                Cell(
                    "Intervenes % [CI]",
                    "intervention_rate",
                    "pct",
                    ci=("intervention_rate_ci_low", "intervention_rate_ci_high"),
                ),
                Cell("Pre-fill changed %", "changed_share", "pct"),
            ),
        ),
        charts=lambda table: [
            charts.stacked_shares(
                [
                    (r["model"], [(lv, r[f"share_{lv}"]) for lv in ACTION_LEVELS])
                    for r in table.rows
                ],
                title="Action levels",
                categories=[(lv, lv, f"mode-{k}") for k, lv in enumerate(ACTION_LEVELS)],
            )
        ],
        bootstrap=CHECKPOINTS,
    )
)
