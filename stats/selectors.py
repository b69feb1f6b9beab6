"""Read side of the statistics: fetch a run's verdicts (and the corpus facts they need) in a
fixed, small number of queries, as NumPy arrays for ``stats.compute``. The tables themselves
(what they compute from these, their columns) are declared in ``stats.tables``, one module each;
``stats.tables.build`` is the entry point that builds one.

The verdict source is chosen per request (``VerdictSource``): the run's primary judge, a named
judge, or *adjudicated* — a person's final verdict (``JudgeDisagreement.final_verdict``) where
the annotation app recorded one, the primary judge's verdict everywhere else.

The human-study tables read ``stats.interfaces`` structures, from one of two sources: a study
recorded in the Workbench (``study_label_matrix`` / ``study_preference`` /
``study_failure_modes`` below, reading the annotation app's answers through ``stats.studies``)
or the official release's human-eval files (``stats.release_files``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from django.db.models import Case, Count, F, FilteredRelation, Q, Value, When

from annotation.kinds.selection import source_label
from annotation.models import Study
from benchmark.models import (
    Anchor,
    ClassificationState,
    Condition,
    Domain,
    EvaluationRun,
    EvaluationUnit,
    FailureModeClassification,
    JudgeDisagreement,
    Judgment,
    JudgmentRepeat,
    JudgmentState,
    ModelEndpoint,
    PairOrder,
    PairwiseComparison,
    PairwiseJudgment,
    RunStatus,
    Trigger,
    TriggerType,
)
from benchmark.vocabulary import FAILURE_MODES, VERDICT_CODES, VERDICT_ORDER
from stats import release_files, studies
from stats.compute import agreement
from stats.compute.pairwise_consistency import ERROR, NOT_ASKED
from stats.compute.resampling import BATTLE_RESAMPLES, DEFAULT_SEED
from stats.interfaces import (
    BATTLE_OUTCOME_CODES,
    Battles,
    FailureModeLabel,
    FailureModeLabels,
    HaloJudgments,
    JudgedPairs,
    LabelMatrix,
    PreferenceJudgements,
    ProposalVotes,
)
from stats.models import ExternalBenchmarkScore

if TYPE_CHECKING:
    pass


class StatsInputError(ValueError):
    """A request the data cannot answer (unknown judge, no run, no annotation data); the message
    says what to do instead."""


@dataclass(frozen=True)
class VerdictSource:
    kind: Literal["primary", "judge", "adjudicated"]
    judge: str = ""

    @classmethod
    def parse(cls, text: str | None) -> VerdictSource:
        """``primary`` (or empty), ``adjudicated``, or a judge's handle (``judge:`` optional)."""
        text = (text or "").strip()
        if text in ("", "primary"):
            return cls("primary")
        if text == "adjudicated":
            return cls("adjudicated")
        return cls("judge", text.removeprefix("judge:"))

    @property
    def label(self) -> str:
        return self.judge if self.kind == "judge" else self.kind


@dataclass(frozen=True)
class TableRequest:
    """What a table is computed from; built by the dashboard form, the API serializer and the
    command alike."""

    run: EvaluationRun | None = None
    verdicts: VerdictSource = VerdictSource("primary")
    condition: str = Condition.VANILLA
    study: int | None = None
    include_excluded: bool = False  # count the raters a study excludes (study tables)
    release_dir: Path | None = None
    seed: int = DEFAULT_SEED
    # A majority label vs a judge: tied items dropped, or ties broken as the release does
    # (``agreement.MAJORITY_RULES``).
    majority: Literal["drop", "release"] = "drop"
    # The preference table's item-clustered bootstrap: the app's seeded, order-independent
    # stream, or the release's (``preference.release_stream_interval``).
    stream: Literal["app", "release"] = "app"
    # The ranking tables (arena-ranking, arena-pairs): where their battles come from
    # (``BATTLE_SOURCES``, read by ``battles_for``), the tie rule (``bradley_terry.TIE_RULES``),
    # the source whose rating is fixed at the base ("" for none: the mean is) and the
    # bootstrap's resamples (``BATTLE_RESAMPLES_RANGE``).
    battles: str = "study"
    ties: str = "half"
    anchor: str = ""
    resamples: int = BATTLE_RESAMPLES
    # What the tables of one request share (the run's replies; the study and its answers),
    # fetched once however many of them are drawn.
    cache: dict = field(default_factory=dict, compare=False, repr=False)

    def params(self) -> dict:
        out: dict = {"seed": self.seed}
        # The options are shown when they differ from the default (the tables they change say
        # which rule or stream they used in their notes either way).
        if self.majority != "drop":
            out["majority"] = self.majority
        if self.stream != "app":
            out["stream"] = self.stream
        if self.battles != "study":
            out["battles"] = self.battles
        if self.ties != "half":
            out["ties"] = self.ties
        if self.anchor:
            out["anchor"] = self.anchor
        if self.resamples != BATTLE_RESAMPLES:
            out["resamples"] = self.resamples
        if self.run is not None:
            out.update(run=self.run.pk, verdicts=self.verdicts.label, condition=str(self.condition))
        if self.study is not None:
            out.update(study=self.study, include_excluded=self.include_excluded)
        if self.release_dir is not None:
            out["release_dir"] = str(self.release_dir)
        return out


# --- Runs -------------------------------------------------------------------------------------


def default_run() -> EvaluationRun | None:
    """The pinned run, else the newest finished run, else the newest run (one query)."""
    finished_first = Case(When(status=RunStatus.DONE, then=Value(0)), default=Value(1))
    return (
        EvaluationRun.objects.select_related("primary_judge")
        .order_by(F("pinned").desc(), finished_first, "-created_at", "-pk")
        .first()
    )


def run_judge_names(run: EvaluationRun) -> list[str]:
    """The run's judges by name: its configured ``judges`` and every ``Judgment.judge_name`` of
    its units. An imported run's judgments carry only a name (``judge`` is NULL) and a judge
    added by a re-judge may be mid-way, so the names in the judgments count as judges too."""
    configured = run.judges.order_by().values_list("name", flat=True)
    judged = Judgment.objects.filter(unit__run=run).order_by().values_list("judge_name", flat=True)
    return sorted(set(judged.union(configured)))  # one query: UNION removes duplicates


