"""HALO response diagnosis (seeds/004; docs/statistics.md, "HALO diagnosis"): acceptability,
the over- / under-proactive split of rejections, timing × intensity, action levels, paired
comparisons of two models on shared checkpoints, effort beside quality, and agreement per
question.

**Unit.** Every judgment counts once: a reply judged by k annotators counts k times, so with a
constant k every reply weighs the same (HALO has k = 1: then a judgment is a reply). Gold
checkpoints are left out before these functions (quality checks).

**Intervals.** The replies at one checkpoint share its context and, in the paired protocol, its
annotators: they are not independent. Every rate's 95% interval is therefore a percentile
bootstrap over **checkpoints** (each resampled checkpoint keeps all its judgments; a rate is
resampled numerator over resampled denominator), drawn per contribution profile
(``resampling.item_bootstrap_sums``) and seeded per table, row and figure (``rng_for``).

**Derived categories.** A rejected L0 is an *inaction*, an accepted L0 *justified restraint*. A
rejected reply is *over-proactive* when premature or excessive, *under-proactive* when belated,
insufficient or an inaction (``benchmark.vocabulary.OVER_PROACTIVE`` / ``UNDER_PROACTIVE``).
The two are not exclusive: a reply both premature and insufficient counts in both shares (and
in ``both``), so the shares may add up to more than 1; a reply rejected with its timing and
intensity appropriate (for other issues only) is in neither.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy import stats as scipy_stats

from benchmark.vocabulary import ACTION_LEVELS, INTENSITIES, OTHER_ISSUES, TIMINGS
from stats.compute import agreement
from stats.compute.correlation import Correlation, pearson_with_fisher_ci
from stats.compute.resampling import (
    CONFIDENCE,
    DEFAULT_SEED,
    item_bootstrap_sums,
    percentile_interval,
    rng_for,
    safe_ratio,
)
from stats.interfaces import HaloJudgments

POOLED = "POOLED"
L0 = ACTION_LEVELS.index("L0")
PREMATURE, BELATED = TIMINGS.index("premature"), TIMINGS.index("belated")
INSUFFICIENT, EXCESSIVE = INTENSITIES.index("insufficient"), INTENSITIES.index("excessive")
CHECKPOINT_RESAMPLES = 2_000
"""Resamples of the checkpoint bootstrap (acceptability, over- / under-proactive shares, the
intervention rate): a pooled row's checkpoints differ in many ways (how many replies, how many
rejected, …), so each resample costs a draw per distinct checkpoint profile; 2,000 keep every
HALO table within a second on 16,000 judgments (bench/stats.py) and a 95% percentile interval's
ends well estimated (each from 50 resamples beyond it)."""
REPLY_RESAMPLES = 2_000
"""Resamples of the reply bootstrap of the agreement table: two intervals (α, κ) for each of
seven questions; as ``CHECKPOINT_RESAMPLES``."""
PAIRED_RESAMPLES = 1_000
"""Resamples per pair of models, as the leaderboard's per cell: ten models make 45 pairs, each
with its own resamples of its shared checkpoints (its four intervals from the same ones)."""

NAN = float("nan")
NO_CI = (NAN, NAN)


# --- Shared -----------------------------------------------------------------------------------


def cluster_ratio_intervals(
    numerators: list[np.ndarray],
    denominator: np.ndarray,
    clusters: np.ndarray,
    *,
    rng: np.random.Generator,
    resamples: int,
    level: float = CONFIDENCE,
) -> list[tuple[float, float]]:
    """The percentile interval of each sum(numerator) / sum(denominator), resampling clusters
    (checkpoints) with all their entries. Each ratio is resampled on its own (its interval is
    all that is reported): a cluster's (denominator, numerator) pair has few distinct values,
    so the draws per profile stay few (``item_bootstrap_sums``)."""
    if denominator.size == 0 or denominator.sum() == 0:
        return [NO_CI for _ in numerators]
    clusters = np.unique(clusters, return_inverse=True)[1].reshape(-1)
    n = int(clusters.max()) + 1
    per_cluster = np.bincount(clusters, weights=denominator.astype(float), minlength=n)
    out = []
    for numerator in numerators:
        pairs = np.column_stack(
            [per_cluster, np.bincount(clusters, weights=numerator.astype(float), minlength=n)]
        )
        sums = item_bootstrap_sums(pairs, resamples=resamples, rng=rng)
        out.append(percentile_interval(safe_ratio(sums[:, 1], sums[:, 0]), level))
    return out


def _share(numerator: np.ndarray, denominator: np.ndarray) -> float:
    total = float(denominator.sum())
    return float(numerator.sum()) / total if total else NAN


def _groups(judgments: HaloJudgments) -> list[tuple[str, np.ndarray]]:
    """(model, mask) for every model by name, then (POOLED, everything)."""
    models = sorted(set(judgments.model.tolist()))
    return [(m, judgments.model == m) for m in models] + [
        (POOLED, np.ones(judgments.model.size, dtype=bool))
    ]


def _over_under(j: HaloJudgments) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per judgment: rejected; over-proactive (premature or excessive); under-proactive
    (belated, insufficient or inaction). Over and under are only ever true of a rejection."""
    rejected = ~j.acceptable
    inaction = rejected & (j.level == L0)
    over = rejected & ((j.timing == PREMATURE) | (j.intensity == EXCESSIVE))
    under = rejected & ((j.timing == BELATED) | (j.intensity == INSUFFICIENT) | inaction)
    return rejected, over, under


