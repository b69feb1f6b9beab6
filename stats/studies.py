"""The annotation app's studies, read into the statistics' inputs (``stats.interfaces``).

``stats/release_files.py`` reads the official release's human-eval files into these structures;
this module reads them from the studies recorded in the Workbench, so a study run here and one
imported from the release go through the very same computations. Four queries per study (the
study is fetched by the caller), whatever its size — two more for the LLM pairwise judges'
verdicts on its pairs (``judged_pairs``); no model instance is built per answer.

What counts (docs/statistics.md, "Studies recorded in the Workbench"):

- **Live answers only.** An undone, superseded or late (lapsed) answer stays in the raw
  ``votes`` export and counts in no figure.
- **Excluded raters** (``Rater.excluded``) are left out of every figure by default
  (``include_excluded`` counts them); the preference table instead shows both, with and without
  them, as its rows.
- **Gold items** count as items in the human-agreement table (every rater labels them; gold
  accuracy comes from them), but the preference and failure-mode tables leave them out: they are
  quality checks, not part of the sample the figures describe.
- **The judge** of the human-agreement table and the **stratum** of the preference table are the
  study run's primary judge's verdict on the rated reply (on Case A, the vanilla reply, for a
  pair); for a study imported from the release, the release's ``judge_score`` /
  ``judge_score_case_a``.
- **Dialogue audits**: only the two auditors' decisions are ratings; a third auditor's decision
  on a split is not an independent rating (they see both audits) and is left out.
- **Failure modes**: several annotators' labels on one reply are resolved to its majority label
  (``agreement.majority_labels``, tie rule ``exclude``: when the top labels tie the reply has no
  label and is left out, counted in a note).
- **People and LLM pairwise judges on the same pairs** (``judged_pairs``): an arena or pairwise
  item's two replies, its labels as battle outcomes for its side A against side B, and each
  pairwise judge's verdicts on the same two replies in each order, turned to the item's sides;
  gold items left out.
- **HALO diagnoses**: every annotator's diagnosis of every reply at a checkpoint is one judgment
  (``halo_judgments``; no majority is taken), with the reply's source and effort from the
  checkpoint's payload; gold checkpoints are left out.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from django.db.models import Q

from annotation import kinds
from annotation import selectors as annotation_selectors
from annotation.kinds.pairwise import Case
from annotation.models import Answer, AssignmentRole, Rater, Study
from benchmark.models import Judgment, JudgmentState, PairOrder, PairwiseJudgment
from benchmark.vocabulary import BATTLE_SWAPPED, FAILURE_MODES, VERDICT_ORDER, ProposalDecision
from stats.compute import agreement
from stats.compute.pairwise_consistency import ERROR, NOT_ASKED
from stats.interfaces import (
    BATTLE_OUTCOME_CODES,
    BATTLE_OUTCOMES,
    INJECTED,
    TIE,
    VANILLA,
    Battles,
    FailureModeLabel,
    FailureModeLabels,
    HaloJudgment,
    HaloJudgments,
    JudgedPairs,
    LabelMatrix,
    PreferenceJudgements,
    PreferenceRecord,
    ProposalRecord,
    ProposalVotes,
    RatedItem,
    Rating,
    SilentRecord,
)


def tables_for_kind(kind: str) -> tuple[str, ...]:
    """The names of the statistics tables that read a study of ``kind`` (the kind declares
    them: ``StudyKind.tables``); none for a kind no longer registered."""
    found = kinds.find(kind)
    return found.tables if found is not None else ()


def kinds_reading(table: str) -> list[str]:
    """The labels of the study kinds whose studies ``table`` reads (for messages)."""
    return [kind.label for kind in kinds.all_kinds() if table in kind.tables]


# A pairwise answer's label is the case that won: A is the vanilla reply, B the rubric-injected.
CASE_CHOICES = {Case.A: VANILLA, Case.B: INJECTED, Case.TIE: TIE}


@dataclass(frozen=True)
class _Item:
    is_gold: bool
    expected: str
    group: str  # the trigger type, "" for audits
    model: str  # the rated reply's endpoint handle, "" if none
    judge_label: str  # see the module docstring, "" if none


@dataclass(frozen=True)
class _Answer:
    item_id: int
    rater_id: int
    role: str
    label: str
    order: list | None  # what was on screen: a pair's cases in order, e.g. ["B", "A"]
    seconds: float


@dataclass(frozen=True)
class StudyData:
    """What one study's live answers say, ready for a table: who rated (names), who is
    excluded, each item, each live answer."""

    kind: str
    names: dict[int, str]  # rater id → the name tables show (username or release id)
    excluded: frozenset[int]
    items: dict[int, _Item]
    answers: list[_Answer]

    def counted(self, *, include_excluded: bool) -> list[_Answer]:
        if include_excluded:
            return self.answers
        return [a for a in self.answers if a.rater_id not in self.excluded]

    def excluded_note(self, *, include_excluded: bool) -> list[str]:
        return excluded_note(self.names, self.excluded, include_excluded=include_excluded)


def excluded_note(
    names: dict[int, str], excluded: frozenset[int], *, include_excluded: bool
) -> list[str]:
    """The note of a table that counts (or leaves out) the raters a study excludes."""
    if not excluded:
        return []
    listed = ", ".join(sorted(names[pk] for pk in excluded))
    if include_excluded:
        return [f"raters the study excludes are counted here (include_excluded): {listed}"]
    return [f"raters the study excludes are left out: {listed} (include_excluded counts them)"]


def _rater_names(study: Study) -> tuple[dict[int, str], frozenset[int]]:
    rows = list(
        Rater.objects.filter(study=study).values_list(
            "pk", "user__username", "external_id", "excluded"
        )
    )
    counts = Counter(username or external for _, username, external, _ in rows)
    names = {}
    for pk, username, external, _ in rows:
        name = username or external
        # A username equal to another rater's release id would merge two people: keep them apart.
        names[pk] = name if counts[name] == 1 else f"{name} (rater {pk})"
    return names, frozenset(pk for pk, *_, excluded in rows if excluded)


def _primary_verdicts(study: Study) -> dict[int, str]:
    """The study run's primary judge's verdict on each item's (first) reply, by unit id."""
    run = study.run
    if run is None or run.primary_judge is None:
        return {}
    return dict(
        Judgment.objects.filter(
            unit_id__in=study.items.filter(unit__isnull=False).values("unit_id"),
            judge_name=run.primary_judge.name,
            state=JudgmentState.DONE,
        ).values_list("unit_id", "verdict")
    )