@dataclass(frozen=True)
class RunReplies:
    """One entry per reply (unit) of a run in one condition, aligned arrays."""

    unit_id: np.ndarray
    model: np.ndarray  # endpoint handle
    trigger_id: np.ndarray
    trigger_type: np.ndarray
    turn: np.ndarray
    dialogue_id: np.ndarray
    style: np.ndarray
    sample: np.ndarray  # the unit's sample index (a run may draw several replies per trigger)
    domain: np.ndarray  # the dialogue's domain key
    verdict: np.ndarray  # codes; -1 = no verdict from the chosen source
    display: dict[str, str]  # endpoint handle → display name


def _units(run: EvaluationRun, condition: str):
    return list(
        EvaluationUnit.objects.filter(run=run, condition=condition)
        .order_by("id")
        .values_list(
            "id",
            "endpoint__name",
            "endpoint__display_name",
            "trigger_id",
            "trigger__type",
            "trigger__turn__index",
            "trigger__turn__dialogue_id",
            "trigger__turn__dialogue__style__index",
            "sample_index",
            "trigger__turn__dialogue__domain__key",
        )
    )


def _verdicts_into(unit_ids: np.ndarray, pairs, out: np.ndarray) -> None:
    """Write (unit id, verdict) pairs into ``out`` aligned with the sorted ``unit_ids``."""
    pairs = list(pairs)
    if not pairs:
        return
    ids = np.fromiter((p[0] for p in pairs), dtype=np.int64, count=len(pairs))
    codes = np.fromiter((VERDICT_CODES[p[1]] for p in pairs), dtype=np.int64, count=len(pairs))
    position = np.searchsorted(unit_ids, ids)
    out[position] = codes


def judge_name_for(run: EvaluationRun, source: VerdictSource) -> str:
    """The judge whose verdicts ``source`` reads on ``run``: the named judge, checked against
    the run's judges, or the run's primary judge. Raises StatsInputError naming the choices."""
    if source.kind == "judge":
        names = run_judge_names(run)
        if source.judge not in names:
            raise StatsInputError(
                f"run {run.pk} has no judge {source.judge!r} (its judges: "
                f"{', '.join(names) or 'none'}; or use primary / adjudicated)"
            )
        return source.judge
    if run.primary_judge_id is None:
        raise StatsInputError(f"run {run.pk} has no primary judge: name a judge instead")
    return ModelEndpoint.objects.values_list("name", flat=True).get(pk=run.primary_judge_id)


def _replies_from_rows(rows: list[tuple]) -> RunReplies:
    return RunReplies(
        unit_id=np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)),
        model=np.array([r[1] for r in rows], dtype=object),
        trigger_id=np.fromiter((r[3] for r in rows), dtype=np.int64, count=len(rows)),
        trigger_type=np.array([r[4] for r in rows], dtype=object),
        turn=np.fromiter((r[5] for r in rows), dtype=np.int64, count=len(rows)),
        dialogue_id=np.fromiter((r[6] for r in rows), dtype=np.int64, count=len(rows)),
        style=np.fromiter((r[7] for r in rows), dtype=np.int64, count=len(rows)),
        sample=np.fromiter((r[8] for r in rows), dtype=np.int64, count=len(rows)),
        domain=np.array([r[9] for r in rows], dtype=object),
        verdict=np.full(len(rows), -1, dtype=np.int64),
        display={r[1]: r[2] for r in rows},
    )


def run_replies(*, run: EvaluationRun, verdicts: VerdictSource, condition: str) -> RunReplies:
    """Every reply of ``run`` in ``condition`` with its verdict from ``verdicts``: 3 queries (4
    for adjudicated)."""
    judge = judge_name_for(run, verdicts)
    replies = _replies_from_rows(_units(run, condition))
    _verdicts_into(
        replies.unit_id,
        Judgment.objects.filter(
            unit__run=run,
            unit__condition=condition,
            judge_name=judge,
            state=JudgmentState.DONE,
        ).values_list("unit_id", "verdict"),
        replies.verdict,
    )
    if verdicts.kind == "adjudicated":
        _verdicts_into(
            replies.unit_id,
            JudgeDisagreement.objects.filter(unit__run=run, unit__condition=condition)
            .exclude(final_verdict="")
            .values_list("unit_id", "final_verdict"),
            replies.verdict,
        )
    return replies


def domain_names() -> dict[str, str]:
    """Every domain's key → name, in the domains' order. One query."""
    return dict(Domain.objects.order_by("order", "key").values_list("key", "name"))


def require_run(request: TableRequest) -> EvaluationRun:
    if request.run is None:
        raise StatsInputError("no evaluation run yet: run or import one first")
    return request.run


def replies_for(request: TableRequest) -> RunReplies:
    """``run_replies`` for the request's run, verdict source and condition, read once however
    many tables of the request use them."""
    if "replies" not in request.cache:
        request.cache["replies"] = run_replies(
            run=require_run(request), verdicts=request.verdicts, condition=request.condition
        )
    return request.cache["replies"]


def replies_in(request: TableRequest, condition: str) -> RunReplies:
    """``replies_for`` in ``condition`` whatever the request's own: the request's replies when
    it is the same condition, else read once per request."""
    if str(condition) == str(request.condition):
        return replies_for(request)
    key = ("replies", str(condition))
    if key not in request.cache:
        request.cache[key] = run_replies(
            run=require_run(request), verdicts=request.verdicts, condition=condition
        )
    return request.cache[key]


# --- Judges, anchors and external benchmarks of a run -----------------------------------------


def judge_matrix(
    *, replies: RunReplies, run: EvaluationRun, condition: str
) -> tuple[list[str], np.ndarray]:
    """Every judge's verdict on every one of ``replies``: units × judges codes (-1: none).
    2 queries."""
    judges = run_judge_names(run)
    by_judge: dict[str, list] = {name: [] for name in judges}
    for unit_id, judge_name, verdict in Judgment.objects.filter(
        unit__run=run, unit__condition=condition, state=JudgmentState.DONE
    ).values_list("unit_id", "judge_name", "verdict"):
        if judge_name in by_judge:
            by_judge[judge_name].append((unit_id, verdict))
    matrix = np.full((replies.unit_id.size, len(judges)), -1, dtype=np.int64)
    for j, name in enumerate(judges):
        column = np.full(replies.unit_id.size, -1, dtype=np.int64)
        _verdicts_into(replies.unit_id, by_judge[name], column)
        matrix[:, j] = column
    return judges, matrix


