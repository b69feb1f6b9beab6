"""Judge self-consistency: each judge asked again about the same replies (a run judged with
``judge_epochs`` > 1; epoch 0 is the judgment, the rest ``JudgmentRepeat``). Per judge, per
trigger type and overall: the replies judged at least twice, the share whose verdicts all
agree, Krippendorff's α (ordinal) across epochs, the flip rate against epoch 0, each with a
seeded reply-bootstrap CI (docs/statistics.md, "Judge self-consistency")."""

from __future__ import annotations

import numpy as np

from benchmark.vocabulary import VERDICT_ORDER
from stats import selectors
from stats.compute.leaderboard import ALL, TYPE_ORDER
from stats.compute.resampling import HUMAN_RESAMPLES, rng_for
from stats.compute.self_consistency import self_consistency
from stats.tables.base import (
    RUN,
    Bootstrap,
    Built,
    Cell,
    Column,
    Display,
    TableSpec,
    ci_cell,
    ci_columns,
    register,
)

NAME = "judge-self-consistency"
BOOTSTRAP = Bootstrap(HUMAN_RESAMPLES, "replies")

COLUMNS = (
    Column("judge", "str", "The judge, by the name its judgments are stored under."),
    Column("trigger_type", "str", "ALL or a trigger type."),
    Column("n_units", "int", "Replies the judge gave at least two verdicts (epochs)."),
    Column("n_epochs", "int", "The most verdicts one reply got from the judge."),
    Column("n_repeats", "int", "Repeats compared with the reply's epoch-0 verdict."),
    Column("all_agree", "float", "Share of the replies whose verdicts all agree."),
    *ci_columns("all_agree", "that share"),
    Column("alpha_ordinal", "float", "Krippendorff's alpha (ordinal), epochs as raters."),
    *ci_columns("alpha_ordinal", "that alpha"),
    Column("flip_rate", "float", "Share of repeats whose verdict differs from epoch 0's."),
    *ci_columns("flip_rate", "the flip rate"),
)


def build(request: selectors.TableRequest) -> Built:
    found = selectors.judge_epochs_for(request)
    if not found:
        return [], ["no repeats: re-judge with --epochs K"]
    rows = []
    for judge in found:
        present = [t for t in TYPE_ORDER if np.any(judge.trigger_type == t)]
        present += sorted(set(judge.trigger_type.tolist()) - set(TYPE_ORDER))
        for group in [ALL, *present]:
            mask = (
                np.ones(judge.trigger_type.size, bool)
                if group == ALL
                else (judge.trigger_type == group)
            )
            c = self_consistency(
                judge.epochs[mask],
                len(VERDICT_ORDER),
                rngs=(
                    rng_for(request.seed, NAME, judge.judge, group, "agree"),
                    rng_for(request.seed, NAME, judge.judge, group, "alpha"),
                    rng_for(request.seed, NAME, judge.judge, group, "flip"),
                ),
                resamples=BOOTSTRAP.resamples,
            )
            rows.append(
                {
                    "judge": judge.judge,
                    "trigger_type": group,
                    "n_units": c.n_units,
                    "n_epochs": int((judge.epochs[mask] >= 0).sum(axis=1).max(initial=0)),
                    "n_repeats": c.n_repeats,
                    "all_agree": c.all_agree,
                    "all_agree_ci_low": c.all_agree_ci[0],
                    "all_agree_ci_high": c.all_agree_ci[1],
                    "alpha_ordinal": c.alpha,
                    "alpha_ordinal_ci_low": c.alpha_ci[0],
                    "alpha_ordinal_ci_high": c.alpha_ci[1],
                    "flip_rate": c.flip_rate,
                    "flip_rate_ci_low": c.flip_rate_ci[0],
                    "flip_rate_ci_high": c.flip_rate_ci[1],
                }
            )
    return rows, ["judge_error epochs count as missing verdicts"]


JUDGE_SELF_CONSISTENCY = register(
    TableSpec(
        name=NAME,
        title="Judge self-consistency",
        description="Per judge and trigger type: replies judged at least twice, the share whose "
        "verdicts all agree, Krippendorff's alpha (ordinal) across epochs and the flip rate "
        "against epoch 0, with reply-bootstrap CIs.",
        columns=COLUMNS,
        needs=RUN,
        build=build,
        display=Display(
            empty="No repeats: re-judge with --epochs K.",
            overall=("trigger_type", ALL),
            cells=(
                Cell("Judge", "judge"),
                Cell("Triggers", "trigger_type", "title"),
                Cell("Replies (most epochs)", "n_units", also="n_epochs"),
                ci_cell("All agree % [CI]", "all_agree", "pct"),
                ci_cell("α ordinal [CI]", "alpha_ordinal"),
                ci_cell("Flip rate % [CI]", "flip_rate", "pct"),
            ),
        ),
        bootstrap=BOOTSTRAP,
    )
)