def _items(study: Study) -> dict[int, _Item]:
    verdicts = _primary_verdicts(study)
    # Imported items keep the release's record verbatim; the kind names the field that holds
    # the judge's verdict on the item.
    judge_field = f"payload__{kinds.get(study.kind).release_judge_field}"
    rows = study.items.values_list(
        "pk",
        "is_gold",
        "expected",
        "trigger__type",
        "unit_id",
        "unit__endpoint__name",
        "payload__trigger_type",
        judge_field,
    )
    items = {}
    for pk, is_gold, expected, trigger_type, unit_id, model, r_type, r_judge in rows:
        judge = verdicts.get(unit_id) or r_judge
        items[pk] = _Item(
            is_gold=is_gold,
            expected=expected if is_gold else "",
            group=trigger_type or str(r_type or ""),
            model=model or "",
            judge_label=str(judge or "").upper(),
        )
    return items


def study_data(study: Study) -> StudyData:
    """Raters, items (with their judge verdict) and live answers of ``study``: 4 queries (its
    run and primary judge are expected to be loaded with it)."""
    names, excluded = _rater_names(study)
    answers = [
        _Answer(*row)
        for row in Answer.objects.counted()
        .filter(assignment__item__study=study)
        .order_by("id")
        .values_list(
            "assignment__item_id",
            "assignment__rater_id",
            "assignment__role",
            "label",
            "display__order",
            "time_on_item_s",
        )
    ]
    return StudyData(
        kind=study.kind, names=names, excluded=excluded, items=_items(study), answers=answers
    )


# --- The three inputs -------------------------------------------------------------------------