# --- Acceptability ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AcceptabilityRow:
    model: str
    n_checkpoints: int
    n_replies: int
    n_judgments: int
    n_acceptable: int
    acceptability: float
    ci: tuple[float, float]
    shares: dict[str, float]  # of all judgments: HALO's Table 1 error rates and restraint


def acceptability_table(
    judgments: HaloJudgments, *, seed: int = DEFAULT_SEED, resamples: int = CHECKPOINT_RESAMPLES
) -> list[AcceptabilityRow]:
    """Per model, then POOLED: the share of judgments that accept the reply (checkpoint
    bootstrap CI), and HALO's Table 1 shares of all judgments."""
    rows = []
    for model, mask in _groups(judgments):
        j = judgments.subset(mask)
        ones = np.ones(j.acceptable.size)
        rejected = ~j.acceptable
        categories = {
            "justified_restraint": j.acceptable & (j.level == L0),
            "inaction": rejected & (j.level == L0),
            "premature": j.timing == PREMATURE,
            "belated": j.timing == BELATED,
            "insufficient": j.intensity == INSUFFICIENT,
            "excessive": j.intensity == EXCESSIVE,
            "other_issues": j.issues.any(axis=1),
        }
        (ci,) = cluster_ratio_intervals(
            [j.acceptable],
            ones,
            j.checkpoint,
            rng=rng_for(seed, "halo-acceptability", model),
            resamples=resamples,
        )
        rows.append(
            AcceptabilityRow(
                model=model,
                n_checkpoints=int(np.unique(j.checkpoint).size),
                n_replies=int(np.unique(j.reply).size),
                n_judgments=int(j.acceptable.size),
                n_acceptable=int(j.acceptable.sum()),
                acceptability=_share(j.acceptable, ones),
                ci=ci,
                shares={name: _share(hit, ones) for name, hit in categories.items()},
            )
        )
    return rows


# --- Over- and under-proactive ----------------------------------------------------------------


@dataclass(frozen=True)
class ProactivityRow:
    model: str
    n_rejected: int
    n_over: int
    n_under: int
    n_both: int
    n_neither: int
    over_share: float
    over_ci: tuple[float, float]
    under_share: float
    under_ci: tuple[float, float]


def proactivity_table(
    judgments: HaloJudgments, *, seed: int = DEFAULT_SEED, resamples: int = CHECKPOINT_RESAMPLES
) -> list[ProactivityRow]:
    """Per model, then POOLED: of the rejected judgments, the share over-proactive and the
    share under-proactive (not exclusive: see the module docstring), with checkpoint
    bootstrap CIs."""
    rows = []
    for model, mask in _groups(judgments):
        j = judgments.subset(mask)
        rejected, over, under = _over_under(j)
        over_ci, under_ci = cluster_ratio_intervals(
            [over, under],
            rejected,
            j.checkpoint,
            rng=rng_for(seed, "halo-proactivity", model),
            resamples=resamples,
        )
        rows.append(
            ProactivityRow(
                model=model,
                n_rejected=int(rejected.sum()),
                n_over=int(over.sum()),
                n_under=int(under.sum()),
                n_both=int((over & under).sum()),
                n_neither=int((rejected & ~over & ~under).sum()),
                over_share=_share(over, rejected),
                over_ci=over_ci,
                under_share=_share(under, rejected),
                under_ci=under_ci,
            )
        )
    return rows


# --- Timing × intensity -----------------------------------------------------------------------


