"""Proposal review (Proactive Agent, seed 003): acceptance of each model's proposed tasks, its
decisions (proposed / stayed silent) against the majority labels — precision, recall, F1, false
alarm — and agreement between annotators (docs/statistics.md, "Proposal review"; the formulas
in ``stats/compute/proposals.py``)."""

from __future__ import annotations

from typing import Any

from stats import charts, selectors
from stats.compute.proposals import (
    POOLED,
    AcceptanceRow,
    DecisionRow,
    Estimate,
    ProposalAgreement,
    Share,
    acceptance_table,
    decision_table,
    proposal_agreement,
)
from stats.compute.resampling import HUMAN_RESAMPLES
from stats.interfaces import ProposalVotes
from stats.tables.base import (
    STUDY,
    Bootstrap,
    Built,
    Cell,
    Column,
    Display,
    Table,
    TableSpec,
    ci_cell,
    ci_columns,
    register,
)

CONTEXTS = Bootstrap(HUMAN_RESAMPLES, "contexts (each keeping all its proposals and decisions)")
PROPOSALS = Bootstrap(HUMAN_RESAMPLES, "proposals")

MAJORITY_NOTE = (
    "a proposal's label is its annotators' majority: accepted when more accepted than rejected "
    "it, rejected when more rejected it; an even split (k even, or a context not yet complete) "
    "is a tie: no label, left out and counted"
)
DECISION_NOTE = (
    "as the Proactive Agent paper scores them: proposed and at least one proposal accepted = "
    "TP, all rejected = FP; silent where the context needs no help (every proposal rejected) = "
    "TN, where it needs help (a proposal accepted) = FN; false alarm = FP / (TP + FP)"
)


def _share(prefix: str, share: Share | Estimate) -> dict[str, Any]:
    """A value and its CI as the columns ``prefix``, ``prefix_ci_low``, ``prefix_ci_high``."""
    return {prefix: share.value, f"{prefix}_ci_low": share.ci[0], f"{prefix}_ci_high": share.ci[1]}


# --- Acceptance ------------------------------------------------------------------------------

ACCEPTANCE_COLUMNS = (
    Column("model", "str", "The model that proposed (a proposal's source), or POOLED."),
    Column("n_proposals", "int", "Its proposals."),
    Column("n_labelled", "int", "Proposals with a majority label (accepted or rejected)."),
    Column("n_accepted", "int", "Proposals labelled accepted."),
    Column("n_tied", "int", "Proposals whose decisions split evenly: no label, left out."),
    Column("n_undecided", "int", "Proposals no counted annotator has decided yet: left out."),
    Column("acceptance_rate", "float", "n_accepted / n_labelled."),
    *ci_columns("acceptance_rate", f"the acceptance rate ({CONTEXTS.caption})"),
)


def acceptance_rows(rows: list[AcceptanceRow]) -> list[dict[str, Any]]:
    return [
        {
            "model": r.model,
            "n_proposals": r.n_proposals,
            "n_labelled": r.accepted.n,
            "n_accepted": r.accepted.k,
            "n_tied": r.n_tied,
            "n_undecided": r.n_undecided,
            **_share("acceptance_rate", r.accepted),
        }
        for r in rows
    ]


def build_acceptance(request: selectors.TableRequest) -> Built:
    votes, notes = selectors.proposal_votes_for(request, table="proposal-acceptance")
    rows = acceptance_table(votes, seed=request.seed, resamples=CONTEXTS.resamples)
    return acceptance_rows(rows), [*notes, MAJORITY_NOTE]


def acceptance_chart(table: Table) -> list[charts.Chart]:
    return [
        charts.ci_bars(
            [
                (
                    r["model"].title() if r["model"] == POOLED else r["model"],
                    r["acceptance_rate"],
                    r["acceptance_rate_ci_low"],
                    r["acceptance_rate_ci_high"],
                )
                for r in table.rows
            ],
            title="Proposals accepted by the annotators' majority (95% CI over contexts)",
        )
    ]


ACCEPTANCE = register(
    TableSpec(
        name="proposal-acceptance",
        title="Proposal acceptance",
        description="Per model: the share of its proposed proactive tasks the annotators' "
        "majority accepted, with a bootstrap CI over contexts; ties and undecided counted.",
        columns=ACCEPTANCE_COLUMNS,
        needs=STUDY,
        build=build_acceptance,
        display=Display(
            overall=("model", POOLED),
            cells=(
                Cell("Model", "model"),
                Cell("Proposals", "n_proposals"),
                Cell("Labelled (ties)", "n_labelled", also="n_tied"),
                Cell("Accepted", "n_accepted"),
                ci_cell("Accepted % [CI]", "acceptance_rate", "pct"),
            ),
        ),
        charts=acceptance_chart,
        bootstrap=CONTEXTS,
    )
)


# --- Decisions ---------------------------------------------------------------------------------

MEASURES = {
    "precision": "TP / (TP + FP)",
    "recall": "TP / (TP + FN)",
    "f1": "2 TP / (2 TP + FP + FN), the harmonic mean of precision and recall",
    "false_alarm": "FP / (TP + FP) = 1 - precision: the share of its proposals not accepted "
    "(the Proactive Agent paper's false alarm)",
    "accuracy": "(TP + TN) / (TP + FP + TN + FN)",
}

