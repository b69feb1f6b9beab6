"""The inputs of the annotation-based statistics, as plain data (no ORM).

The human studies' answers live in the annotation app. ``stats/studies.py`` reads them into
these structures — one per table — for the pure functions in ``stats.compute``; so do the
loaders of the official release's human-eval files (``stats/release_files.py``). Keeping the
layout here, small and explicit, is what lets both sources share every computation.

- ``LabelMatrix`` — labels (Study 1's direct ratings, and any study where several people label
  the same items): items × raters label codes, the item's group (trigger type), the judge's
  label and an optional gold label.
- ``PreferenceJudgements`` — pairwise judgements (Study 2): one entry per judgement.
- ``FailureModeLabels`` — one failure-mode category per failed reply.
- ``Battles`` — pairwise battles between reply sources (the arena, LLM pairwise judges, the
  public Chatbot Arena battle format): one entry per battle, for the Bradley–Terry ranking.
- ``HaloJudgments`` — HALO diagnoses: one entry per reply per annotator.
- ``JudgedPairs`` — a study's pairs of replies with people's labels and LLM pairwise judges'
  verdicts on the same pairs: one entry per pair.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from benchmark.vocabulary import (
    ACTION_LEVELS,
    FAILURE_MODES,
    INTENSITIES,
    OTHER_ISSUES,
    TIMINGS,
    VERDICT_ORDER,
    BattleWinner,
)

INJECTED, VANILLA, TIE = "injected", "vanilla", "tie"
CHOICES = (INJECTED, VANILLA, TIE)


def verdict_code(label: str | None, categories: Sequence[str] = VERDICT_ORDER) -> int:
    """A label's code, case-insensitive (the release writes both ``PASS`` and ``Pass``); -1 for
    none."""
    if not label:
        return -1
    return [c.upper() for c in categories].index(label.upper())


# --- Direct ratings ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Rating:
    item_id: str
    rater_id: str
    label: str


@dataclass(frozen=True)
class RatedItem:
    item_id: str
    group: str = ""  # e.g. the trigger type; "" when not grouped
    judge_label: str = ""  # the judge's verdict on the item, "" if none
    gold_label: str = ""  # an agreed reference label, "" if none


@dataclass(frozen=True)
class LabelMatrix:
    """``labels[i, r]`` is rater r's code for item i (-1: did not rate). ``judge`` and ``gold``
    are per-item codes (-1: none). Codes index ``categories``; ``ordered`` says whether the
    categories are ordinal (then α is computed ordinal, else nominal)."""

    item_ids: np.ndarray
    rater_ids: np.ndarray
    labels: np.ndarray
    groups: np.ndarray
    judge: np.ndarray
    gold: np.ndarray
    categories: tuple[str, ...] = VERDICT_ORDER
    ordered: bool = True

    @classmethod
    def from_records(
        cls,
        ratings: Iterable[Rating],
        items: Iterable[RatedItem],
        *,
        categories: Sequence[str] = VERDICT_ORDER,
        ordered: bool = True,
    ) -> LabelMatrix:
        """Build the matrix. A rater who labelled an item twice keeps the later label; ratings
        of items not in ``items`` are an error (they would be silently dropped otherwise)."""
        items = list(items)
        index = {item.item_id: i for i, item in enumerate(items)}
        ratings = list(ratings)
        raters = sorted({r.rater_id for r in ratings})
        rater_index = {rater: j for j, rater in enumerate(raters)}
        labels = np.full((len(items), len(raters)), -1, dtype=np.int64)
        for rating in ratings:
            if rating.item_id not in index:
                raise ValueError(f"rating of unknown item {rating.item_id!r}")
            labels[index[rating.item_id], rater_index[rating.rater_id]] = verdict_code(
                rating.label, categories
            )
        return cls(
            item_ids=np.array([item.item_id for item in items], dtype=object),
            rater_ids=np.array(raters, dtype=object),
            labels=labels,
            groups=np.array([item.group for item in items], dtype=object),
            judge=np.array(
                [verdict_code(item.judge_label, categories) for item in items], dtype=np.int64
            ),
            gold=np.array(
                [verdict_code(item.gold_label, categories) for item in items], dtype=np.int64
            ),
            categories=tuple(categories),
            ordered=ordered,
        )

    def items_where(self, mask: np.ndarray) -> LabelMatrix:
        return LabelMatrix(
            item_ids=self.item_ids[mask],
            rater_ids=self.rater_ids,
            labels=self.labels[mask],
            groups=self.groups[mask],
            judge=self.judge[mask],
            gold=self.gold[mask],
            categories=self.categories,
            ordered=self.ordered,
        )


# --- Pairwise preference ----------------------------------------------------------------------


@dataclass(frozen=True)
class PreferenceRecord:
    item_id: str
    annotator_id: str
    choice: str  # INJECTED, VANILLA or TIE (de-swapped: which *case* won, not which side)
    injected_on_left: bool  # the rubric-injected reply was shown on the left (first)
    seconds: float | None  # time spent on the judgement; None if unknown
    vanilla_verdict: str  # the judge's verdict on the vanilla reply: the stratum


@dataclass(frozen=True)
class PreferenceJudgements:
    """Aligned arrays, one entry per judgement."""

    item_id: np.ndarray
    annotator_id: np.ndarray
    choice: np.ndarray
    injected_on_left: np.ndarray
    seconds: np.ndarray
    vanilla_verdict: np.ndarray

    @classmethod
    def from_records(cls, records: Iterable[PreferenceRecord]) -> PreferenceJudgements:
        records = list(records)
        for record in records:
            if record.choice not in CHOICES:
                raise ValueError(f"choice {record.choice!r} is not one of {CHOICES}")
        return cls(
            item_id=np.array([r.item_id for r in records], dtype=object),
            annotator_id=np.array([r.annotator_id for r in records], dtype=object),
            choice=np.array([r.choice for r in records], dtype=object),
            injected_on_left=np.array([r.injected_on_left for r in records], dtype=bool),
            seconds=np.array(
                [np.nan if r.seconds is None else r.seconds for r in records], dtype=float
            ),
            vanilla_verdict=np.array([r.vanilla_verdict.upper() for r in records], dtype=object),
        )

    def subset(self, mask: np.ndarray) -> PreferenceJudgements:
        return PreferenceJudgements(
            item_id=self.item_id[mask],
            annotator_id=self.annotator_id[mask],
            choice=self.choice[mask],
            injected_on_left=self.injected_on_left[mask],
            seconds=self.seconds[mask],
            vanilla_verdict=self.vanilla_verdict[mask],
        )


# --- Failure modes ----------------------------------------------------------------------------


@dataclass(frozen=True)
class FailureModeLabel:
    model: str
    item_id: str
    category: str  # one of FAILURE_MODES (or the study's own categories)


@dataclass(frozen=True)
class FailureModeLabels:
    model: np.ndarray
    category: np.ndarray
    categories: tuple[str, ...] = FAILURE_MODES
    item_id: np.ndarray | None = None  # the labelled item of each entry (``FailureModeLabel``)

    @classmethod
    def from_records(
        cls, labels: Iterable[FailureModeLabel], *, categories: Sequence[str] = FAILURE_MODES
    ) -> FailureModeLabels:
        """One label per failed reply: a study with several annotators per reply resolves them
        first (e.g. ``agreement.majority_labels``). Unknown categories are an error."""
        labels = list(labels)
        for label in labels:
            if label.category not in categories:
                raise ValueError(f"unknown failure mode {label.category!r}")
        return cls(
            model=np.array([x.model for x in labels], dtype=object),
            category=np.array([x.category for x in labels], dtype=object),
            categories=tuple(categories),
            item_id=np.array([x.item_id for x in labels], dtype=object),
        )


# --- Pairwise battles -------------------------------------------------------------------------

# A battle's outcome code is its winner's position in BattleWinner (model_a = 0, model_b = 1,
# tie = 2, tie (bothbad) = 3): the spelling is the vocabulary's, the code only its index.
BATTLE_OUTCOMES: tuple[str, ...] = tuple(BattleWinner.values)
BATTLE_OUTCOME_CODES: dict[str, int] = {winner: code for code, winner in enumerate(BATTLE_OUTCOMES)}

# Battles are checked, and renumbered to sorted source indices, this many at a time: building
# and checking the arrays never holds a full-length temporary beside them.
_CHUNK = 1 << 17


@dataclass(frozen=True)
class Battles:
    """Pairwise battles, one entry per battle, as three aligned arrays: ``a[k]`` and ``b[k]``
    index ``sources`` (the battle's side A and side B in their stored order, never screen
    positions) and ``outcome[k]`` indexes ``BATTLE_OUTCOMES``. ``a`` and ``b`` are int32,
    ``outcome`` int8: 9 bytes a battle, and nothing else grows with the battle count.
    ``from_records`` sorts ``sources`` by name, so the same battles in any order give the same
    sources and the same statistics."""

    sources: tuple[str, ...]
    a: np.ndarray
    b: np.ndarray
    outcome: np.ndarray

    def __post_init__(self) -> None:
        # Checked vectorised, so that a structure built from arrays (not from_records) is held
        # to the same rules; the first bad entry is named (1-based, like from_records' rows).
        n_sources = len(self.sources)
        if len(set(self.sources)) != n_sources:
            raise ValueError("Battles.sources names a source twice")
        if not (self.a.shape == self.b.shape == self.outcome.shape) or self.a.ndim != 1:
            raise ValueError("Battles.a, .b and .outcome must be 1-d arrays of one length")
        columns = (
            ("a", self.a, n_sources),
            ("b", self.b, n_sources),
            ("outcome", self.outcome, len(BATTLE_OUTCOMES)),
        )
        for name, values, _ in columns:
            if values.dtype.kind not in "iu":
                raise ValueError(f"Battles.{name} must hold integers, not {values.dtype}")
        for start in range(0, self.a.size, _CHUNK):
            part = slice(start, start + _CHUNK)
            for name, values, upper in columns:
                bad = np.flatnonzero((values[part] < 0) | (values[part] >= upper))
                if bad.size:
                    k = start + bad[0]
                    raise ValueError(
                        f"battle {k + 1}: {name} = {values[k]} is outside 0..{upper - 1}"
                    )
            same = np.flatnonzero(self.a[part] == self.b[part])
            if same.size:
                k = start + same[0]
                raise ValueError(f"battle {k + 1}: {self.sources[self.a[k]]!r} against itself")

    def __len__(self) -> int:
        return int(self.a.size)

    @classmethod
    def from_records(cls, records: Iterable[tuple[str, str, str]]) -> Battles:
        """Build from ``(source_a, source_b, winner)`` rows, ``winner`` spelt as
        ``BattleWinner`` spells it. Rows are read one at a time into typed arrays (no list of
        the rows is kept), so memory is the 9 bytes a battle of the result. A row with an
        unknown winner, an empty or non-text source, or a source against itself raises a
        ValueError naming the row (1-based)."""
        index: dict[str, int] = {}
        a, b, outcome = array("i"), array("i"), array("b")
        for row, record in enumerate(records, start=1):
            try:
                source_a, source_b, winner = record
            except (TypeError, ValueError):
                raise ValueError(
                    f"row {row}: expected (source_a, source_b, winner), got {record!r}"
                ) from None
            code = BATTLE_OUTCOME_CODES.get(winner) if isinstance(winner, str) else None
            if code is None:
                raise ValueError(
                    f"row {row}: winner {winner!r} is not one of {', '.join(BATTLE_OUTCOMES)}"
                )
            for side, source in (("source_a", source_a), ("source_b", source_b)):
                if not isinstance(source, str) or not source:
                    raise ValueError(f"row {row}: {side} {source!r} is not a source name")
            if source_a == source_b:
                raise ValueError(f"row {row}: {source_a!r} against itself")
            a.append(index.setdefault(source_a, len(index)))
            b.append(index.setdefault(source_b, len(index)))
            outcome.append(code)
        sources = sorted(index)
        # Indices were handed out in order of first appearance; renumber them in name order.
        renumber = np.empty(len(sources), dtype=np.int32)
        renumber[[index[source] for source in sources]] = np.arange(len(sources), dtype=np.int32)
        a_codes, b_codes = _int_array(a), _int_array(b)
        for start in range(0, a_codes.size, _CHUNK):
            part = slice(start, start + _CHUNK)
            a_codes[part] = renumber[a_codes[part]]
            b_codes[part] = renumber[b_codes[part]]
        return cls(sources=tuple(sources), a=a_codes, b=b_codes, outcome=_int_array(outcome))

    @classmethod
    def from_counts(cls, records: Iterable[tuple[str, str, str, int]]) -> Battles:
        """Build from ``(source_a, source_b, winner, count)`` rows, each standing for ``count``
        identical battles (a database's ``GROUP BY``): the same structure as ``from_records``
        given every battle, each row's ``count`` copies side by side. Rows are checked as
        ``from_records`` checks them; a count that is not a positive integer raises a
        ValueError naming the row (1-based)."""
        counts = array("q")

        def battles() -> Iterator[tuple[str, str, str]]:
            for row, record in enumerate(records, start=1):
                try:
                    *battle, count = record
                except (TypeError, ValueError):
                    battle, count = [], None
                if len(battle) != 3:
                    raise ValueError(
                        f"row {row}: expected (source_a, source_b, winner, count), got {record!r}"
                    )
                # bool is an int; True battles are not a count.
                if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                    raise ValueError(f"row {row}: count {count!r} is not a positive integer")
                counts.append(count)
                yield battle[0], battle[1], battle[2]

        distinct = cls.from_records(battles())
        repeats = _int_array(counts)
        return cls(
            sources=distinct.sources,
            a=np.repeat(distinct.a, repeats),
            b=np.repeat(distinct.b, repeats),
            outcome=np.repeat(distinct.outcome, repeats),
        )


def _int_array(values: array) -> np.ndarray:
    """The typed array's buffer as a NumPy array of the same item size, without a copy
    (``array("i")`` is a C int: 4 bytes on every platform NumPy supports)."""
    dtype = np.dtype(f"i{values.itemsize}")
    if not values:
        return np.empty(0, dtype=dtype)
    return np.frombuffer(values, dtype=dtype)


# --- People and LLM pairwise judges on the same pairs -----------------------------------------


@dataclass(frozen=True)
class JudgedPairs:
    """A study's pairs of replies (its items with two replies), with what people and LLM
    pairwise judges said of each, aligned by pair. ``human[i]`` counts pair ``i``'s labels per
    outcome (columns: ``BATTLE_OUTCOMES``, for the item's side A against its side B);
    ``judges[name]`` is that judge's ``(ab, ba)``: its verdict on the pair with the item's side
    A shown first and with its side B shown first, as ``BATTLE_OUTCOME_CODES`` for the item's
    sides (a comparison stored the other way round is turned back), -1 where the judge was not
    asked and -2 where it erred (``pairwise_consistency.NOT_ASKED`` / ``ERROR``)."""

    item_id: np.ndarray  # (pairs,)
    human: np.ndarray  # (pairs, len(BATTLE_OUTCOMES)) int64
    judges: dict[str, tuple[np.ndarray, np.ndarray]]

    def __post_init__(self) -> None:
        n = self.item_id.shape[0]
        if self.human.shape != (n, len(BATTLE_OUTCOMES)):
            raise ValueError(
                f"JudgedPairs.human must be {n} × {len(BATTLE_OUTCOMES)}, not {self.human.shape}"
            )
        for name, (ab, ba) in self.judges.items():
            if ab.shape != (n,) or ba.shape != (n,):
                raise ValueError(f"JudgedPairs.judges[{name!r}]: one verdict per pair and order")


# --- HALO diagnoses ---------------------------------------------------------------------------


class HaloJudgment(NamedTuple):
    """One annotator's diagnosis of one reply at a checkpoint. ``timing`` and ``intensity`` are
    "" where they were not asked (an accepted reply, an L0), ``issues`` the other issues
    flagged; effort is the reply's own (None: not recorded). A named tuple: a study's read
    makes one per reply per annotator, tens of thousands."""

    checkpoint: str
    response: str  # the reply at its checkpoint (its response id there)
    rater: str
    model: str  # the reply's source
    level: str  # one of ACTION_LEVELS
    acceptable: bool
    timing: str = ""
    intensity: str = ""
    issues: frozenset[str] = frozenset()
    suggested: str = ""  # the pre-filled level, "" if none
    reasoning_tokens: int | None = None
    retrieval_rounds: int | None = None


_LEVEL = {level: code for code, level in enumerate(ACTION_LEVELS)}
_TIMING = {"": -1, **{timing: code for code, timing in enumerate(TIMINGS)}}
_INTENSITY = {"": -1, **{intensity: code for code, intensity in enumerate(INTENSITIES)}}
_SUGGESTED = {"": -1, **_LEVEL}


@dataclass(frozen=True)
class HaloJudgments:
    """Aligned arrays, one entry per judgment. ``checkpoint`` and ``reply`` are integer codes
    (in order of first appearance; a reply is a response at a checkpoint, so its several
    judgments share its code); ``rater`` and ``model`` names. Codes index the vocabularies:
    ``level`` 0–3 (``ACTION_LEVELS``), ``timing`` / ``intensity`` 0–2 (``TIMINGS``,
    ``INTENSITIES``) or -1 where not asked, ``suggested`` -1 where nothing was pre-filled;
    ``issues[:, j]`` whether ``OTHER_ISSUES[j]`` was flagged; effort NaN where not recorded."""

    checkpoint: np.ndarray
    reply: np.ndarray
    rater: np.ndarray
    model: np.ndarray
    level: np.ndarray
    acceptable: np.ndarray
    timing: np.ndarray
    intensity: np.ndarray
    issues: np.ndarray
    suggested: np.ndarray
    reasoning_tokens: np.ndarray
    retrieval_rounds: np.ndarray

    @classmethod
    def from_records(cls, records: Iterable[HaloJudgment]) -> HaloJudgments:
        """Unknown levels, timings, intensities or issues are an error. One pass (a study's
        read builds tens of thousands of these)."""
        checkpoints: dict[str, int] = {}
        replies: dict[tuple[str, str], int] = {}
        columns: tuple[list, ...] = tuple([] for _ in range(11))
        (checkpoint, reply, rater, model, level, acceptable, timing, intensity, issues,
         suggested, effort) = columns  # fmt: skip
        known_issues = set(OTHER_ISSUES)
        for r in records:
            try:
                codes = (_LEVEL[r.level], _TIMING[r.timing], _INTENSITY[r.intensity])
                prefill = _SUGGESTED[r.suggested]
            except KeyError:
                raise ValueError(f"not a HALO diagnosis: {r}") from None
            if not r.issues <= known_issues:
                raise ValueError(f"not a HALO diagnosis: {r}")
            checkpoint.append(checkpoints.setdefault(r.checkpoint, len(checkpoints)))
            reply.append(replies.setdefault((r.checkpoint, r.response), len(replies)))
            rater.append(r.rater)
            model.append(r.model)
            level.append(codes[0])
            timing.append(codes[1])
            intensity.append(codes[2])
            acceptable.append(r.acceptable)
            issues.append([issue in r.issues for issue in OTHER_ISSUES])
            suggested.append(prefill)
            effort.append(
                (
                    np.nan if r.reasoning_tokens is None else r.reasoning_tokens,
                    np.nan if r.retrieval_rounds is None else r.retrieval_rounds,
                )
            )
        n = len(checkpoint)
        efforts = np.array(effort, dtype=float).reshape(n, 2)
        return cls(
            checkpoint=np.array(checkpoint, dtype=np.int64),
            reply=np.array(reply, dtype=np.int64),
            rater=np.array(rater, dtype=object),
            model=np.array(model, dtype=object),
            level=np.array(level, dtype=np.int64),
            acceptable=np.array(acceptable, dtype=bool),
            timing=np.array(timing, dtype=np.int64),
            intensity=np.array(intensity, dtype=np.int64),
            issues=np.array(issues, dtype=bool).reshape(n, len(OTHER_ISSUES)),
            suggested=np.array(suggested, dtype=np.int64),
            reasoning_tokens=efforts[:, 0],
            retrieval_rounds=efforts[:, 1],
        )

    def subset(self, mask: np.ndarray) -> HaloJudgments:
        return HaloJudgments(
            **{name: getattr(self, name)[mask] for name in self.__dataclass_fields__}
        )


# --- Proposal review --------------------------------------------------------------------------


@dataclass(frozen=True)
class ProposalRecord:
    """One proposed task and what its annotators decided on it (live decisions counted)."""

    context_id: str
    proposal_id: str
    source: str  # the model that proposed it
    accepts: int
    rejects: int


@dataclass(frozen=True)
class SilentRecord:
    """A model that proposed nothing at a context (it "stayed silent")."""

    context_id: str
    source: str


@dataclass(frozen=True)
class ProposalVotes:
    """A proposal-review study's decisions: aligned arrays with one entry per proposal
    (``context`` indexes ``context_ids``), and one per silent decision. ``counts`` are the
    proposals' decision counts in ``PROPOSAL_DECISIONS`` order (reject, accept)."""

    context_ids: np.ndarray
    context: np.ndarray
    proposal_id: np.ndarray
    source: np.ndarray
    counts: np.ndarray  # proposals × 2: rejects, accepts
    silent_context: np.ndarray
    silent_source: np.ndarray
    n_raters: int = 0  # people whose decisions are counted
    n_answers: int = 0  # their answers (one per context each)
    n_reject_all: int = 0  # of which "reject all"

    @classmethod
    def from_records(
        cls,
        proposals: Iterable[ProposalRecord],
        silent: Iterable[SilentRecord] = (),
        *,
        n_raters: int = 0,
        n_answers: int = 0,
        n_reject_all: int = 0,
    ) -> ProposalVotes:
        """Contexts are numbered in order of first appearance. A silent decision at a context
        without proposals is an error: nothing could say whether that context needed help."""
        proposals = list(proposals)
        index: dict[str, int] = {}
        for record in proposals:
            index.setdefault(record.context_id, len(index))
            if record.accepts < 0 or record.rejects < 0:
                raise ValueError(f"negative decision count on {record.proposal_id!r}")
        silent = list(silent)
        for decision in silent:
            if decision.context_id not in index:
                raise ValueError(f"silent decision at a context without proposals: {decision}")
        n = len(proposals)
        return cls(
            context_ids=np.array(list(index), dtype=object),
            context=np.fromiter((index[p.context_id] for p in proposals), np.int64, count=n),
            proposal_id=np.array([p.proposal_id for p in proposals], dtype=object),
            source=np.array([p.source for p in proposals], dtype=object),
            counts=np.array([(p.rejects, p.accepts) for p in proposals], dtype=np.int64).reshape(
                n, 2
            ),
            silent_context=np.fromiter(
                (index[s.context_id] for s in silent), np.int64, count=len(silent)
            ),
            silent_source=np.array([s.source for s in silent], dtype=object),
            n_raters=n_raters,
            n_answers=n_answers,
            n_reject_all=n_reject_all,
        )

    @property
    def n_contexts(self) -> int:
        return len(self.context_ids)