@dataclass(frozen=True)
class TimingIntensityRow:
    model: str
    timing: str
    counts: dict[str, int]  # intensity → rejected interventions with this timing and intensity
    n_interventions: int  # the model's rejected interventions (the shares' denominator)


def timing_intensity_table(judgments: HaloJudgments) -> list[TimingIntensityRow]:
    """Per model (then POOLED) and timing: the rejected interventions (L1–L3) by intensity."""
    rows = []
    for model, mask in _groups(judgments):
        j = judgments.subset(mask)
        asked = j.timing >= 0
        cells = agreement.confusion_matrix(j.timing[asked], j.intensity[asked], len(TIMINGS))
        for t, timing in enumerate(TIMINGS):
            rows.append(
                TimingIntensityRow(
                    model=model,
                    timing=timing,
                    counts={i: int(cells[t, k]) for k, i in enumerate(INTENSITIES)},
                    n_interventions=int(asked.sum()),
                )
            )
    return rows


# --- Action levels ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LevelRow:
    model: str
    n_judgments: int
    counts: dict[str, int]  # level → judgments
    intervention_rate: float  # L1–L3
    intervention_ci: tuple[float, float]
    n_suggested: int  # judgments whose level was pre-filled
    n_changed: int  # … and changed by the annotator


def level_table(
    judgments: HaloJudgments, *, seed: int = DEFAULT_SEED, resamples: int = CHECKPOINT_RESAMPLES
) -> list[LevelRow]:
    """Per model, then POOLED: the levels the annotators settled on, the intervention rate
    (L1–L3, checkpoint bootstrap CI) and how often a pre-filled level was changed."""
    rows = []
    for model, mask in _groups(judgments):
        j = judgments.subset(mask)
        intervened = j.level != L0
        ones = np.ones(j.level.size)
        (ci,) = cluster_ratio_intervals(
            [intervened],
            ones,
            j.checkpoint,
            rng=rng_for(seed, "halo-levels", model),
            resamples=resamples,
        )
        suggested = j.suggested >= 0
        rows.append(
            LevelRow(
                model=model,
                n_judgments=int(j.level.size),
                counts={lv: int((j.level == k).sum()) for k, lv in enumerate(ACTION_LEVELS)},
                intervention_rate=_share(intervened, ones),
                intervention_ci=ci,
                n_suggested=int(suggested.sum()),
                n_changed=int((suggested & (j.suggested != j.level)).sum()),
            )
        )
    return rows


# --- Paired comparison ------------------------------------------------------------------------

PAIRED_MEASURES = ("intervention", "acceptability", "accepted_action", "accepted_restraint")


@dataclass(frozen=True)
class PairedRow:
    model_a: str
    model_b: str
    n_checkpoints: int  # shared: both models judged there
    a: dict[str, float]  # measure → model a's mean over the shared checkpoints
    b: dict[str, float]
    delta: dict[str, float]  # a − b
    ci: dict[str, tuple[float, float]]


def paired_table(
    judgments: HaloJudgments, *, seed: int = DEFAULT_SEED, resamples: int = PAIRED_RESAMPLES
) -> list[PairedRow]:
    """Every pair of models (a before b by name) on the checkpoints where both were judged.

    Per checkpoint and model: the share of its judgments that intervene (L1–L3), accept,
    accept an intervention, accept an L0 (restraint); each checkpoint then weighs the same.
    Δ = mean over shared checkpoints of (a − b); Δ acceptability = Δ accepted action +
    Δ accepted restraint exactly (HALO's decomposition). Intervals: percentile bootstrap of the
    shared checkpoints (paired: a checkpoint is resampled with both models' judgments), the
    pair's four figures from one set of ``resamples`` draws."""
    checkpoints = judgments.checkpoint
    models = sorted(set(judgments.model.tolist()))
    model_codes = np.searchsorted(np.array(models, dtype=object), judgments.model)
    shape = (int(checkpoints.max()) + 1 if checkpoints.size else 0, len(models))
    count = np.zeros(shape)
    np.add.at(count, (checkpoints, model_codes), 1)
    values = {
        "intervention": judgments.level != L0,
        "acceptability": judgments.acceptable,
        "accepted_action": judgments.acceptable & (judgments.level != L0),
        "accepted_restraint": judgments.acceptable & (judgments.level == L0),
    }
    means = {}
    for name, hit in values.items():
        total = np.zeros(shape)
        np.add.at(total, (checkpoints, model_codes), hit.astype(float))
        means[name] = safe_ratio(total, count)
    rows = []
    for a, b in combinations(range(len(models)), 2):
        shared = (count[:, a] > 0) & (count[:, b] > 0)
        n = int(shared.sum())
        if n == 0:
            continue
        x = np.column_stack([means[name][shared, a] for name in PAIRED_MEASURES])
        y = np.column_stack([means[name][shared, b] for name in PAIRED_MEASURES])
        # One set of resamples of the shared checkpoints for the pair's four differences.
        sums = item_bootstrap_sums(
            x - y, resamples=resamples, rng=rng_for(seed, "halo-paired", models[a], models[b])
        )
        rows.append(
            PairedRow(
                models[a],
                models[b],
                n,
                a={name: float(x[:, k].mean()) for k, name in enumerate(PAIRED_MEASURES)},
                b={name: float(y[:, k].mean()) for k, name in enumerate(PAIRED_MEASURES)},
                delta={name: float((x - y)[:, k].mean()) for k, name in enumerate(PAIRED_MEASURES)},
                ci={
                    name: percentile_interval(sums[:, k] / n)
                    for k, name in enumerate(PAIRED_MEASURES)
                },
            )
        )
    return rows