def disclosure_distances(trigger_ids: np.ndarray, dialogue_ids: np.ndarray, turns: np.ndarray):
    """d = trigger turn − first disclosure turn, per reply. The anchors the trigger's rubric
    relies on when they are linked; otherwise every anchor of the dialogue disclosed before the
    trigger turn. NaN where no anchor with a known turn exists. Two queries."""
    linked: dict[int, int] = {}
    for trigger_id, turn in Trigger.anchors.through.objects.filter(
        trigger_id__in=set(trigger_ids.tolist()), anchor__disclosed_in__isnull=False
    ).values_list("trigger_id", "anchor__disclosed_in__index"):
        linked[trigger_id] = min(turn, linked.get(trigger_id, turn))
    disclosed: dict[int, list[int]] = {}
    for dialogue_id, turn in Anchor.objects.filter(
        dialogue_id__in=set(dialogue_ids.tolist()), disclosed_in__isnull=False
    ).values_list("dialogue_id", "disclosed_in__index"):
        disclosed.setdefault(dialogue_id, []).append(turn)
    out = np.full(trigger_ids.size, np.nan)
    for i, (trigger_id, dialogue_id, turn) in enumerate(
        zip(trigger_ids.tolist(), dialogue_ids.tolist(), turns.tolist(), strict=True)
    ):
        first = linked.get(trigger_id)
        if first is None:
            earlier = [t for t in disclosed.get(dialogue_id, ()) if t < turn]
            first = min(earlier) if earlier else None
        if first is not None:
            out[i] = turn - first
    return out


def benchmark_scores(models: list[str]) -> tuple[list[str], np.ndarray]:
    """The uploaded external benchmarks of ``models`` (sorted) and their scores: models ×
    benchmarks, in the order of ``models``, NaN where a model has no score. One query."""
    uploaded = list(
        ExternalBenchmarkScore.objects.filter(endpoint__name__in=models).values_list(
            "endpoint__name", "benchmark", "score"
        )
    )
    benchmarks = sorted({b for _, b, _ in uploaded})
    scores = np.full((len(models), len(benchmarks)), np.nan)
    row_of = {name: i for i, name in enumerate(models)}
    column_of = {b: j for j, b in enumerate(benchmarks)}
    for model, benchmark, score in uploaded:
        scores[row_of[model], column_of[benchmark]] = score
    return benchmarks, scores


# --- What the study tables read ---------------------------------------------------------------

NO_STUDY = (
    "the {table} table reads a human study: choose one (study=ID / --study ID; staff see every "
    "study at /annotate/studies/), or pass the official release's folder (release_dir / "
    "--release-dir) for its Study 1 and Study 2"
)


def study_for_table(*, study_id: int, table: str, cache: dict | None = None) -> Study:
    """The study, with its run and primary judge, checked to be of a kind ``table`` reads."""
    cache = {} if cache is None else cache
    if cache.get("study") is None or cache["study"].pk != study_id:
        cache.clear()  # a cache belongs to one study
        cache["study"] = (
            Study.objects.select_related("run__primary_judge").filter(pk=study_id).first()
        )
    study = cache["study"]
    if study is None:
        raise StatsInputError(f"no study {study_id}")
    if table not in studies.tables_for_kind(study.kind):
        readers = [label.lower() for label in studies.kinds_reading(table)]
        raise StatsInputError(
            f"study {study_id} is a {study.get_kind_display().lower()} study: the {table} table "
            f"reads {' or '.join(readers)} studies"
        )
    return study


def _study_data(*, study_id: int, table: str, cache: dict | None) -> studies.StudyData:
    cache = {} if cache is None else cache
    study = study_for_table(study_id=study_id, table=table, cache=cache)
    if "answers" not in cache:
        cache["answers"] = studies.study_data(study)
    return cache["answers"]


def study_label_matrix(
    *, study_id: int, include_excluded: bool = False, cache: dict | None = None
) -> tuple[LabelMatrix, list[str]]:
    """Every live label of one study (any kind) as a ``LabelMatrix``, and notes for the table.
    Raters the study excludes are left out unless ``include_excluded``. ``cache``: a dict the
    tables of one request share (the study and its answers are then read once)."""
    data = _study_data(study_id=study_id, table="human-agreement", cache=cache)
    return studies.label_matrix(data, include_excluded=include_excluded)


def study_preference(
    *, study_id: int, cache: dict | None = None
) -> tuple[PreferenceJudgements, frozenset[str], list[str]]:
    """A pairwise study's live judgements (de-swapped), the raters it excludes, and notes."""
    return studies.preference_judgements(
        _study_data(study_id=study_id, table="preference", cache=cache)
    )


def study_failure_modes(
    *, study_id: int, include_excluded: bool = False, cache: dict | None = None
) -> tuple[FailureModeLabels, list[str]]:
    """A failure-mode study's labels, one per labelled reply (its annotators' majority), and
    notes. Raters the study excludes are left out unless ``include_excluded``."""
    data = _study_data(study_id=study_id, table="failure-modes", cache=cache)
    return studies.failure_mode_labels(data, include_excluded=include_excluded)


def label_matrix_for(request: TableRequest, *, table: str) -> tuple[LabelMatrix, list[str]]:
    """The labels ``table`` reads: the release's Study 1 files, or the request's study."""
    if request.release_dir is not None:
        return release_files.study1_from_release(request.release_dir), []
    if request.study is not None:
        return study_label_matrix(
            study_id=request.study,
            include_excluded=request.include_excluded,
            cache=request.cache.setdefault("study", {}),
        )
    raise StatsInputError(NO_STUDY.format(table=table))


MAJORITY_NOTES = {
    "drop": "majority label: items whose top labels tie are left out (majority=drop; "
    "majority=release breaks ties Partial > Pass > Fail as the ProactBench release does)",
    "release": "majority label: ties broken Partial > Pass > Fail, as the ProactBench release "
    "does (majority=release; majority=drop leaves tied items out)",
}