DECISION_COLUMNS = (
    Column("model", "str", "The model, or POOLED for every model's decisions together."),
    Column("n_proposed", "int", "Contexts where it proposed one or more tasks."),
    Column("n_silent", "int", "Contexts where it stayed silent (proposed nothing)."),
    Column("tp", "int", "Proposed, and at least one of its proposals accepted."),
    Column("fp", "int", "Proposed, and every one of its proposals rejected."),
    Column("tn", "int", "Silent where the context needs no help (every proposal rejected)."),
    Column("fn", "int", "Silent where the context needs help (a proposal accepted)."),
    Column(
        "n_undetermined",
        "int",
        "Decisions the labels cannot score (a tied or undecided proposal and none accepted).",
    ),
    *(
        column
        for name, formula in MEASURES.items()
        for column in (
            Column(name, "float", f"{formula}."),
            *ci_columns(name, f"{name.replace('_', ' ')} ({CONTEXTS.caption})"),
        )
    ),
)


def decision_rows(rows: list[DecisionRow]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        tp, fp, tn, fn = r.confusion
        row: dict[str, Any] = {
            "model": r.model,
            "n_proposed": r.n_proposed,
            "n_silent": r.n_silent,
            "tp": tp,
            "fp": fp,
            "tn": tn,
            "fn": fn,
            "n_undetermined": r.n_undetermined,
        }
        for name in MEASURES:
            row.update(_share(name, getattr(r, name)))
        out.append(row)
    return out


def build_decisions(request: selectors.TableRequest) -> Built:
    votes, notes = selectors.proposal_votes_for(request, table="proposal-decisions")
    rows = decision_table(votes, seed=request.seed, resamples=CONTEXTS.resamples)
    notes = [*notes, MAJORITY_NOTE, DECISION_NOTE]
    if votes.silent_source.size == 0:
        notes.append(
            "no model stayed silent in this study (a run's models reply at every trigger): "
            "there is no TN or FN, so recall is 1 wherever a proposal was accepted"
        )
    return decision_rows(rows), notes


DECISIONS = register(
    TableSpec(
        name="proposal-decisions",
        title="Proposal decisions vs the majority labels",
        description="Per model: its decisions (proposed / stayed silent) against the "
        "annotators' majority labels, TP/FP/TN/FN, precision, recall, F1, false alarm and "
        "accuracy with bootstrap CIs over contexts, as the Proactive Agent paper defines them.",
        columns=DECISION_COLUMNS,
        needs=STUDY,
        build=build_decisions,
        display=Display(
            overall=("model", POOLED),
            cells=(
                Cell("Model", "model"),
                Cell("Proposed (silent)", "n_proposed", also="n_silent"),
                Cell("TP", "tp"),
                Cell("FP", "fp"),
                Cell("TN", "tn"),
                Cell("FN", "fn"),
                ci_cell("Precision % [CI]", "precision", "pct"),
                ci_cell("Recall % [CI]", "recall", "pct"),
                ci_cell("F1 % [CI]", "f1", "pct"),
                ci_cell("False alarm % [CI]", "false_alarm", "pct"),
            ),
        ),
        bootstrap=CONTEXTS,
    )
)


# --- Agreement ---------------------------------------------------------------------------------

AGREEMENT_COLUMNS = (
    Column("n_contexts", "int", "Contexts (gold ones left out)."),
    Column("n_proposals", "int", "Proposals."),
    Column("n_compared", "int", "Proposals with two or more decisions (what agreement reads)."),
    Column("n_decisions", "int", "Accept / reject decisions counted."),
    Column("n_raters", "int", "Annotators whose decisions are counted."),
    Column("n_answers", "int", "Their answers (one per context each)."),
    Column("reject_all_share", "float", "Share of answers that were 'reject all'."),
    Column("accept_share", "float", "Share of decisions that accept."),
    Column("fleiss_kappa", "float", "Fleiss' kappa of the decisions, proposals as the items."),
    *ci_columns("fleiss_kappa", f"Fleiss' kappa ({PROPOSALS.caption})"),
    Column("alpha_nominal", "float", "Krippendorff's alpha, nominal, of the same decisions."),
    *ci_columns("alpha_nominal", "alpha"),
)


def agreement_rows(agreement: ProposalAgreement, votes: ProposalVotes) -> list[dict[str, Any]]:
    return [
        {
            "n_contexts": agreement.n_contexts,
            "n_proposals": agreement.n_proposals,
            "n_compared": agreement.n_compared,
            "n_decisions": agreement.n_decisions,
            "n_raters": votes.n_raters,
            "n_answers": votes.n_answers,
            "reject_all_share": votes.n_reject_all / votes.n_answers
            if votes.n_answers
            else float("nan"),
            "accept_share": agreement.accept_share,
            **_share("fleiss_kappa", agreement.fleiss_kappa),
            **_share("alpha_nominal", agreement.alpha_nominal),
        }
    ]


def build_agreement(request: selectors.TableRequest) -> Built:
    votes, notes = selectors.proposal_votes_for(request, table="proposal-agreement")
    agreement = proposal_agreement(votes, seed=request.seed, resamples=PROPOSALS.resamples)
    return agreement_rows(agreement, votes), [
        *notes,
        "a 'reject all' answer rejects every proposal of its context",
    ]


AGREEMENT = register(
    TableSpec(
        name="proposal-agreement",
        title="Proposal review: agreement",
        description="The study's accept / reject decisions: Fleiss' kappa and nominal "
        "Krippendorff's alpha with bootstrap CIs over proposals, the share of 'reject all'.",
        columns=AGREEMENT_COLUMNS,
        needs=STUDY,
        build=build_agreement,
        display=Display(
            cells=(
                Cell("Contexts", "n_contexts"),
                Cell("Proposals (2+ decisions)", "n_proposals", also="n_compared"),
                Cell("Decisions (raters)", "n_decisions", also="n_raters"),
                Cell("Reject all %", "reject_all_share", "pct"),
                Cell("Accept %", "accept_share", "pct"),
                ci_cell("Fleiss κ [CI]", "fleiss_kappa"),
                ci_cell("α nominal [CI]", "alpha_nominal"),
            ),
        ),
        bootstrap=PROPOSALS,
    )
)