# --- Effort beside quality --------------------------------------------------------------------

EFFORT_MEASURES = ("reasoning_tokens", "retrieval_rounds")


@dataclass(frozen=True)
class EffortRow:
    model: str
    n_replies: int
    n_judgments: int
    acceptability: float
    n_with: dict[str, int]  # measure → replies that recorded it
    mean: dict[str, float]  # measure → its mean over those replies


def _per_reply(judgments: HaloJudgments, measure: str) -> tuple[np.ndarray, np.ndarray]:
    """(model, value) of each distinct reply: effort is the reply's, whatever its judgments."""
    _, first = np.unique(judgments.reply, return_index=True)
    return judgments.model[first], getattr(judgments, measure)[first]


def effort_table(judgments: HaloJudgments) -> list[EffortRow]:
    """Per model: acceptability (over judgments) beside the mean reasoning tokens and
    retrieval rounds of its replies (over the replies that recorded them)."""
    per_reply = {m: _per_reply(judgments, m) for m in EFFORT_MEASURES}
    rows = []
    for model in sorted(set(judgments.model.tolist())):
        mask = judgments.model == model
        n_with, mean = {}, {}
        for measure, (models, value) in per_reply.items():
            mine = value[(models == model) & ~np.isnan(value)]
            n_with[measure] = int(mine.size)
            mean[measure] = float(mine.mean()) if mine.size else NAN
        rows.append(
            EffortRow(
                model=model,
                n_replies=int(np.unique(judgments.reply[mask]).size),
                n_judgments=int(mask.sum()),
                acceptability=float(judgments.acceptable[mask].mean()) if mask.any() else NAN,
                n_with=n_with,
                mean=mean,
            )
        )
    return rows


@dataclass(frozen=True)
class EffortCorrelationRow:
    measure: str
    method: str  # pearson, spearman
    correlation: Correlation
    note: str


SPEARMAN_SE_FACTOR = 1.06
"""Fieller, Hartley & Pearson (1957): the Fisher-z standard error of Spearman's ρ is
sqrt(1.06 / (n − 3))."""
MIN_MODELS_R, MIN_MODELS_CI = 3, 4