def majority_tie_rule(request: TableRequest, categories: tuple[str, ...]) -> agreement.TieRule:
    """The tie rule the request's ``majority`` option names, checked against the labels."""
    if request.majority not in agreement.MAJORITY_RULES:
        raise StatsInputError(f"majority is drop or release, not {request.majority!r}")
    if request.majority == "release" and tuple(categories) != VERDICT_ORDER:
        raise StatsInputError(
            "majority=release breaks ties between verdicts (Partial > Pass > Fail): this "
            f"study's labels are {', '.join(categories)}; use majority=drop"
        )
    return agreement.MAJORITY_RULES[request.majority]


def majority_note(request: TableRequest) -> str:
    return MAJORITY_NOTES[request.majority]


def preference_for(
    request: TableRequest, *, table: str
) -> tuple[PreferenceJudgements, frozenset[str], list[str]]:
    """The pairwise judgements ``table`` reads (the release's Study 2 files, or the request's
    study), the raters the study excludes, and notes."""
    if request.release_dir is not None:
        return release_files.pairwise_from_release(request.release_dir), frozenset(), []
    if request.study is not None:
        return study_preference(study_id=request.study, cache=request.cache.setdefault("study", {}))
    raise StatsInputError(NO_STUDY.format(table=table))


def failure_mode_labels_for(
    request: TableRequest, *, table: str
) -> tuple[FailureModeLabels, list[str]]:
    """The request's failure-mode study's labels (the release has none per reply), and notes."""
    if request.study is None:
        raise StatsInputError(
            "the release publishes no per-reply failure-mode labels"
            if request.release_dir is not None
            else NO_STUDY.format(table=table)
        )
    return study_failure_modes(
        study_id=request.study,
        include_excluded=request.include_excluded,
        cache=request.cache.setdefault("study", {}),
    )


# --- Battles, for the ranking tables -----------------------------------------------------------

BATTLE_SOURCES = ("study", "judge")
"""Where the ranking tables' battles come from (``TableRequest.battles``; ``battles_for``):
``study`` — the live answers of the request's arena or pairwise study; ``judge`` — the
consistent verdicts of one LLM pairwise judge on the request's run (``verdicts`` names the
judge as the run tables name theirs: ``primary`` or a judge's name)."""

NO_BATTLES = (
    "the {table} table reads a human study: choose one whose answers are battles, {kinds} "
    "(study=ID / --study ID; staff see every study at /annotate/studies/), or an LLM pairwise "
    "judge's verdicts on a run (battles=judge, run=ID, verdicts=JUDGE)"
)


def pairwise_judge_for(run: EvaluationRun, source: VerdictSource) -> str:
    """The pairwise judge ``source`` names on ``run``: a judge's name, or ``primary`` — the
    run's primary judge (which must have judged pairs too). People adjudicate no pairwise
    verdict, so ``adjudicated`` names none. ``run_pairwise_battle_counts`` checks the name."""
    if source.kind == "adjudicated":
        raise StatsInputError(
            "battles=judge reads an LLM pairwise judge's verdicts: verdicts is primary or a "
            "pairwise judge's name, not adjudicated (no pairwise verdict is adjudicated)"
        )
    if source.kind == "judge":
        return source.judge
    return judge_name_for(run, source)  # the primary judge's name


def _judge_battles(run: EvaluationRun, judge: str) -> tuple[Battles, list[str]]:
    """A pairwise judge's consistent verdicts on ``run`` as battles, counted by the database,
    and notes saying what was left out."""
    skipped: Counter[str] = Counter()
    counts = run_pairwise_battle_counts(run=run, judge=judge, skipped=skipped)
    battles = Battles.from_counts((c.source_a, c.source_b, c.winner, c.count) for c in counts)
    left_out = sum(skipped.values())
    judged = len(battles) + left_out
    notes = [
        f"battles: LLM pairwise judge {judge}'s verdicts on run {run.pk} (every comparison, "
        f"whatever its condition), a battle where the verdict survives the swap of the two "
        f"replies: {len(battles):,} of the {judged:,} comparisons it judged",
    ]
    if left_out:
        notes.append(
            f"left out: {skipped['inconsistent']:,} inconsistent (the verdict flipped with the "
            f"order), {skipped['judge error']:,} with a judge error, "
            f"{skipped['one order only']:,} judged in one order only (the "
            "pairwise-judge-consistency table has the flip rate)"
        )
    return battles, notes


def battles_for(request: TableRequest, *, table: str) -> tuple[Battles, list[str]]:
    """The battles ``table`` ranks, from the request's battle source (``BATTLE_SOURCES``), and
    notes for the table; read once however many tables of the request rank them."""
    if request.battles == "study":
        if request.study is None:
            kinds = " or ".join(label.lower() for label in studies.kinds_reading(table))
            raise StatsInputError(NO_BATTLES.format(table=table, kinds=kinds))
        cache = request.cache.setdefault("study", {})
        study = study_for_table(study_id=request.study, table=table, cache=cache)
        key = ("battles", request.include_excluded)
        if key not in cache:
            cache[key] = studies.battles(study, include_excluded=request.include_excluded)
        return cache[key]
    if request.battles == "judge":
        if request.run is None:
            raise StatsInputError(
                "battles=judge ranks an LLM pairwise judge's verdicts on a run: no evaluation "
                "run yet (run=ID / --run ID)"
            )
        judge = pairwise_judge_for(request.run, request.verdicts)
        judge_key = ("judge battles", request.run.pk, judge)
        if judge_key not in request.cache:
            request.cache[judge_key] = _judge_battles(request.run, judge)
        return request.cache[judge_key]
    raise StatsInputError(
        f"battles is {' or '.join(BATTLE_SOURCES)} (where the battles come from), not "
        f"{request.battles!r}"
    )


# --- People and LLM pairwise judges on the same pairs ------------------------------------------

NO_JUDGED_PAIRS = (
    "the {table} table reads a human study: choose one whose answers are battles, {kinds}, "
    "whose pairs LLM pairwise judges compared too (study=ID / --study ID; judge_pairs RUN "
    "--pairs study=ID asks a judge for them)"
)


