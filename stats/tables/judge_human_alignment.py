"""Judge–human alignment: every judge of a run (imported ones included, by the name their
judgments are stored under) against people — a direct-rating study's per-item majority label and
the adjudicated verdicts — per trigger type and overall: accuracy and Cohen's κ with item-bootstrap
CIs, and the confusion matrix (docs/statistics.md, "Judge–human alignment"). The judges of one
reference and trigger type sit on adjacent rows, side by side; none is singled out."""

from __future__ import annotations

from typing import Any

from benchmark.vocabulary import VERDICT_ORDER
from stats import selectors
from stats.compute import agreement
from stats.compute.alignment import ALL, AlignmentRow, alignment_table
from stats.compute.resampling import HUMAN_RESAMPLES
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

NAME = "judge-human-alignment"
BOOTSTRAP = Bootstrap(HUMAN_RESAMPLES, "items")
K = len(VERDICT_ORDER)

COLUMNS = (
    Column(
        "reference",
        "str",
        "What people said: 'study N (majority)' (a direct-rating study's majority label per "
        "reply), 'release Study 1 (majority)', or 'adjudicated' (final verdicts).",
    ),
    Column("group", "str", "ALL or the replies' trigger type."),
    Column(
        "judge",
        "str",
        "The judge, by the name its judgments are stored under ("
        + selectors.IMPORTED_JUDGE
        + ": the verdict an imported study's file records).",
    ),
    Column("n", "int", "Items with a human label and this judge's verdict."),
    Column("accuracy", "float", "Share of those items where the judge gives the people's label."),
    *ci_columns("accuracy", f"accuracy ({BOOTSTRAP.resamples:,} item-bootstrap resamples)"),
    Column("kappa", "float", "Cohen's kappa, people vs judge, unweighted."),
    *ci_columns("kappa", "that kappa"),
    *(
        Column(f"human_{h}_judge_{j}", "int", f"Items: people {h}, judge {j}.")
        for h in VERDICT_ORDER
        for j in VERDICT_ORDER
    ),
)


def alignment_rows(rows: list[AlignmentRow]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        row: dict[str, Any] = {
            "reference": r.reference,
            "group": r.group,
            "judge": r.judge,
            "n": r.n,
            "accuracy": r.accuracy,
            "accuracy_ci_low": r.accuracy_ci[0],
            "accuracy_ci_high": r.accuracy_ci[1],
            "kappa": r.kappa,
            "kappa_ci_low": r.kappa_ci[0],
            "kappa_ci_high": r.kappa_ci[1],
        }
        for i, h in enumerate(VERDICT_ORDER):
            for j, judge in enumerate(VERDICT_ORDER):
                row[f"human_{h}_judge_{judge}"] = int(r.confusion[i, j])
        out.append(row)
    return out


def build(request: selectors.TableRequest) -> Built:
    references, notes = selectors.alignment_references(request)
    tie_rule = selectors.majority_tie_rule(request, VERDICT_ORDER)
    computed: list[AlignmentRow] = []
    for reference in references:
        counts = agreement.label_counts(reference.labels, K)
        human = agreement.majority_labels(counts, tie_rule)
        computed.extend(
            alignment_table(
                human,
                reference.judges,
                reference.groups,
                K,
                reference=reference.name,
                seed=request.seed,
                resamples=BOOTSTRAP.resamples,
            )
        )
    # Side by side: a reference's judges on adjacent rows for each trigger type (ALL first).
    group_order = {ALL: 0}
    for r in computed:
        group_order.setdefault(r.group, len(group_order))
    reference_order = {ref.name: i for i, ref in enumerate(references)}
    computed.sort(key=lambda r: (reference_order[r.reference], group_order[r.group], r.judge))
    return alignment_rows(computed), [*notes, selectors.majority_note(request)]


def _confusion(row: dict[str, Any]) -> str:
    """The off-diagonal cells, e.g. "Pass→Partial 3, Fail→Pass 1" (people → judge)."""
    cells = [
        f"{h.title()}→{j.title()} {row[f'human_{h}_judge_{j}']}"
        for h in VERDICT_ORDER
        for j in VERDICT_ORDER
        if h != j and row[f"human_{h}_judge_{j}"]
    ]
    return ", ".join(cells) or "none"


JUDGE_HUMAN_ALIGNMENT = register(
    TableSpec(
        name=NAME,
        title="Judge–human alignment",
        description="Every judge of the run (imported ones included) against people — a "
        "direct-rating study's majority label, adjudicated verdicts — per trigger type: n, "
        "accuracy and Cohen's kappa with item-bootstrap CIs, confusion matrix.",
        columns=COLUMNS,
        needs=RUN,
        build=build,
        display=Display(
            empty="No human reference yet.",
            overall=("group", ALL),
            derive={"disagreements": _confusion},
            cells=(
                Cell("Reference", "reference"),
                Cell("Group", "group", "title"),
                Cell("Judge", "judge"),
                Cell("Items", "n"),
                ci_cell("Accuracy % [CI]", "accuracy", "pct"),
                ci_cell("κ [CI]", "kappa"),
                Cell("Disagreements (people → judge)", "disagreements"),
            ),
        ),
        bootstrap=BOOTSTRAP,
    )
)