def label_matrix(
    data: StudyData, *, include_excluded: bool = False
) -> tuple[LabelMatrix, list[str]]:
    """Every live label of the study as items × raters (any kind: its labels are the
    categories), the judge's label and the gold label per item; and notes for the table."""
    kind = kinds.get(data.kind)
    categories, ordered = kind.labels, kind.ordinal
    answers = data.counted(include_excluded=include_excluded)
    notes = data.excluded_note(include_excluded=include_excluded)
    # An adjudicator's decision on a split is not an independent rating: they saw the others.
    thirds = sum(a.role == AssignmentRole.ADJUDICATE for a in answers)
    answers = [a for a in answers if a.role == AssignmentRole.ANNOTATE]
    if thirds:
        notes.append(f"{thirds} third auditor decision(s) on split audits left out")
    ratings = [Rating(str(a.item_id), data.names[a.rater_id], a.label) for a in answers]
    # A judge's verdict is a label only on the verdict scale (a pair's is its stratum).
    with_judge = categories == VERDICT_ORDER
    items = [
        RatedItem(
            str(pk),
            group=item.group,
            judge_label=item.judge_label if with_judge else "",
            gold_label=item.expected,
        )
        for pk, item in data.items.items()
    ]
    matrix = LabelMatrix.from_records(ratings, items, categories=categories, ordered=ordered)
    return matrix, notes


def preference_judgements(
    data: StudyData,
) -> tuple[PreferenceJudgements, frozenset[str], list[str]]:
    """A pairwise study's live judgements, de-swapped, with the vanilla reply's judge verdict;
    the names of the raters it excludes; notes. Gold items are left out."""
    records, gold = [], 0
    for answer in data.answers:
        item = data.items[answer.item_id]
        if item.is_gold:
            gold += 1
            continue
        records.append(
            PreferenceRecord(
                item_id=str(answer.item_id),
                annotator_id=data.names[answer.rater_id],
                choice=CASE_CHOICES[Case(answer.label)],
                injected_on_left=bool(answer.order and answer.order[0] == Case.B),
                seconds=answer.seconds,
                vanilla_verdict=item.judge_label,
            )
        )
    notes = [f"{gold} judgement(s) of gold items left out (quality checks)"] if gold else []
    excluded = frozenset(data.names[pk] for pk in data.excluded)
    return PreferenceJudgements.from_records(records), excluded, notes


def failure_mode_labels(
    data: StudyData, *, include_excluded: bool = False
) -> tuple[FailureModeLabels, list[str]]:
    """One label per labelled reply of a failure-mode study: the majority of its annotators'
    labels (tie rule ``exclude``); gold items left out; notes."""
    notes = data.excluded_note(include_excluded=include_excluded)
    counts: dict[int, np.ndarray] = {}
    gold = set()
    for answer in data.counted(include_excluded=include_excluded):
        if data.items[answer.item_id].is_gold:
            gold.add(answer.item_id)
            continue
        row = counts.setdefault(answer.item_id, np.zeros(len(FAILURE_MODES), dtype=np.int64))
        row[FAILURE_MODES.index(answer.label)] += 1
    item_ids = sorted(counts)
    majority = agreement.majority_labels(
        np.array([counts[i] for i in item_ids], dtype=np.int64).reshape(-1, len(FAILURE_MODES)),
        "exclude",
    )
    labels = [
        FailureModeLabel(data.items[i].model, str(i), FAILURE_MODES[m])
        for i, m in zip(item_ids, majority.tolist(), strict=True)
        if m >= 0
    ]
    ties = int((majority < 0).sum())
    if ties:
        notes.append(f"{ties} reply(ies) left out: their annotators' top labels tie")
    if gold:
        notes.append(f"{len(gold)} gold item(s) left out (quality checks)")
    return FailureModeLabels.from_records(labels), notes


def battles(study: Study, *, include_excluded: bool = False) -> tuple[Battles, list[str]]:
    """An arena or pairwise study's live battles (``selectors.study_battle_counts``: counted by
    the database) as ``Battles``, gold items left out (quality checks); and notes. 2 queries."""
    names, excluded = _rater_names(study)
    counts = annotation_selectors.study_battle_counts(
        study=study, include_excluded=include_excluded
    )
    notes = excluded_note(names, excluded, include_excluded=include_excluded)
    gold = sum(c.count for c in counts if c.gold)
    if gold:
        notes.append(f"{gold} battle(s) on gold items left out (quality checks)")
    ranked = Battles.from_counts(
        (c.source_a, c.source_b, c.winner, c.count) for c in counts if not c.gold
    )
    return ranked, notes