def judged_pairs_for(request: TableRequest, *, table: str) -> tuple[JudgedPairs, list[str]]:
    """The request's study's pairs of replies with people's labels and the LLM pairwise judges'
    verdicts on the same pairs (``studies.judged_pairs``), read once per request, and notes."""
    if request.study is None:
        kinds = " or ".join(label.lower() for label in studies.kinds_reading(table))
        raise StatsInputError(NO_JUDGED_PAIRS.format(table=table, kinds=kinds))
    cache = request.cache.setdefault("study", {})
    data = _study_data(study_id=request.study, table=table, cache=cache)
    key = ("judged pairs", request.include_excluded)
    if key not in cache:
        cache[key] = studies.judged_pairs(
            cache["study"], data, include_excluded=request.include_excluded
        )
    return cache[key]


# --- HALO diagnoses --------------------------------------------------------------------------


def halo_judgments_for(request: TableRequest, *, table: str) -> tuple[HaloJudgments, list[str]]:
    """The request's HALO study's diagnoses (``studies.halo_judgments``), read once however many
    of the HALO tables the request draws, and notes."""
    if request.study is None:
        raise StatsInputError(
            f"the {table} table reads a human study: choose one, a HALO diagnosis study "
            "(study=ID / --study ID; staff see every study at /annotate/studies/)"
        )
    cache = request.cache.setdefault("study", {})
    study = study_for_table(study_id=request.study, table=table, cache=cache)
    key = ("halo", request.include_excluded)
    if key not in cache:
        cache[key] = studies.halo_judgments(study, include_excluded=request.include_excluded)
    judgments, notes = cache[key]
    return judgments, list(notes)


# --- A judge's repeats -----------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeEpochs:
    """One judge's verdicts on the replies it judged more than once: ``epochs[i, e]`` the code
    of epoch e (0: the judgment) on reply i, -1 none; ``trigger_type[i]`` its trigger type."""

    judge: str
    epochs: np.ndarray
    trigger_type: np.ndarray


def judge_epochs_for(request: TableRequest) -> list[JudgeEpochs]:
    """Every judge of the request's run with repeats (``JudgmentRepeat``) in its condition,
    by name: one query when there are none, two otherwise. Failed (``judge_error``) epochs are
    missing verdicts."""
    run = require_run(request)
    repeats = list(
        JudgmentRepeat.objects.filter(
            unit__run=run, unit__condition=request.condition, state=JudgmentState.DONE
        ).values_list("unit_id", "judge_name", "epoch", "verdict", "unit__trigger__type")
    )
    if not repeats:
        return []
    units = {r[0] for r in repeats}
    judges = sorted({r[1] for r in repeats})
    first = Judgment.objects.filter(
        unit_id__in=units, judge_name__in=judges, state=JudgmentState.DONE
    ).values_list("unit_id", "judge_name", "verdict")
    cells = [(u, j, 0, v) for u, j, v in first] + [(u, j, e, v) for u, j, e, v, _ in repeats]
    types = {r[0]: r[4] for r in repeats}
    width = max(r[2] for r in repeats) + 1
    out = []
    for judge in judges:
        mine = [c for c in cells if c[1] == judge]
        unit_ids = sorted({c[0] for c in mine if c[2] > 0})
        row_of = {u: i for i, u in enumerate(unit_ids)}
        epochs = np.full((len(unit_ids), width), -1, dtype=np.int64)
        for unit_id, _, epoch, verdict in mine:
            if unit_id in row_of:
                epochs[row_of[unit_id], epoch] = VERDICT_CODES[verdict]
        trigger_type = np.array([types[u] for u in unit_ids], dtype=object)
        out.append(JudgeEpochs(judge, epochs, trigger_type))
    return out


# --- LLM pairwise judges ---------------------------------------------------------------------


@dataclass(frozen=True)
class PairwiseVerdicts:
    """One pairwise judge's verdicts on the comparisons it judged: ``ab[i]`` / ``ba[i]`` the
    winner code (``interfaces.BATTLE_OUTCOME_CODES``) of comparison ``comparison_id[i]`` with
    side A / side B shown first, ``NOT_ASKED`` or ``ERROR`` (a judge_error) where none."""

    judge: str
    comparison_id: np.ndarray
    ab: np.ndarray
    ba: np.ndarray


def pairwise_verdicts_for(request: TableRequest) -> list[PairwiseVerdicts]:
    """Every pairwise judge's verdicts on the request's run, by judge name: every comparison of
    the run, whatever its condition(s). One query."""
    run = require_run(request)
    rows = PairwiseJudgment.objects.filter(comparison__run=run).values_list(
        "judge_name", "comparison_id", "order", "state", "winner"
    )
    cells: dict[str, dict[int, list[int]]] = {}
    for judge, comparison_id, order, state, winner in rows:
        pair = cells.setdefault(judge, {}).setdefault(comparison_id, [NOT_ASKED, NOT_ASKED])
        code = BATTLE_OUTCOME_CODES[winner] if state == JudgmentState.DONE else ERROR
        pair[0 if order == PairOrder.AB else 1] = code
    out = []
    for judge in sorted(cells):
        ids = sorted(cells[judge])
        codes = np.array([cells[judge][i] for i in ids], dtype=np.int64).reshape(len(ids), 2)
        out.append(PairwiseVerdicts(judge, np.array(ids, dtype=np.int64), codes[:, 0], codes[:, 1]))
    return out


@dataclass(frozen=True)
class PairwiseBattle:
    """One comparison on which a pairwise judge gave the same verdict in both orders, as a
    battle: its fields are named as the human studies' battles name theirs
    (``source_a`` / ``source_b`` / ``winner``, a ``BattleWinner`` value for side A against side
    B), so that the ranking tables read both alike. ``judge`` is ``"judge:<name>"``;
    ``item_key`` ``<unique_id_eval>#t<turn>[#s<sample>]``; ``tstamp`` the later of the two
    verdicts, in Unix seconds."""

    item_key: str
    question_id: str
    turn: int
    judge: str
    source_a: str
    source_b: str
    winner: str
    tstamp: float


PAIRWISE_BATTLE_CHUNK = 2000


def run_pairwise_judge_names(run: EvaluationRun) -> list[str]:
    """The run's pairwise judges by name: its configured ones and every name in its pairwise
    verdicts (one query)."""
    configured = run.pairwise_judges.order_by().values_list("name", flat=True)
    judged = (
        PairwiseJudgment.objects.filter(comparison__run=run)
        .order_by()
        .values_list("judge_name", flat=True)
    )
    return sorted(set(judged.union(configured)))


