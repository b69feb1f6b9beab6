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

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from annotation.models import Study
from benchmark.models import (
    Anchor,
    Condition,
    EvaluationRun,
    EvaluationUnit,
    JudgeDisagreement,
    Judgment,
    JudgmentState,
    ModelEndpoint,
    RunStatus,
    Trigger,
)
from benchmark.vocabulary import VERDICT_CODES
from stats import release_files, studies
from stats.compute.resampling import DEFAULT_SEED
from stats.interfaces import FailureModeLabels, LabelMatrix, PreferenceJudgements
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
    # What the tables of one request share (the run's replies; the study and its answers),
    # fetched once however many of them are drawn.
    cache: dict = field(default_factory=dict, compare=False, repr=False)

    def params(self) -> dict:
        out: dict = {"seed": self.seed}
        if self.run is not None:
            out.update(run=self.run.pk, verdicts=self.verdicts.label, condition=str(self.condition))
        if self.study is not None:
            out.update(study=self.study, include_excluded=self.include_excluded)
        if self.release_dir is not None:
            out["release_dir"] = str(self.release_dir)
        return out


# --- Runs -------------------------------------------------------------------------------------


def default_run() -> EvaluationRun | None:
    """The newest finished run, else the newest run."""
    return (
        EvaluationRun.objects.filter(status=RunStatus.DONE).order_by("-created_at", "-pk").first()
        or EvaluationRun.objects.order_by("-created_at", "-pk").first()
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


def _judge_name(run: EvaluationRun, source: VerdictSource) -> str:
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
        verdict=np.full(len(rows), -1, dtype=np.int64),
        display={r[1]: r[2] for r in rows},
    )


def run_replies(*, run: EvaluationRun, verdicts: VerdictSource, condition: str) -> RunReplies:
    """Every reply of ``run`` in ``condition`` with its verdict from ``verdicts``: 3 queries (4
    for adjudicated)."""
    judge = _judge_name(run, verdicts)
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
