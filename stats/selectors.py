"""Read side of the statistics: fetch a run's verdicts (and the corpus facts they need) in a
fixed, small number of queries, hand NumPy arrays to ``stats.compute``, and return ``Table``s.

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
from typing import Literal

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
    TriggerType,
)
from benchmark.vocabulary import VERDICT_CODES
from stats import release_files, studies, tables
from stats.compute import agreement
from stats.compute.correlation import benchmark_correlations
from stats.compute.disclosure import disclosure_distance_table
from stats.compute.failure_modes import failure_mode_table
from stats.compute.human import human_agreement_table
from stats.compute.leaderboard import ALL, TYPE_ORDER, leaderboard, score_matrix
from stats.compute.preference import preference_by_annotator, preference_table
from stats.compute.resampling import DEFAULT_SEED
from stats.compute.style import style_sensitivity
from stats.interfaces import FailureModeLabels, LabelMatrix, PreferenceJudgements
from stats.models import ExternalBenchmarkScore


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
    return list(run.judges.order_by("name").values_list("name", flat=True))


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


def _require_run(request: TableRequest) -> EvaluationRun:
    if request.run is None:
        raise StatsInputError("no evaluation run yet: run or import one first")
    return request.run


def _replies(request: TableRequest) -> RunReplies:
    if "replies" not in request.cache:
        request.cache["replies"] = run_replies(
            run=_require_run(request), verdicts=request.verdicts, condition=request.condition
        )
    return request.cache["replies"]


# --- Run tables -------------------------------------------------------------------------------


def leaderboard_table(request: TableRequest) -> tables.Table:
    replies = _replies(request)
    rows = leaderboard(
        models=replies.model,
        trigger_types=replies.trigger_type,
        clusters=replies.trigger_id,
        verdicts=replies.verdict,
        seed=request.seed,
    )
    return _table(
        "leaderboard",
        request,
        tables.leaderboard_rows(
            rows,
            display=replies.display,
            condition=str(request.condition),
            verdicts=request.verdicts.label,
        ),
    )


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


def judge_agreement_table(request: TableRequest) -> tables.Table:
    run = _require_run(request)
    replies = _replies(request)  # the units; their verdicts are not used here
    judges, matrix = judge_matrix(replies=replies, run=run, condition=request.condition)
    rows = []
    types = [ALL] + [t for t in TYPE_ORDER if np.any(replies.trigger_type == t)]
    for trigger_type in types:
        mask = (
            np.ones(replies.unit_id.size, bool)
            if trigger_type == ALL
            else (replies.trigger_type == trigger_type)
        )
        sub = matrix[mask]
        scores = {}
        for j, judge in enumerate(judges):
            names, _, values = score_matrix(
                models=replies.model[mask],
                trigger_types=replies.trigger_type[mask],
                verdicts=sub[:, j],
            )
            scores[judge] = dict(zip(names, values[:, 0], strict=True))
        models = sorted(set(replies.model[mask].tolist()))
        for a in range(len(judges)):
            for b in range(a + 1, len(judges)):
                x, y = sub[:, a], sub[:, b]
                both = (x >= 0) & (y >= 0)
                counts = agreement.label_counts(sub[:, [a, b]], 3)
                tau = agreement.kendall_tau(
                    np.array([scores[judges[a]].get(m, np.nan) for m in models]),
                    np.array([scores[judges[b]].get(m, np.nan) for m in models]),
                )
                rows.append(
                    {
                        "trigger_type": trigger_type,
                        "judge_a": judges[a],
                        "judge_b": judges[b],
                        "n_units": int(both.sum()),
                        "agreement": float(np.mean(x[both] == y[both])) if both.any() else np.nan,
                        "cohen_kappa": agreement.cohen_kappa(x, y, 3),
                        "linear_kappa": agreement.cohen_kappa(x, y, 3, "linear"),
                        "alpha_nominal": agreement.krippendorff_alpha(counts, "nominal"),
                        "alpha_ordinal": agreement.krippendorff_alpha(counts, "ordinal"),
                        "kendall_tau": tau.tau,
                        "kendall_p": tau.p_value,
                        "n_models": tau.n,
                    }
                )
        if len(judges) > 2:
            counts = agreement.label_counts(sub, 3)
            rows.append(
                {
                    "trigger_type": trigger_type,
                    "judge_a": "ALL",
                    "judge_b": "ALL",
                    "n_units": int((counts.sum(axis=1) >= 2).sum()),
                    "agreement": np.nan,
                    "cohen_kappa": np.nan,
                    "linear_kappa": np.nan,
                    "alpha_nominal": agreement.krippendorff_alpha(counts, "nominal"),
                    "alpha_ordinal": agreement.krippendorff_alpha(counts, "ordinal"),
                    "kendall_tau": np.nan,
                    "kendall_p": np.nan,
                    "n_models": None,
                }
            )
    notes = [] if len(judges) > 1 else [f"run {run.pk} has fewer than two judges"]
    return _table("judge-agreement", request, rows, notes)


def _style_inputs(request: TableRequest, configuration: str):
    replies = _replies(request)
    scored = replies.verdict >= 0
    if configuration == "style":
        configs = replies.style[scored].astype(str)
    elif configuration == "phase":
        configs = replies.trigger_type[scored].astype(str)
    else:
        raise StatsInputError(f"unknown configuration {configuration!r} (style or phase)")
    return replies, scored, configs


def style_sensitivity_table(request: TableRequest, configuration: str = "style") -> tables.Table:
    replies, scored, configs = _style_inputs(request, configuration)
    passed = replies.verdict[scored] == 2
    models = replies.model[scored]
    result = style_sensitivity(models=models, configurations=configs, passed=passed)
    pass_rates = {m: float(passed[models == m].mean()) for m in result.models}
    return _table(
        "style-sensitivity",
        request,
        tables.style_rows(
            result, display=replies.display, configuration=configuration, pass_rates=pass_rates
        ),
    )


def style_logits_table(request: TableRequest, configuration: str = "style") -> tables.Table:
    replies, scored, configs = _style_inputs(request, configuration)
    passed = replies.verdict[scored] == 2
    models = replies.model[scored]
    result = style_sensitivity(models=models, configurations=configs, passed=passed)
    counts: dict = {}
    for model, config, ok in zip(models.tolist(), configs.tolist(), passed.tolist(), strict=True):
        n, k = counts.get((model, config), (0, 0))
        counts[(model, config)] = (n + 1, k + ok)
    return _table(
        "style-logits",
        request,
        tables.style_logit_rows(result, display=replies.display, counts=counts),
    )


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


def disclosure_distance_table_for(request: TableRequest) -> tables.Table:
    replies = _replies(request)
    keep = (replies.trigger_type == TriggerType.RECOVERY) & (replies.verdict >= 0)
    distances = disclosure_distances(
        replies.trigger_id[keep], replies.dialogue_id[keep], replies.turn[keep]
    )
    rows = disclosure_distance_table(
        models=replies.model[keep],
        distances=distances,
        outcomes=replies.verdict[keep] / 2,
    )
    return _table(
        "disclosure-distance", request, tables.disclosure_rows(rows, display=replies.display)
    )


def benchmark_correlation_table(request: TableRequest, metric: str = "weighted") -> tables.Table:
    replies = _replies(request)
    names, types, scores = score_matrix(
        models=replies.model,
        trigger_types=replies.trigger_type,
        verdicts=replies.verdict,
        metric=metric,
    )
    uploaded = list(
        ExternalBenchmarkScore.objects.filter(endpoint__name__in=names).values_list(
            "endpoint__name", "benchmark", "score"
        )
    )
    benchmarks = sorted({b for _, b, _ in uploaded})
    external = np.full((len(names), len(benchmarks)), np.nan)
    row_of = {name: i for i, name in enumerate(names)}
    column_of = {b: j for j, b in enumerate(benchmarks)}
    for model, benchmark, score in uploaded:
        external[row_of[model], column_of[benchmark]] = score
    rows, means = benchmark_correlations(
        type_scores=scores,
        type_names=types,
        benchmark_scores=external,
        benchmark_names=benchmarks,
        seed=request.seed,
    )
    notes = [] if benchmarks else ["no external benchmark scores uploaded for these models"]
    return _table("benchmark-correlation", request, tables.correlation_rows(rows, means), notes)


# --- Study tables -----------------------------------------------------------------------------

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


def _label_matrix(request: TableRequest) -> tuple[LabelMatrix, list[str]]:
    if request.release_dir is not None:
        return release_files.study1_from_release(request.release_dir), []
    if request.study is not None:
        return study_label_matrix(
            study_id=request.study,
            include_excluded=request.include_excluded,
            cache=request.cache.setdefault("study", {}),
        )
    raise StatsInputError(NO_STUDY.format(table="human-agreement"))


def _preference(
    request: TableRequest, table: str
) -> tuple[PreferenceJudgements, frozenset[str], list[str]]:
    if request.release_dir is not None:
        return release_files.pairwise_from_release(request.release_dir), frozenset(), []
    if request.study is not None:
        return study_preference(study_id=request.study, cache=request.cache.setdefault("study", {}))
    raise StatsInputError(NO_STUDY.format(table=table))


def human_agreement_table_for(request: TableRequest) -> tables.Table:
    matrix, notes = _label_matrix(request)
    rows = human_agreement_table(matrix, seed=request.seed)
    return _table(
        "human-agreement", request, tables.human_agreement_rows(rows, matrix.categories), notes
    )


def preference_table_for(request: TableRequest) -> tables.Table:
    judgements, excluded, notes = _preference(request, "preference")
    rows = preference_table(judgements, excluded_annotators=excluded, seed=request.seed)
    return _table("preference", request, tables.preference_rows(rows), notes)


def preference_raters_table(request: TableRequest) -> tables.Table:
    judgements, excluded, notes = _preference(request, "preference-raters")
    rows = preference_by_annotator(judgements, excluded_annotators=excluded)
    return _table("preference-raters", request, tables.preference_rater_rows(rows), notes)


def failure_modes_table_for(request: TableRequest) -> tables.Table:
    if request.study is None:
        raise StatsInputError(
            "the release publishes no per-reply failure-mode labels"
            if request.release_dir is not None
            else NO_STUDY.format(table="failure-modes")
        )
    labels, notes = study_failure_modes(
        study_id=request.study,
        include_excluded=request.include_excluded,
        cache=request.cache.setdefault("study", {}),
    )
    return _table(
        "failure-modes", request, tables.failure_mode_rows(failure_mode_table(labels)), notes
    )


# --- Dispatch ---------------------------------------------------------------------------------


def _table(name: str, request: TableRequest, rows: list[dict], notes=None) -> tables.Table:
    spec = tables.SPECS[name]
    return tables.Table(
        name=name,
        title=spec.title,
        columns=spec.columns,
        rows=rows,
        notes=list(notes or []),
        params=request.params(),
    )


BUILDERS = {
    "leaderboard": leaderboard_table,
    "judge-agreement": judge_agreement_table,
    "style-sensitivity": style_sensitivity_table,
    "style-logits": style_logits_table,
    "disclosure-distance": disclosure_distance_table_for,
    "benchmark-correlation": benchmark_correlation_table,
    "human-agreement": human_agreement_table_for,
    "preference": preference_table_for,
    "preference-raters": preference_raters_table,
    "failure-modes": failure_modes_table_for,
}


def stats_table(name: str, request: TableRequest) -> tables.Table:
    """The named table (``tables.SPECS``) for ``request``; ``StatsInputError`` if the data
    cannot answer it."""
    if name not in BUILDERS:
        raise StatsInputError(f"unknown table {name!r} (one of {', '.join(BUILDERS)})")
    return BUILDERS[name](request)