def require_pairwise_judge(run: EvaluationRun, judge: str) -> None:
    """Raises ``StatsInputError`` naming the run's pairwise judges when ``judge`` is none of
    them (one query)."""
    names = run_pairwise_judge_names(run)
    if judge not in names:
        raise StatsInputError(
            f"run {run.pk} has no pairwise judge {judge!r} (its pairwise judges: "
            f"{', '.join(names) or 'none'}: judge_pairs adds one)"
        )


def run_pairwise_battles(
    *, run: EvaluationRun, judge: str, skipped: Counter | None = None
) -> Iterator[PairwiseBattle]:
    """The consistent verdicts of pairwise judge ``judge`` on ``run``'s comparisons, as battles,
    streamed in comparison order (rows read in chunks, so memory does not grow with the run).
    A comparison whose verdict flips with the order is no battle: it is counted in
    ``skipped["inconsistent"]``, as are ``skipped["one order only"]`` (a verdict in one order,
    the other not given yet) and ``skipped["judge error"]`` — the caller reports them. Source
    labels (``annotation.kinds.selection.source_label``, as the human studies' battles spell
    them) gain the condition when the run's comparisons span conditions. Raises
    ``StatsInputError`` (at once, before any row is read) for a judge the run does not have."""
    require_pairwise_judge(run, judge)
    conditions: set[str] = set()
    for pair in (
        PairwiseComparison.objects.filter(run=run)
        .values_list("unit_a__condition", "unit_b__condition")
        .distinct()
    ):
        conditions.update(pair)
    return _pairwise_battles(
        run, judge, len(conditions) > 1, Counter() if skipped is None else skipped
    )


def _pairwise_battles(
    run: EvaluationRun, judge: str, with_condition: bool, skipped: Counter
) -> Iterator[PairwiseBattle]:
    rows = (
        PairwiseJudgment.objects.filter(comparison__run=run, judge_name=judge)
        .order_by("comparison_id", "order")
        .values_list(
            "comparison_id",
            "state",
            "winner",
            "created_at",
            "comparison__trigger__turn__dialogue__unique_id_eval",
            "comparison__trigger__turn__index",
            "comparison__unit_a__sample_index",
            "comparison__unit_a__endpoint__name",
            "comparison__unit_a__condition",
            "comparison__unit_b__endpoint__name",
            "comparison__unit_b__condition",
        )
    )
    for _, group in groupby(rows.iterator(chunk_size=PAIRWISE_BATTLE_CHUNK), key=lambda r: r[0]):
        verdicts = list(group)
        if any(row[1] != JudgmentState.DONE for row in verdicts):
            skipped["judge error"] += 1
            continue
        if len(verdicts) < len(PairOrder.values):
            skipped["one order only"] += 1
            continue
        if len({row[2] for row in verdicts}) > 1:
            skipped["inconsistent"] += 1
            continue
        first = verdicts[0]
        uid, turn, sample = first[4:7]
        a_name, a_condition, b_name, b_condition = first[7:11]
        yield PairwiseBattle(
            item_key=f"{uid}#t{turn}" + (f"#s{sample}" if sample else ""),
            question_id=uid,
            turn=turn,
            judge=f"judge:{judge}",
            source_a=source_label(a_name, condition=a_condition if with_condition else ""),
            source_b=source_label(b_name, condition=b_condition if with_condition else ""),
            winner=first[2],
            tstamp=max(row[3] for row in verdicts).timestamp(),
        )


@dataclass(frozen=True)
class PairwiseBattleCount:
    """``count`` battles of one pairwise judge between ``source_a`` and ``source_b`` (labelled
    as ``run_pairwise_battles`` labels them) with ``winner`` (a ``BattleWinner`` value)."""

    source_a: str
    source_b: str
    winner: str
    count: int


def run_pairwise_battle_counts(
    *, run: EvaluationRun, judge: str, skipped: Counter | None = None
) -> list[PairwiseBattleCount]:
    """``run_pairwise_battles``' battles counted per (source A, source B, winner) by the
    database, for a ranking: one ``GROUP BY`` over the run's comparisons with the judge's verdict
    in each order joined beside it (``FilteredRelation``: at most one row per order, by the
    unique constraint), so its rows are the distinct (sources, verdict pair) — a few per pair of
    sources however many comparisons. The same battles, source labels and ``skipped`` counts as
    the stream (a test compares them); sorted. One query; a second, where the judge has no
    verdict on the run, tells an unknown judge (``StatsInputError``) from one yet to judge.

    A comparison the judge has no verdict on in either order is none of its comparisons (it
    still counts for the labels, as in the stream: they name the condition when the run's
    comparisons span conditions)."""
    skipped = Counter() if skipped is None else skipped
    verdict = {
        order: FilteredRelation(
            "judgments",
            condition=Q(judgments__judge_name=judge, judgments__order=order),
        )
        for order in PairOrder.values
    }
    rows = list(
        PairwiseComparison.objects.filter(run=run)
        .annotate(verdict_ab=verdict[PairOrder.AB], verdict_ba=verdict[PairOrder.BA])
        .values_list(
            "unit_a__endpoint__name",
            "unit_a__condition",
            "unit_b__endpoint__name",
            "unit_b__condition",
            "verdict_ab__state",
            "verdict_ab__winner",
            "verdict_ba__state",
            "verdict_ba__winner",
        )
        .annotate(n=Count("pk"))
        .order_by()
    )
    if all(row[4] is None and row[6] is None for row in rows):
        require_pairwise_judge(run, judge)
    with_condition = len({row[1] for row in rows} | {row[3] for row in rows}) > 1
    counts: Counter[tuple[str, str, str]] = Counter()
    for a_name, a_condition, b_name, b_condition, ab_state, ab, ba_state, ba, n in rows:
        # The stream's rules, in its order: an error in either order, then a missing order,
        # then a flip.
        states = [state for state in (ab_state, ba_state) if state is not None]
        if not states:
            continue
        if any(state != JudgmentState.DONE for state in states):
            skipped["judge error"] += n
        elif len(states) < len(PairOrder.values):
            skipped["one order only"] += n
        elif ab != ba:
            skipped["inconsistent"] += n
        else:
            source_a = source_label(a_name, condition=a_condition if with_condition else "")
            source_b = source_label(b_name, condition=b_condition if with_condition else "")
            counts[(source_a, source_b, ab)] += n
    return [PairwiseBattleCount(*key, count) for key, count in sorted(counts.items())]