def judged_pairs(
    study: Study, data: StudyData, *, include_excluded: bool = False
) -> tuple[JudgedPairs, list[str]]:
    """The study's pairs of replies (items with two replies; gold items left out), each with its
    live labels as battle outcomes for the item's side A against side B (``battle_winner``:
    the arena's as stored, the pairwise kind's case A — vanilla — as side A), and every LLM
    pairwise judge's verdicts on the same two replies in each order (``judge_pairs --pairs
    study=ID`` asks for exactly these), turned to the item's sides where the comparison stores
    them the other way round; notes. Two queries besides ``data``'s."""
    kind = kinds.get(study.kind)
    notes = data.excluded_note(include_excluded=include_excluded)
    position: dict[tuple[int, int], int] = {}
    item_ids: list[int] = []
    gold = 0
    for pk, unit_a, unit_b in (
        study.items.filter(unit__isnull=False, unit_b__isnull=False)
        .order_by("position", "pk")
        .values_list("pk", "unit_id", "unit_b_id")
    ):
        if data.items[pk].is_gold:
            gold += 1
            continue
        position[(unit_a, unit_b)] = len(item_ids)
        item_ids.append(pk)
    row_of = {pk: row for row, pk in enumerate(item_ids)}
    human = np.zeros((len(item_ids), len(BATTLE_OUTCOMES)), dtype=np.int64)
    for answer in data.counted(include_excluded=include_excluded):
        row = row_of.get(answer.item_id)
        if row is not None and answer.role == AssignmentRole.ANNOTATE:
            human[row, BATTLE_OUTCOME_CODES[kind.battle_winner(answer.label)]] += 1
    # The comparisons of the items' replies: a superset (side A of one item against side B of
    # another), narrowed to the items' own pairs below.
    a_side = study.items.values("unit_id")
    b_side = study.items.values("unit_b_id")
    verdicts = PairwiseJudgment.objects.filter(
        Q(comparison__unit_a_id__in=a_side, comparison__unit_b_id__in=b_side)
        | Q(comparison__unit_a_id__in=b_side, comparison__unit_b_id__in=a_side)
    ).values_list(
        "comparison__unit_a_id", "comparison__unit_b_id", "judge_name", "order", "state", "winner"
    )
    judges: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for unit_a, unit_b, judge, order, state, winner in verdicts:
        row, turned = position.get((unit_a, unit_b)), False
        if row is None:
            row, turned = position.get((unit_b, unit_a)), True
        if row is None:
            continue
        code = ERROR
        if state == JudgmentState.DONE:
            code = BATTLE_OUTCOME_CODES[BATTLE_SWAPPED[winner] if turned else winner]
        # Stored the other way round, the comparison's side A shown first is the item's B.
        first_a = (order == PairOrder.AB) != turned
        pair = judges.setdefault(
            judge,
            (
                np.full(len(item_ids), NOT_ASKED, np.int64),
                np.full(len(item_ids), NOT_ASKED, np.int64),
            ),
        )
        pair[0 if first_a else 1][row] = code
    if gold:
        notes.append(f"{gold} gold item(s) left out (quality checks)")
    unpaired = len(data.items) - len(item_ids) - gold
    if unpaired:
        notes.append(
            f"{unpaired} item(s) without two replies of a run (imported battles, release "
            "items) can have no LLM pairwise verdict: left out"
        )
    pairs = JudgedPairs(
        item_id=np.array(item_ids, dtype=np.int64),
        human=human,
        judges={name: judges[name] for name in sorted(judges)},
    )
    return pairs, notes


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector paused for a bulk read: decoding thousands of answers builds
    some 10^5 short-lived containers, none in a cycle (reference counting frees them all), and
    meanwhile the collector would scan the whole heap — Django, NumPy, SciPy — several times:
    half of a HALO table's time on the benchmark (bench/README.md). It resumes after."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def halo_judgments(
    study: Study, *, include_excluded: bool = False
) -> tuple[HaloJudgments, list[str]]:
    """Every live diagnosis of every reply in a HALO study (one judgment per reply per
    annotator), with the reply's source and effort; gold checkpoints left out; notes. Three
    queries: raters, items (their responses' sources only, not their texts), answers."""
    with _no_cycle_collection():
        return _halo_judgments(study, include_excluded=include_excluded)