def spearman_with_fisher_ci(
    x: np.ndarray, y: np.ndarray, *, level: float = CONFIDENCE
) -> Correlation:
    """Spearman's ρ (``scipy.stats.spearmanr``, two-sided p) with a Fisher-z interval
    ``tanh(atanh ρ ± z_crit · sqrt(1.06 / (n − 3)))`` (needs n ≥ 4)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    n = int(x.size)
    if n < MIN_MODELS_R or np.ptp(x) == 0 or np.ptp(y) == 0:
        return Correlation(n, NAN, NO_CI, NAN)
    result = scipy_stats.spearmanr(x, y)
    rho = float(result.statistic)
    if n < MIN_MODELS_CI or abs(rho) == 1:
        ci = NO_CI if n < MIN_MODELS_CI else (rho, rho)
    else:
        half = scipy_stats.norm.ppf(1 - (1 - level) / 2) * np.sqrt(SPEARMAN_SE_FACTOR / (n - 3))
        ci = (float(np.tanh(np.arctanh(rho) - half)), float(np.tanh(np.arctanh(rho) + half)))
    return Correlation(n, rho, ci, float(result.pvalue))


def _correlation_note(c: Correlation, x: np.ndarray, y: np.ndarray) -> str:
    keep = ~(np.isnan(x) | np.isnan(y))
    if c.n < MIN_MODELS_R:
        return (
            f"undefined: {c.n} model(s) with this effort recorded; at least {MIN_MODELS_R} needed"
        )
    if np.ptp(x[keep]) == 0 or np.ptp(y[keep]) == 0:
        return "undefined: every model has the same value"
    if c.n < MIN_MODELS_CI:
        return f"no interval: {c.n} models; Fisher's z needs at least {MIN_MODELS_CI}"
    return ""


def effort_correlation_table(rows: list[EffortRow]) -> list[EffortCorrelationRow]:
    """At model level, each effort measure's mean against acceptability: Pearson r and
    Spearman ρ, Fisher-z 95% intervals where there are at least four models (a model-level
    association across few points, not a causal effect)."""
    y = np.array([r.acceptability for r in rows], dtype=float)
    out = []
    for measure in EFFORT_MEASURES:
        x = np.array([r.mean[measure] for r in rows], dtype=float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SciPy warns on constant input: reported as a note
            for method, correlation in (
                ("pearson", pearson_with_fisher_ci(x, y)),
                ("spearman", spearman_with_fisher_ci(x, y)),
            ):
                out.append(
                    EffortCorrelationRow(
                        measure, method, correlation, _correlation_note(correlation, x, y)
                    )
                )
    return out


# --- Agreement per question -------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionAgreementRow:
    question: str
    ordinal: bool  # α computed ordinal (the level) or nominal
    n_units: int  # replies with at least two answers to this question
    n_ratings: int  # answers to it on those replies
    percent_agreement: float  # mean over those replies of the share of agreeing answer pairs
    alpha: float
    alpha_ci: tuple[float, float]
    fleiss_kappa: float
    fleiss_ci: tuple[float, float]


def _questions(j: HaloJudgments) -> list[tuple[str, np.ndarray, int, bool]]:
    """(question, code per judgment with -1 where not asked, categories, ordinal)."""
    rejected = ~j.acceptable
    out = [
        ("level", j.level, len(ACTION_LEVELS), True),
        ("acceptable", j.acceptable.astype(np.int64), 2, False),
        ("timing", j.timing, len(TIMINGS), False),
        ("intensity", j.intensity, len(INTENSITIES), False),
    ]
    for k, issue in enumerate(OTHER_ISSUES):
        flagged = np.where(rejected, j.issues[:, k].astype(np.int64), -1)
        out.append((f"issue_{issue}", flagged, 2, False))
    return out


def agreement_table(
    judgments: HaloJudgments, *, seed: int = DEFAULT_SEED, resamples: int = REPLY_RESAMPLES
) -> list[QuestionAgreementRow]:
    """Per question, over the replies (units) answered by two or more annotators: percent
    agreement, Krippendorff's α (ordinal for the level, else nominal) and Fleiss' κ, each with a
    reply-bootstrap CI (``agreement``). A conditional question (timing, intensity: rejected
    interventions; other issues: rejected replies) counts only the annotators who were asked
    it, so its agreement is conditional on theirs."""
    units = judgments.reply  # dense codes 0 … replies − 1
    n_units = int(units.max()) + 1 if units.size else 0
    rows = []
    for question, codes, k, ordinal in _questions(judgments):
        asked = codes >= 0
        counts = np.zeros((n_units, k), dtype=np.int64)
        np.add.at(counts, (units[asked], codes[asked]), 1)
        counts = counts[counts.sum(axis=1) >= 2]
        m = counts.sum(axis=1)
        pairs = safe_ratio(((counts * (counts - 1)).sum(axis=1)), m * (m - 1))
        level: agreement.Level = "ordinal" if ordinal else "nominal"

        def rng(what: str, question: str = question) -> np.random.Generator:
            return rng_for(seed, "halo-agreement", question, what)

        rows.append(
            QuestionAgreementRow(
                question=question,
                ordinal=ordinal,
                n_units=int(counts.shape[0]),
                n_ratings=int(m.sum()),
                percent_agreement=float(pairs.mean()) if pairs.size else NAN,
                alpha=agreement.krippendorff_alpha(counts, level),
                alpha_ci=agreement.krippendorff_alpha_ci(
                    counts, level, rng=rng("alpha"), resamples=resamples
                )
                if counts.size
                else NO_CI,
                fleiss_kappa=agreement.fleiss_kappa(counts),
                fleiss_ci=agreement.fleiss_kappa_ci(counts, rng=rng("fleiss"), resamples=resamples),
            )
        )
    return rows