# --- An LLM's failure-mode labels -----------------------------------------------------------

FAILURE_MODE_STUDY = "failure_mode"  # the study kind whose labels are failure modes


@dataclass(frozen=True)
class Classifications:
    """One classifier's labels of a run's RECOVERY replies in one condition: ``labels`` (its
    ``item_id`` the unit's id, as text) for the replies it classified, and per model how many
    replies it could not classify (``classifier_error``)."""

    classifier: str  # "" when the run has none
    labels: FailureModeLabels
    errors: dict[str, int]


def classifications_for(request: TableRequest) -> tuple[Classifications, list[str]]:
    """The run's failure-mode classifier's labels (``EvaluationRun.failure_mode_classifier``;
    for a run without one, the classifier its stored labels name — the first by name if they
    name several), read once per request: 1 query (2 when the run's classifier has no labels
    yet)."""
    if "classifications" in request.cache:
        return request.cache["classifications"]
    run = require_run(request)
    rows = list(
        FailureModeClassification.objects.filter(
            unit__run=run,
            unit__condition=request.condition,
            unit__trigger__type=TriggerType.RECOVERY,
        )
        .order_by("unit_id")
        .values_list(
            "unit_id",
            "unit__endpoint__name",
            "classifier_name",
            "state",
            "failure_mode",
            "classifier_id",
        )
    )
    names = sorted({r[2] for r in rows})
    notes: list[str] = []
    classifier = names[0] if names else ""
    if run.failure_mode_classifier_id is not None:
        # The endpoint's labels name it; only without any is its name looked up.
        named = {r[2] for r in rows if r[5] == run.failure_mode_classifier_id}
        classifier = (
            min(named)
            if named
            else ModelEndpoint.objects.values_list("name", flat=True).get(
                pk=run.failure_mode_classifier_id
            )
        )
    others = [n for n in names if n != classifier]
    if others:
        notes.append(f"labels of other classifiers left out: {', '.join(others)}")
    if not rows:
        notes.append(
            f"no failure-mode classifications in run {run.pk} ({request.condition}): give the "
            "run a failure-mode classifier and classify its failed RECOVERY replies"
        )
    mine = [r for r in rows if r[2] == classifier]
    errors: dict[str, int] = {}
    for _, model, _, state, _, _ in mine:
        if state != ClassificationState.DONE:
            errors[model] = errors.get(model, 0) + 1
    labels = FailureModeLabels.from_records(
        FailureModeLabel(model, str(unit_id), mode)
        for unit_id, model, _, state, mode, _ in mine
        if state == ClassificationState.DONE
    )
    if classifier:
        notes.append(
            f"classifier {classifier}: the RECOVERY replies its run's primary judge failed"
        )
    request.cache["classifications"] = (Classifications(classifier, labels, errors), notes)
    return request.cache["classifications"]


@dataclass(frozen=True)
class FailureModeReference:
    """A failure-mode study's majority label per reply, by the reply's unit id."""

    name: str  # "study N (majority)"
    by_unit: dict[int, str]


def failure_mode_references(request: TableRequest) -> tuple[list[FailureModeReference], list[str]]:
    """The people's failure-mode labels the classifier is compared with: the request's study
    when it is a failure-mode study, else every failure-mode study of the run. Each reply's
    label is its annotators' majority (``studies.failure_mode_labels``: top labels that tie
    leave the reply out)."""
    run = require_run(request)
    wanted = Q(run=run, kind=FAILURE_MODE_STUDY)
    if request.study is not None:
        wanted |= Q(pk=request.study, kind=FAILURE_MODE_STUDY)
    found = list(Study.objects.select_related("run__primary_judge").filter(wanted).order_by("pk"))
    chosen = [s for s in found if s.pk == request.study] or [s for s in found if s.run_id == run.pk]
    references: list[FailureModeReference] = []
    notes: list[str] = []
    for study in chosen:
        cache = request.cache.setdefault(f"failure-mode-study-{study.pk}", {})
        if "answers" not in cache:
            cache["answers"] = studies.study_data(study)
        labels, study_notes = studies.failure_mode_labels(
            cache["answers"], include_excluded=request.include_excluded
        )
        unit_of = dict(study.items.values_list("pk", "unit_id"))
        by_unit = {}
        for item_id, category in zip(
            (labels.item_id if labels.item_id is not None else []),
            labels.category.tolist(),
            strict=True,
        ):
            unit_id = unit_of.get(int(item_id))
            if unit_id is not None:
                by_unit[unit_id] = category
        name = f"study {study.pk} (majority)"
        references.append(FailureModeReference(name, by_unit))
        notes.extend(f"{name}: {note}" for note in study_notes)
    if not references:
        notes.append(
            "no failure-mode study of this run yet: create one (Failure-mode labelling) to "
            "compare the classifier with people"
        )
    return references, notes


FAILURE_MODE_CODES = {mode: code for code, mode in enumerate(FAILURE_MODES)}


# --- Judge-human alignment --------------------------------------------------------------------

DIRECT_RATING = "direct_rating"  # the study kind whose labels are verdicts on one reply each


@dataclass(frozen=True)
class AlignmentReference:
    """What people said about a set of replies, and what every judge said about the same ones:
    aligned arrays over the reference's items."""

    name: str  # e.g. "study 3 (majority)", "adjudicated"
    labels: np.ndarray  # items × raters verdict codes, -1 none (adjudicated: one column)
    groups: np.ndarray  # trigger type per item
    judges: dict[str, np.ndarray]  # judge name → verdict code per item, -1 none


def run_judgment_names(run: EvaluationRun) -> list[str]:
    """Every judge of ``run`` by the name its judgments are stored under: the run's judge
    endpoints and the judges of imported results (``Judgment.judge_name`` with no endpoint)."""
    stored = Judgment.objects.filter(unit__run=run).values_list("judge_name", flat=True)
    return sorted(set(run_judge_names(run)) | set(stored.distinct()))


