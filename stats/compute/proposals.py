"""Proposal review (Proactive Agent, seed 003): majority labels of proposed proactive tasks,
acceptance per model, a model's decisions (proposed / stayed silent) against those labels, and
agreement between annotators (docs/statistics.md, "Proposal review").

**Majority label** of a proposal: ``agreement.majority_labels`` over its decision counts
(reject, accept) with the tie rule ``exclude`` — accepted when more of its annotators accepted
it than rejected it, rejected when more rejected it; an equal split (only possible with an even
number of decisions: k even, or an item not yet complete) is a *tie* and has no label, as has a
proposal no one has decided yet. Unlabelled proposals are left out of every figure below and
counted.

**A context needs help** when at least one of its proposals is accepted; it needs none when
every proposal there is rejected; with no accepted proposal and one tied or undecided, it is
undetermined.

**A model's decision** at a context, as the seed scores them (Proactive Agent, Lu et al., ICLR
2025, §4.1; the seed's figures, F1 66.47 % with false alarm 50.22 %, follow from these
definitions — tests/stats/test_proposals.py):

- it proposed (one or more tasks): **TP** if at least one of its proposals is accepted (the
  seed's multi-candidate rule: one accepted candidate is a success), **FP** if all are
  rejected, undetermined otherwise;
- it stayed silent: **TN** if the context needs no help, **FN** if it does, undetermined
  otherwise.

precision = TP / (TP + FP); recall = TP / (TP + FN); F1 = 2 TP / (2 TP + FP + FN) (= 2PR / (P +
R) wherever both are defined); **false alarm = FP / (TP + FP) = 1 − precision** (the seed's:
the share of the model's proactive proposals that were not accepted — not the fall-out FP /
(FP + TN) of signal detection); accuracy = (TP + TN) / all decided.

Intervals: seeded percentile bootstraps over **contexts** (a context keeps all its proposals
and decisions), ``HUMAN_RESAMPLES`` resamples, drawn per contribution profile
(``resampling.item_bootstrap_sums``); agreement resamples proposals (``agreement``'s own CIs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stats.compute import agreement
from stats.compute.resampling import (
    CONFIDENCE,
    DEFAULT_SEED,
    HUMAN_RESAMPLES,
    item_bootstrap_sums,
    percentile_interval,
    rng_for,
    safe_ratio,
)
from stats.interfaces import ProposalVotes

POOLED = "POOLED"
ACCEPTED, REJECTED, NO_LABEL = 1, 0, -1  # label codes: the decisions' codes (PROPOSAL_DECISIONS)
NEEDS_HELP, NO_HELP, UNDETERMINED = 1, 0, -1
TP, FP, TN, FN = range(4)  # a decision's outcome: a column of the one-hot contributions


def majority_codes(counts: np.ndarray) -> np.ndarray:
    """Majority label codes of proposals × (rejects, accepts) decision counts: ACCEPTED,
    REJECTED, or NO_LABEL (a tie, or no decision yet). The one statement of the rule."""
    return agreement.majority_labels(np.asarray(counts).reshape(-1, 2), "exclude")


def proposal_labels(votes: ProposalVotes) -> np.ndarray:
    """Each proposal's majority label code (``majority_codes``)."""
    return majority_codes(votes.counts)


def context_needs(votes: ProposalVotes, labels: np.ndarray) -> np.ndarray:
    """Per context: NEEDS_HELP (a proposal accepted), NO_HELP (every proposal rejected) or
    UNDETERMINED."""
    n = votes.n_contexts
    accepted = np.bincount(votes.context, weights=labels == ACCEPTED, minlength=n)
    rejected = np.bincount(votes.context, weights=labels == REJECTED, minlength=n)
    proposals = np.bincount(votes.context, minlength=n)
    return np.where(
        accepted > 0, NEEDS_HELP, np.where(rejected == proposals, NO_HELP, UNDETERMINED)
    )


@dataclass(frozen=True)
class Share:
    k: int
    n: int
    value: float
    ci: tuple[float, float]


def _share(k_per_context: np.ndarray, n_per_context: np.ndarray, rng, resamples, level) -> Share:
    """k / n with a percentile bootstrap over the contexts that have an n."""
    keep = n_per_context > 0
    k, n = k_per_context[keep], n_per_context[keep]
    total_k, total_n = int(k.sum()), int(n.sum())
    if not total_n:
        return Share(0, 0, float("nan"), (float("nan"), float("nan")))
    sums = item_bootstrap_sums(np.column_stack([k, n]), resamples=resamples, rng=rng)
    ci = percentile_interval(safe_ratio(sums[:, 0], sums[:, 1]), level)
    return Share(total_k, total_n, total_k / total_n, ci)


