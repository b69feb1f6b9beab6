"""Read-side queries for the annotation pages, each in a fixed number of queries.

The two access helpers (``rater_for``, ``assignment_for``) are where permissions and blinding
are enforced: an annotator reaches a study only as one of its raters, and an item only through
an assignment of their own (anything else is a 404). ``item_view`` builds what the workspace
shows, through the study's kind (each kind turns its sides and judges into "Response 1/2" and
"Judge A/B"): nothing it returns names a model, a judge, a condition or a unit.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from django.db.models import (
    BooleanField,
    Count,
    Exists,
    ExpressionWrapper,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
)
from django.db.models.functions import Coalesce
from django.http import Http404

from annotation import kinds, sql
from annotation.kinds.base import BattleItem, StudyKind
from annotation.metrics import Vote, gold_accuracy, percent_agreement, rater_figures
from annotation.models import (
    Answer,
    Assignment,
    AssignmentState,
    Rater,
    RaterExclusion,
    RetractionReason,
    Study,
    StudyItem,
    StudyStatus,
)
from annotation.sql import ImageRow, TriggerRow
from benchmark.evaluation.requests import conversation_until
from benchmark.models import Anchor, TriggerType, TurnImage
from core.roles import is_staff_like

# Rater-quality flags (docs/annotation.md): fast clicking, one label, one side.
FAST_MEDIAN_S = 30
ONE_SIDED_SHARE = 0.8
FLAG_MIN_ANSWERS = 10


# --- Access -----------------------------------------------------------------------------------


def rater_for(*, user, study_id: int) -> Rater:
    """The user's place in the study, with the study, or 404 (not a rater there, or no such
    study). One statement (``sql.rater_with_study``): every annotator request starts here."""
    rater = sql.rater_with_study(user_id=user.pk, study_id=study_id)
    if rater is None:
        raise Http404("No such study for you.")
    return rater


def assignment_for(*, user, study_id: int, token: str) -> Assignment:
    """The user's own assignment on the item with this token in this study, with its rater,
    study and item, or 404 (not their item, not their study, no such thing). One statement,
    as ``rater_for``."""
    assignment = sql.assignment_with_item(user_id=user.pk, study_id=study_id, token=token)
    if assignment is None:
        raise Http404("No such item for you.")
    return assignment


# --- Annotator pages --------------------------------------------------------------------------


def _done(rater_ref) -> Subquery:
    return Subquery(
        Assignment.objects.filter(rater=rater_ref, state=AssignmentState.DONE)
        .values("rater")
        .annotate(n=Count("id"))
        .values("n"),
        output_field=IntegerField(),
    )


def _seconds(rater_ref) -> Subquery:
    return Subquery(
        Answer.objects.filter(assignment__rater=rater_ref, retracted_at__isnull=True)
        .values("assignment__rater")
        .annotate(s=Sum("time_on_item_s"))
        .values("s"),
        output_field=FloatField(),
    )


def _open_for_rater() -> Subquery:
    """For a Rater row: the items of its study still lacking answers that are its to answer —
    the one it holds, and those it has never held in the places its role takes (a split audit's
    third place is an adjudicator's), as ``sql.first_candidate`` hands them out. An estimate of
    what is left for them: others' running leases are not subtracted."""
    for_role = Q(needs_adjudication=False, annotates=True) | Q(
        needs_adjudication=True, adjudicates=True
    )
    return Subquery(
        StudyItem.objects.annotate(
            annotates=ExpressionWrapper(OuterRef("annotates"), output_field=BooleanField()),
            adjudicates=ExpressionWrapper(OuterRef("adjudicates"), output_field=BooleanField()),
        )
        .filter(for_role, study=OuterRef("study_id"), completed_answers__lt=F("required_answers"))
        .exclude(
            Exists(
                Assignment.objects.filter(
                    item=OuterRef("pk"), rater=OuterRef(OuterRef("pk"))
                ).exclude(state=AssignmentState.LEASED)
            )
        )
        .values("study")
        .annotate(n=Count("id"))
        .values("n"),
        output_field=IntegerField(),
    )


def home_studies(*, user) -> list[Rater]:
    """The user's studies, newest first, with their own progress (one query). Archived
    studies are left out: they are history, not work."""
    return list(
        Rater.objects.filter(user=user)
        .exclude(study__status=StudyStatus.ARCHIVED)
        .select_related("study")
        .annotate(
            done=Coalesce(_done(OuterRef("pk")), 0),
            seconds=Coalesce(_seconds(OuterRef("pk")), 0.0),
            left=Coalesce(_open_for_rater(), 0),
        )
        .order_by("-study__created_at")
    )


@dataclass(frozen=True)
class Progress:
    """A rater's progress in a study, as the workspace's "Item N of M" reads it.

    ``done``: their answered items (live answers). ``left``: the items still open to them — the
    one they hold, and those lacking answers that they have never held (nor skipped) in the
    places their role takes; others' running leases are not subtracted. ``holding``: they are
    on an item now. M (``total``) is ``done + left``: what this rater can be expected to do,
    an estimate that shrinks as others fill items (never below the item they are on). N
    (``number``), while they hold an item, is ``done + 1``: the held item is not done yet."""

    done: int
    left: int
    seconds: float
    holding: bool = False

    @property
    def number(self) -> int | None:
        return self.done + 1 if self.holding else None

    @property
    def total(self) -> int:
        return max(self.done + self.left, self.number or 0)


# The study's open items, as each web process last counted them: {(study id, whether
# annotators' items, adjudicators' items): (count, monotonic time it is good until)}. Counting
# them scans the study's items — ~0.9 ms of PostgreSQL's ~5 ms per answer on the annotation
# benchmark's 3,056-item study, growing with the study — so a count is reused for
# OPEN_ITEMS_REUSE_S. M in "Item N of M" then lags others' work by at most that long, as it
# lags whatever others do between two of the annotator's own requests; an item this process
# opens or closes drops the count at once (``open_items_forget``), so an annotator's own answer
# always shows in their next page. Whether anything is left
# at all (finished, "nothing free", a participant's completion) is never decided on a reused
# count: what is left is counted afresh whenever the reused count leaves at most
# OPEN_ITEMS_EXACT_BELOW — it would take that many items completed within OPEN_ITEMS_REUSE_S
# to bring a study from above it to nothing left.
OPEN_ITEMS_REUSE_S = 1.0
OPEN_ITEMS_EXACT_BELOW = 1000
_open_items: dict[tuple[int, bool, bool], tuple[int, float]] = {}


def rater_progress(*, rater: Rater, holding: bool = False) -> Progress:
    """Done, time spent and what is left: one statement (``sql.progress_counts``), on every
    workspace request; the study's open items in it are a count at most ``OPEN_ITEMS_REUSE_S``
    old while more than ``OPEN_ITEMS_EXACT_BELOW`` are left to the rater."""
    key = (rater.study_id, rater.annotates, rater.adjudicates)
    now = time.monotonic()
    reused = _open_items.get(key)
    # Only a count above the bound is reused, so a small study is always counted afresh (and
    # a request runs a second count only when the rater has held all but the bound of them).
    if reused is not None and reused[1] > now and reused[0] > OPEN_ITEMS_EXACT_BELOW:
        counts = sql.progress_counts(rater, open_items=reused[0])
        if counts.open_items - counts.held_before > OPEN_ITEMS_EXACT_BELOW:
            return _progress(counts, holding)
    counts = sql.progress_counts(rater)
    _open_items[key] = (counts.open_items, now + OPEN_ITEMS_REUSE_S)
    return _progress(counts, holding)


def open_items_forget(*, study_id: int) -> None:
    """Drop this process's reused counts of the study's open items (an item opened or closed
    here: the page this request renders counts them afresh)."""
    for key in [key for key in _open_items if key[0] == study_id]:
        _open_items.pop(key, None)


def _progress(counts: sql.ProgressCounts, holding: bool) -> Progress:
    return Progress(
        done=counts.done,
        left=counts.open_items - counts.held_before,
        seconds=counts.seconds,
        holding=holding,
    )


def last_answer(*, rater: Rater) -> Answer | None:
    return (
        Answer.objects.filter(assignment__rater=rater, retracted_at__isnull=True)
        .select_related("assignment__item")
        .order_by("-submitted_at", "-id")
        .first()
    )


def undone_answer(*, assignment: Assignment) -> Answer | None:
    """The assignment's latest undone answer, to refill the form with (only an assignment an
    undo reopened has one)."""
    if not assignment.reopened:
        return None
    return (
        Answer.objects.filter(assignment=assignment, retraction_reason=RetractionReason.UNDO)
        .order_by("-retracted_at", "-id")
        .first()
    )


@dataclass(frozen=True)
class ReplyContext:
    """What the workspace shows of a reply's place: its trigger, the conversation up to it,
    and the replies (by unit id) the item rates."""

    trigger: TriggerRow
    conversation: list[dict]
    replies: dict[int, str]


def reply_context(item: StudyItem, unit_ids: tuple[int, ...] = ()) -> ReplyContext:
    """The item's trigger, the conversation up to it (as the models saw it) and its replies —
    ``unit_ids``, or else the item's ``unit`` and ``unit_b``: one statement
    (``sql.trigger_conversation_replies``), read on every workspace request."""
    if item.trigger_id is None:
        raise ValueError(f"study item {item.pk} rates no reply")
    trigger, turns, replies, images = sql.trigger_conversation_replies(
        item.trigger_id, unit_ids or (item.unit_id, item.unit_b_id)
    )
    by_turn: dict[int, list[ImageRow]] = defaultdict(list)
    for image in images:
        by_turn[image.turn].append(image)
    # conversation_until gives one user message per turn up to the trigger's, in turn order.
    user_turns = iter([turn.index for turn in turns if turn.index <= trigger.turn.index])
    conversation = []
    for message in conversation_until(trigger, turns):
        shown: dict = {"role": message.role, "text": message.content}
        if message.role == "user" and (images_of_turn := by_turn.get(next(user_turns))):
            shown["images"] = images_of_turn
        conversation.append(shown)
    return ReplyContext(trigger, conversation, replies)


def visible_turn_image(*, user, sha256: str) -> TurnImage:
    """The turn image with this content that ``user`` may see, else 404 (whether it exists or
    not): staff see every one; anyone else one of a turn they were shown — any turn of the
    dialogue of an item without a trigger handed to them (an audit's), or a turn up to the
    trigger of one with (every other kind's conversation), answered or not, in any of their
    studies."""
    images = TurnImage.objects.filter(sha256=sha256)
    if not is_staff_like(user):
        theirs = Assignment.objects.filter(rater__user=user)
        images = images.filter(
            Exists(
                theirs.filter(
                    item__trigger__isnull=True, item__dialogue_id=OuterRef("turn__dialogue_id")
                )
            )
            | Exists(
                theirs.filter(
                    item__trigger__turn__dialogue_id=OuterRef("turn__dialogue_id"),
                    item__trigger__turn__index__gte=OuterRef("turn__index"),
                )
            )
        )
    image = images.order_by("pk").first()
    if image is None:
        raise Http404("no such image")
    return image


def rubric(trigger: TriggerRow) -> dict:
    """The trigger's rubric as the workspace shows it."""
    return {
        "type": TriggerType(trigger.type).label,
        "pass": trigger.pass_criteria,
        "partial": trigger.partial_criteria,
        "fail": trigger.fail_criteria,
    }


def known_facts(trigger: TriggerRow) -> list[str]:
    """The anchors the user has disclosed by the trigger's turn, in disclosure order."""
    return list(
        Anchor.objects.filter(
            dialogue_id=trigger.dialogue_id,
            disclosed_in__index__lte=trigger.turn.index,
        )
        .order_by("disclosed_in__index", "key")
        .values_list("text", flat=True)
    )


def item_view(*, assignment: Assignment, study: Study) -> dict:
    """What the workspace shows for this assignment (blinded; see the module docstring)."""
    return kinds.get(study.kind).item_view(assignment, study)


# --- Pairs for LLM pairwise judges ------------------------------------------------------------


class StudyPair(NamedTuple):
    unit_a: int
    unit_b: int
    run_a: int
    run_b: int


def study_unit_pairs(*, study_id: int) -> list[StudyPair]:
    """The (side A, side B) replies of a study's two-reply items (``StudyItem.unit`` and
    ``unit_b``) with the run of each, in the items' order: the pairs an LLM pairwise judge is
    given (``judge_pairs --pairs study=ID``) so that its verdicts and people's exist on the same
    pairs. ``Study.DoesNotExist`` for no such study. Two queries."""
    study = Study.objects.get(pk=study_id)
    return [
        StudyPair(*row)
        for row in study.items.filter(unit__isnull=False, unit_b__isnull=False)
        .order_by("position", "id")
        .values_list("unit_id", "unit_b_id", "unit__run_id", "unit_b__run_id")
    ]


# --- Staff pages ------------------------------------------------------------------------------


def study_list(*, archived: bool = False) -> list[Study]:
    """The studies in use, or (``archived``) the archived ones instead."""
    is_archived = Q(status=StudyStatus.ARCHIVED)
    studies = Study.objects.filter(is_archived) if archived else Study.objects.exclude(is_archived)
    return list(
        studies.select_related("created_by", "run")
        .annotate(
            n_items=Count("items", distinct=True),
            n_raters=Count("raters", distinct=True),
        )
        .order_by("-created_at")
    )


def _flags(figures) -> list[str]:
    flags = []
    if figures.median_seconds is not None and figures.median_seconds < FAST_MEDIAN_S:
        flags.append(f"median under {FAST_MEDIAN_S} s")
    if figures.answers >= FLAG_MIN_ANSWERS and (figures.top_label_share or 0) >= ONE_SIDED_SHARE:
        flags.append(f"{figures.top_label_share:.0%} one label")
    side = figures.first_position_share
    lopsided = side is not None and max(side, 1 - side) >= ONE_SIDED_SHARE
    if figures.answers >= FLAG_MIN_ANSWERS and lopsided:
        flags.append(f"{max(side, 1 - side):.0%} one side")
    return flags


def study_overview(*, study: Study) -> dict:
    """Progress per rater, gold accuracy, agreement so far and the rater-quality panel."""
    raters = list(
        study.raters.select_related("user")
        .annotate(
            done=Coalesce(_done(OuterRef("pk")), 0),
            holding=Count(
                "assignments",
                filter=Q(assignments__state=AssignmentState.LEASED),
                distinct=True,
            ),
        )
        .order_by("id")
    )
    votes = [
        Vote(item=item, rater=rater, label=label, seconds=seconds, position=str(choice or ""))
        for item, rater, label, seconds, choice in Answer.objects.counted()
        .filter(assignment__item__study=study)
        .values_list(
            "assignment__item_id",
            "assignment__rater_id",
            "label",
            "time_on_item_s",
            "details__choice",
        )
    ]
    expected = dict(study.items.filter(is_gold=True).values_list("pk", "expected"))
    excluded = {r.pk for r in raters if r.excluded}
    counted = [v for v in votes if v.rater not in excluded]
    agreement, agreement_items = percent_agreement(counted)
    accuracy, gold_answers = gold_accuracy(counted, expected)
    figures = rater_figures(votes, expected)
    items: dict = {"total": 0, "complete": 0, "gold": 0, "outcomes": Counter()}
    for outcome, is_gold, complete, n in (
        study.items.annotate(
            complete=ExpressionWrapper(
                Q(completed_answers__gte=F("required_answers")), output_field=BooleanField()
            )
        )
        .values_list("outcome", "is_gold", "complete")
        .annotate(n=Count("id"))
        .order_by()
    ):
        items["total"] += n
        items["complete"] += n if complete else 0
        items["gold"] += n if is_gold else 0
        if outcome:
            items["outcomes"][outcome] += n
    rows = []
    for rater in raters:
        fig = figures.get(rater.pk)
        rows.append({"rater": rater, "figures": fig, "flags": _flags(fig) if fig else []})
    return {
        "raters": rows,
        "items": items,
        "answers": len(counted),
        "answers_all": len(votes),
        "agreement": agreement,
        "agreement_items": agreement_items,
        "gold_accuracy": accuracy,
        "gold_answers": gold_answers,
        "summary": kinds.get(study.kind).summary(items, counted),
        "exclusions": list(
            RaterExclusion.objects.filter(rater__study=study)
            .select_related("rater__user", "by")
            .order_by("-at", "-id")[:20]
        ),
    }


# --- Battles ----------------------------------------------------------------------------------

BATTLE_CHUNK = 2000


@dataclass(frozen=True)
class Battle:
    """One live answer of a study whose answers are battles (``StudyKind.battles``: the arena,
    and the pairwise kind's vanilla against rubric-injected), read the one way the battles
    export and the ranking tables both read it.

    ``winner`` is a ``BattleWinner`` value for ``source_a`` against ``source_b`` (the item's
    sides A and B). ``shown_swapped``: the rater saw source B first (as Response 1, or as an
    imported battle's ``model_a``). ``tstamp``: when the battle was judged, in Unix seconds —
    an imported battle's own ``tstamp`` as given (None if it had none), else the answer's
    submission time."""

    item_id: int
    item_key: str
    question_id: str | int | None
    turn: int | None
    rater_id: int
    judge: str  # the rater's username, or an imported rater's external id
    source_a: str
    source_b: str
    winner: str
    shown_swapped: bool
    tstamp: float | None


def _battle_answers(*, study: Study, include_excluded: bool) -> tuple[StudyKind, QuerySet[Answer]]:
    """The study's kind and the answers that are its battles: live ones, of raters it does not
    exclude unless ``include_excluded``. ``ValueError`` for a kind whose answers are no
    battles."""
    kind = kinds.get(study.kind)
    if not kind.battles:
        raise ValueError(
            f"study {study.pk} is a {kind.label.lower()} study: its answers are no battles"
        )
    answers = Answer.objects.counted().filter(assignment__item__study=study)
    if not include_excluded:
        answers = answers.filter(assignment__rater__excluded=False)
    return kind, answers


def study_battles(*, study: Study, include_excluded: bool = False) -> Iterator[Battle]:
    """The live answers of ``study`` as battles, in answer order, streamed (read in chunks of
    ``BATTLE_CHUNK`` rows: a server-side cursor on PostgreSQL), so memory does not grow with
    the study. Raters the study excludes are left out unless ``include_excluded``. Raises
    ``ValueError`` for a study whose kind's answers are not battles."""
    kind, answers = _battle_answers(study=study, include_excluded=include_excluded)
    rows = answers.order_by("id").values_list(
        "assignment__item_id",
        "assignment__item__key",
        "assignment__item__payload__sources__A",
        "assignment__item__payload__sources__B",
        "assignment__item__payload__question_id",
        "assignment__item__payload__turn",
        "assignment__item__unit__endpoint__name",
        "assignment__item__payload__evaluated_model",
        "assignment__item__dialogue__unique_id_eval",
        "assignment__item__trigger__turn__index",
        "assignment__item__payload__recovery_turn",
        "assignment__rater_id",
        "assignment__rater__user__username",
        "assignment__rater__external_id",
        "label",
        "display__order",
        "details",
        "submitted_at",
    )
    for row in rows.iterator(chunk_size=BATTLE_CHUNK):
        item_id, key, source_a, source_b, question_id, turn, endpoint, release_model = row[:8]
        dialogue, trigger_turn, release_turn = row[8:11]
        rater_id, username, external_id, label, order, details, submitted_at = row[11:]
        sides = kind.battle_sides(
            BattleItem(
                key=key,
                source_a=source_a,
                source_b=source_b,
                question_id=question_id,
                turn=turn,
                model=endpoint or release_model,
                dialogue=dialogue,
                trigger_turn=trigger_turn,
                release_turn=release_turn,
            )
        )
        details = details or {}
        yield Battle(
            item_id=item_id,
            item_key=key,
            question_id=sides.question_id,
            turn=sides.turn,
            rater_id=rater_id,
            judge=username or external_id,
            source_a=sides.source_a,
            source_b=sides.source_b,
            winner=kind.battle_winner(label),
            shown_swapped=bool(order) and order[0] == "B",
            tstamp=details["tstamp"] if "tstamp" in details else submitted_at.timestamp(),
        )


@dataclass(frozen=True)
class BattleCount:
    """How many of a study's battles (``study_battles``) had this winner between these two
    sources, on its gold items or on the others."""

    source_a: str
    source_b: str
    winner: str  # a BattleWinner value, for source_a against source_b
    gold: bool
    count: int


def study_battle_counts(*, study: Study, include_excluded: bool = False) -> list[BattleCount]:
    """``study_battles``' battles counted per (source A, source B, winner, gold item or not),
    by the database: one query whose rows are the distinct (sides, reply model, label, gold)
    of the answers — a few per pair of sources, however many answers — so that a ranking never
    reads the answers one by one. Sorted.

    A kind names a battle's sources from the item's ``sources`` and reply model only
    (``StudyKind.battle_sides``; the other fields of ``BattleItem`` say where they met, and
    are None here): the same sources ``study_battles`` gives, which the tests check."""
    kind, answers = _battle_answers(study=study, include_excluded=include_excluded)
    rows = (
        answers.values_list(
            "assignment__item__payload__sources__A",
            "assignment__item__payload__sources__B",
            "assignment__item__unit__endpoint__name",
            "assignment__item__payload__evaluated_model",
            "label",
            "assignment__item__is_gold",
        )
        .annotate(count=Count("id"))
        .order_by()
    )
    counts: Counter[tuple[str, str, str, bool]] = Counter()
    for source_a, source_b, endpoint, release_model, label, gold, count in rows:
        sides = kind.battle_sides(
            BattleItem(
                key="",
                source_a=source_a,
                source_b=source_b,
                question_id=None,
                turn=None,
                model=endpoint or release_model,
                dialogue=None,
                trigger_turn=None,
                release_turn=None,
            )
        )
        counts[(sides.source_a, sides.source_b, kind.battle_winner(label), gold)] += count
    return [BattleCount(*key, count) for key, count in sorted(counts.items())]