def _halo_judgments(study: Study, *, include_excluded: bool) -> tuple[HaloJudgments, list[str]]:
    names, excluded = _rater_names(study)
    items = {
        pk: (is_gold, key, {s["id"]: s for s in sources or []})
        for pk, is_gold, key, sources in study.items.values_list(
            "pk", "is_gold", "key", "payload__sources"
        )
    }
    records: list[HaloJudgment] = []
    gold = left_out = 0
    for item_id, rater_id, details in (
        Answer.objects.counted()
        .filter(assignment__item__study=study)
        .order_by("id")
        .values_list("assignment__item_id", "assignment__rater_id", "details")
    ):
        if rater_id in excluded and not include_excluded:
            left_out += 1
            continue
        is_gold, key, sources = items[item_id]
        if is_gold:
            gold += 1
            continue
        for reply in (details or {}).get("replies") or []:
            source = sources[reply["response"]]
            records.append(
                HaloJudgment(
                    checkpoint=key,
                    response=reply["response"],
                    rater=names[rater_id],
                    model=source["source"],
                    level=reply["level"],
                    acceptable=bool(reply["acceptable"]),
                    timing=reply.get("timing", ""),
                    intensity=reply.get("intensity", ""),
                    issues=frozenset(reply.get("issues") or ()),
                    suggested=reply.get("suggested", ""),
                    reasoning_tokens=source.get("reasoning_tokens"),
                    retrieval_rounds=source.get("retrieval_rounds"),
                )
            )
    notes = []
    if excluded:
        who = ", ".join(sorted(names[pk] for pk in excluded))
        notes.append(
            f"raters the study excludes are counted here (include_excluded): {who}"
            if include_excluded
            else f"raters the study excludes are left out: {who} ({left_out} answer(s); "
            "include_excluded counts them)"
        )
    if gold:
        notes.append(f"{gold} answer(s) on gold checkpoints left out (quality checks)")
    return HaloJudgments.from_records(records), notes


# --- Proposal review --------------------------------------------------------------------------


def proposal_votes(
    study: Study, *, include_excluded: bool = False
) -> tuple[ProposalVotes, list[str]]:
    """A proposal-review study's proposals (from its items' payloads) with their live decision
    counts, and its silent decisions; gold items left out (quality checks); notes. Three
    queries, whatever the study's size."""
    names, excluded = _rater_names(study)
    notes = excluded_note(names, excluded, include_excluded=include_excluded)
    counts: dict[tuple[int, str], list[int]] = {}
    raters: set[int] = set()
    answers = reject_all = 0
    for item_id, rater_id, details in (
        Answer.objects.counted()
        .filter(
            assignment__item__study=study,
            assignment__item__is_gold=False,
        )
        .values_list("assignment__item_id", "assignment__rater_id", "details")
    ):
        if rater_id in excluded and not include_excluded:
            continue
        raters.add(rater_id)
        answers += 1
        reject_all += bool((details or {}).get("reject_all"))
        for pid, decision in ((details or {}).get("decisions") or {}).items():
            # PROPOSAL_DECISIONS order: reject 0, accept 1.
            counts.setdefault((item_id, pid), [0, 0])[decision == ProposalDecision.ACCEPT] += 1
    proposals, silent = [], []
    gold = 0
    for item_id, is_gold, key, payload_proposals, payload_silent in study.items.order_by(
        "pk"
    ).values_list("pk", "is_gold", "key", "payload__proposals", "payload__silent"):
        if is_gold:
            gold += 1
            continue
        for proposal in payload_proposals or []:
            rejects, accepts = counts.get((item_id, proposal["id"]), (0, 0))
            proposals.append(
                ProposalRecord(key, proposal["id"], proposal["source"], accepts, rejects)
            )
        silent += [SilentRecord(key, model) for model in payload_silent or []]
    if gold:
        notes.append(f"{gold} gold context(s) left out (quality checks)")
    votes = ProposalVotes.from_records(
        proposals, silent, n_raters=len(raters), n_answers=answers, n_reject_all=reject_all
    )
    return votes, notes