# --- Acceptance ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AcceptanceRow:
    model: str
    n_proposals: int
    n_tied: int  # decided, but split evenly: no label
    n_undecided: int  # no counted decision yet
    accepted: Share  # accepted / labelled, CI over contexts


def acceptance_table(
    votes: ProposalVotes,
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = HUMAN_RESAMPLES,
    level: float = CONFIDENCE,
) -> list[AcceptanceRow]:
    """Per model (by name), then ``POOLED``: the share of its labelled proposals that are
    accepted."""
    labels = proposal_labels(votes)
    decided = votes.counts.sum(axis=1) > 0
    rows = []
    models = sorted(set(votes.source.tolist()))
    for model in [*models, POOLED]:
        mine = np.ones(labels.size, dtype=bool) if model == POOLED else votes.source == model
        labelled = mine & (labels >= 0)
        context = votes.context[labelled]
        rows.append(
            AcceptanceRow(
                model=model,
                n_proposals=int(mine.sum()),
                n_tied=int((mine & decided & (labels < 0)).sum()),
                n_undecided=int((mine & ~decided).sum()),
                accepted=_share(
                    np.bincount(
                        context, weights=labels[labelled] == ACCEPTED, minlength=votes.n_contexts
                    ),
                    np.bincount(context, minlength=votes.n_contexts),
                    rng_for(seed, "proposal-acceptance", model),
                    resamples,
                    level,
                ),
            )
        )
    return rows


# --- Decisions against the labels ------------------------------------------------------------


@dataclass(frozen=True)
class DecisionRow:
    model: str
    n_proposed: int  # contexts where it proposed
    n_silent: int  # contexts where it stayed silent
    confusion: tuple[int, int, int, int]  # TP, FP, TN, FN
    n_undetermined: int  # decisions the labels cannot score (ties, undecided proposals)
    precision: Share
    recall: Share
    f1: Share  # k, n: 2 TP and 2 TP + FP + FN
    false_alarm: Share
    accuracy: Share