def _judges_on_units(
    run: EvaluationRun | None, unit_ids: list[int | None]
) -> dict[str, np.ndarray]:
    """Every judge's finished verdict on each unit (None: an item with no unit), by judge name:
    one query."""
    names = run_judgment_names(run) if run is not None else []
    out = {name: np.full(len(unit_ids), -1, dtype=np.int64) for name in names}
    position: dict[int, list[int]] = {}
    for i, unit_id in enumerate(unit_ids):
        if unit_id is not None:
            position.setdefault(unit_id, []).append(i)
    if not position:
        return out
    for unit_id, judge_name, verdict in Judgment.objects.filter(
        unit_id__in=list(position), state=JudgmentState.DONE
    ).values_list("unit_id", "judge_name", "verdict"):
        column = out.setdefault(judge_name, np.full(len(unit_ids), -1, dtype=np.int64))
        column[position[unit_id]] = VERDICT_CODES[verdict]
    return out


IMPORTED_JUDGE = "judge_score (as imported)"
"""The judge of an imported study's item that has no reply of a run here: the verdict the
release file records beside it (``judge_score``)."""


def _study_reference(
    study: Study, *, include_excluded: bool, cache: dict
) -> tuple[AlignmentReference, list[str]]:
    if "answers" not in cache:
        cache["answers"] = studies.study_data(study)
    matrix, notes = studies.label_matrix(cache["answers"], include_excluded=include_excluded)
    unit_of = dict(study.items.values_list("pk", "unit_id"))
    unit_ids = [unit_of.get(int(pk)) for pk in matrix.item_ids.tolist()]
    judges = _judges_on_units(study.run, unit_ids)
    unlinked = np.array([u is None for u in unit_ids], dtype=bool)
    if unlinked.any() and np.any(matrix.judge[unlinked] >= 0):
        judges[IMPORTED_JUDGE] = np.where(unlinked, matrix.judge, -1)
    name = f"study {study.pk} (majority)"
    return (
        AlignmentReference(name, matrix.labels, matrix.groups, judges),
        [f"{name}: {note}" for note in notes],
    )


def _adjudicated_reference(run: EvaluationRun, condition: str) -> AlignmentReference | None:
    rows = list(
        JudgeDisagreement.objects.filter(unit__run=run, unit__condition=condition)
        .exclude(final_verdict="")
        .order_by("unit_id")
        .values_list("unit_id", "final_verdict", "unit__trigger__type")
    )
    if not rows:
        return None
    return AlignmentReference(
        name="adjudicated",
        labels=np.array([[VERDICT_CODES[v]] for _, v, _ in rows], dtype=np.int64),
        groups=np.array([t for *_, t in rows], dtype=object),
        judges=_judges_on_units(run, [u for u, *_ in rows]),
    )


def alignment_references(request: TableRequest) -> tuple[list[AlignmentReference], list[str]]:
    """The people's verdicts the judge-human-alignment table compares every judge with: (a)
    direct-rating studies on the run's replies — the request's study when it is one (or the
    release's Study 1 with ``release_dir``), else every direct-rating study of the run — and
    (b) the run's adjudicated verdicts (``JudgeDisagreement.final_verdict``)."""
    references: list[AlignmentReference] = []
    notes: list[str] = []
    if request.release_dir is not None:
        matrix = release_files.study1_from_release(request.release_dir)
        references.append(
            AlignmentReference(
                "release Study 1 (majority)",
                matrix.labels,
                matrix.groups,
                {IMPORTED_JUDGE: matrix.judge},
            )
        )
        return references, notes
    # One query for the request's study and the run's direct-rating studies.
    wanted = Q(pk=request.study) if request.study is not None else Q(pk__in=[])
    if request.run is not None:
        wanted |= Q(run=request.run, kind=DIRECT_RATING)
    found = list(Study.objects.select_related("run").filter(wanted).order_by("pk"))
    chosen = [s for s in found if s.pk == request.study and s.kind == DIRECT_RATING]
    if request.study is not None and not chosen:
        if not any(s.pk == request.study for s in found):
            raise StatsInputError(f"no study {request.study}")
        notes.append(
            f"study {request.study} is not a direct-rating study: the run's direct-rating "
            "studies are the reference"
        )
    if not chosen:
        run_pk = request.run.pk if request.run is not None else None
        chosen = [s for s in found if s.kind == DIRECT_RATING and s.run_id == run_pk]
    for study in chosen:
        cache = request.cache.setdefault(f"alignment-study-{study.pk}", {})
        reference, study_notes = _study_reference(
            study, include_excluded=request.include_excluded, cache=cache
        )
        references.append(reference)
        notes.extend(study_notes)
    if request.run is not None:
        adjudicated = _adjudicated_reference(request.run, request.condition)
        if adjudicated is not None:
            references.append(adjudicated)
            notes.append(
                "adjudicated: only the replies the judges disagreed on and a person decided; "
                "agreement there is lower than on all replies by construction"
            )
    if not references:
        notes.append(
            "no human reference for this run yet: a direct-rating study of its replies "
            "(study=ID / --study ID, or release_dir for the release's Study 1) or adjudicated "
            "verdicts (an adjudication study)"
        )
    return references, notes


# --- Proposal review ------------------------------------------------------------------------


def proposal_votes_for(request: TableRequest, *, table: str) -> tuple[ProposalVotes, list[str]]:
    """The request's proposal-review study's proposals, decision counts and silent decisions
    (``studies.proposal_votes``), read once however many of its tables the request draws; and
    notes. The release has no proposal review."""
    if request.study is None:
        raise StatsInputError(
            "the release publishes no proposal review"
            if request.release_dir is not None
            else f"the {table} table reads a human study: choose one (a proposal-review study: "
            "study=ID / --study ID; staff see every study at /annotate/studies/)"
        )
    cache = request.cache.setdefault("study", {})
    study = study_for_table(study_id=request.study, table=table, cache=cache)
    key = ("proposal-votes", request.include_excluded)
    if key not in cache:
        cache[key] = studies.proposal_votes(study, include_excluded=request.include_excluded)
    votes, notes = cache[key]
    return votes, list(notes)