def _decision_outcomes(votes: ProposalVotes, labels: np.ndarray):
    """Every decision as (context, model, outcome), outcome one of TP, FP, TN, FN or -1
    (undetermined): the proposed decisions (one per context and model with proposals), then the
    silent ones."""
    models = sorted(set(votes.source.tolist()) | set(votes.silent_source.tolist()))
    code = {m: i for i, m in enumerate(models)}
    model_of = np.fromiter((code[m] for m in votes.source.tolist()), np.int64, labels.size)
    pair = votes.context * len(models) + model_of
    pairs, inverse = np.unique(pair, return_inverse=True)
    any_accepted = np.bincount(inverse, weights=labels == ACCEPTED, minlength=pairs.size) > 0
    rejected = np.bincount(inverse, weights=labels == REJECTED, minlength=pairs.size)
    all_rejected = rejected == np.bincount(inverse, minlength=pairs.size)
    proposed = np.where(any_accepted, TP, np.where(all_rejected, FP, -1))
    needs = context_needs(votes, labels)[votes.silent_context]
    silent = np.where(needs == NO_HELP, TN, np.where(needs == NEEDS_HELP, FN, -1))
    silent_model = np.fromiter(
        (code[m] for m in votes.silent_source.tolist()), np.int64, votes.silent_source.size
    )
    contexts = np.concatenate([pairs // max(len(models), 1), votes.silent_context])
    model_codes = np.concatenate([pairs % max(len(models), 1), silent_model])
    was_proposed = np.concatenate([np.ones(pairs.size, bool), np.zeros(silent.size, bool)])
    return models, contexts, model_codes, np.concatenate([proposed, silent]), was_proposed


def _metrics(sums: np.ndarray) -> dict[str, np.ndarray]:
    """The five measures from confusion sums (… × 4: TP, FP, TN, FN), NaN where undefined."""
    tp, fp, tn, fn = (sums[..., i] for i in range(4))
    return {
        "precision": safe_ratio(tp, tp + fp),
        "recall": safe_ratio(tp, tp + fn),
        "f1": safe_ratio(2 * tp, 2 * tp + fp + fn),
        "false_alarm": safe_ratio(fp, tp + fp),
        "accuracy": safe_ratio(tp + tn, tp + fp + tn + fn),
    }


_COUNTS = {  # each measure's numerator and denominator, from (TP, FP, TN, FN)
    "precision": lambda c: (c[TP], c[TP] + c[FP]),
    "recall": lambda c: (c[TP], c[TP] + c[FN]),
    "f1": lambda c: (2 * c[TP], 2 * c[TP] + c[FP] + c[FN]),
    "false_alarm": lambda c: (c[FP], c[TP] + c[FP]),
    "accuracy": lambda c: (c[TP] + c[TN], sum(c)),
}


def decision_table(
    votes: ProposalVotes,
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = HUMAN_RESAMPLES,
    level: float = CONFIDENCE,
) -> list[DecisionRow]:
    """Per model (by name), then ``POOLED`` (every model's decisions together): its decisions
    against the majority labels (the module docstring), with CIs over contexts."""
    labels = proposal_labels(votes)
    models, contexts, model_codes, outcomes, was_proposed = _decision_outcomes(votes, labels)
    rows = []
    for code, model in [*enumerate(models), (-1, POOLED)]:
        mine = np.ones(outcomes.size, bool) if code < 0 else model_codes == code
        scored = mine & (outcomes >= 0)
        # One row per context: its decisions' outcomes, one-hot and summed (a model decides
        # once per context; pooled, a context holds every model's decision there).
        per_context = np.zeros((votes.n_contexts, 4))
        for outcome in (TP, FP, TN, FN):
            per_context[:, outcome] = np.bincount(
                contexts[scored & (outcomes == outcome)], minlength=votes.n_contexts
            )
        per_context = per_context[per_context.sum(axis=1) > 0]
        tp, fp, tn, fn = (int(x) for x in per_context.sum(axis=0))
        confusion = (tp, fp, tn, fn)
        boot = _metrics(
            item_bootstrap_sums(
                per_context,
                resamples=resamples,
                rng=rng_for(seed, "proposal-decisions", model),
            )
        )
        shares = {}
        for name, counts in _COUNTS.items():
            k, n = counts(confusion)
            value = k / n if n else float("nan")
            ci = percentile_interval(boot[name], level) if n else (float("nan"), float("nan"))
            shares[name] = Share(int(k), int(n), value, ci)
        rows.append(
            DecisionRow(
                model=model,
                n_proposed=int((mine & was_proposed).sum()),
                n_silent=int((mine & ~was_proposed).sum()),
                confusion=confusion,
                n_undetermined=int((mine & (outcomes < 0)).sum()),
                **shares,
            )
        )
    return rows


# --- Agreement ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    value: float
    ci: tuple[float, float]


@dataclass(frozen=True)
class ProposalAgreement:
    n_contexts: int
    n_proposals: int
    n_compared: int  # proposals with two or more decisions (what agreement reads)
    n_decisions: int
    accept_share: float  # of all decisions
    fleiss_kappa: Estimate
    alpha_nominal: Estimate


def proposal_agreement(
    votes: ProposalVotes,
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = HUMAN_RESAMPLES,
    level: float = CONFIDENCE,
) -> ProposalAgreement:
    """Fleiss' κ and nominal Krippendorff's α of the accept / reject decisions, proposals as
    the items (``agreement``: items with fewer than two decisions left out), with item-bootstrap
    CIs."""
    counts = votes.counts
    n_decisions = int(counts.sum())
    return ProposalAgreement(
        n_contexts=votes.n_contexts,
        n_proposals=int(counts.shape[0]),
        n_compared=int((counts.sum(axis=1) >= 2).sum()),
        n_decisions=n_decisions,
        accept_share=float(counts[:, 1].sum() / n_decisions) if n_decisions else float("nan"),
        fleiss_kappa=Estimate(
            agreement.fleiss_kappa(counts),
            agreement.fleiss_kappa_ci(
                counts,
                rng=rng_for(seed, "proposal-agreement", "fleiss"),
                resamples=resamples,
                level=level,
            ),
        ),
        alpha_nominal=Estimate(
            agreement.krippendorff_alpha(counts, "nominal"),
            agreement.krippendorff_alpha_ci(
                counts,
                "nominal",
                rng=rng_for(seed, "proposal-agreement", "alpha"),
                resamples=resamples,
                level_ci=level,
            ),
        ),
    )
