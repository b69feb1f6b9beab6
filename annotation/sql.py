"""The annotation hot path's statements that the ORM cannot say, or not in one round trip, or
that every annotator request runs and the ORM took measurably longer to compose than the
database to run (the annotation load benchmark, bench/README.md: with these reads back on the
ORM, web CPU per request rose from ~10 to ~16 ms and p95 from ~45 to ~80 ms at 50 annotators).
Everything else reads and writes through the ORM.

- ``rater_with_study``, ``assignment_with_item``: the access reads every request starts with.
- ``leased``, ``places_taken``, ``progress_counts``: the rater's leases, an item's places, the
  rater's progress ("Item N of M") — read on every Next and answer.
- ``rater_lock``: the rater's row lock with the study's status read afresh, and (PostgreSQL)
  ``set_config`` of the transaction's commit mode in the same statement.
- ``first_candidate``: the next item to hand out, locked ``FOR UPDATE … SKIP LOCKED``.
- ``answer_target``: the answered item, locked, with the rater's assignment on it, any
  answer already stored under the form's idempotency key (an uncorrelated LEFT JOIN), and
  whether the rater holds another lease.
- ``trigger_conversation_replies``: a trigger, the conversation up to it with its turn images,
  and the item's replies (a UNION ALL of three differently shaped reads).

Each returns typed values (model instances exactly as the ORM builds them, through
``core.rows``, or the dataclasses below); tests/annotation/test_sql.py checks each against the
equivalent ORM reads. Only table names and fixed fragments are formatted into a statement;
every value is a parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from django.db import connection

from annotation.models import Answer, Assignment, AssignmentState, Rater, Study, StudyItem
from benchmark.models import EvaluationUnit, Trigger, Turn, TurnImage
from core import prepared
from core.rows import columns, fetch_rows, first, load, width


def rater_with_study(*, user_id: int, study_id: int) -> Rater | None:
    """The user's rater in the study, with the study loaded (``rater.study``), or None."""
    rows = fetch_rows(
        f"SELECT {columns(Rater, 'r')}, {columns(Study, 's')}"  # noqa: S608
        f" FROM {Rater._meta.db_table} r JOIN {Study._meta.db_table} s ON s.id = r.study_id"
        " WHERE r.study_id = %s AND r.user_id = %s",
        [study_id, user_id],
    )
    if not rows:
        return None
    rater = load(Rater, rows[0])
    rater.study = load(Study, rows[0], width(Rater))
    return rater


def assignment_with_item(*, user_id: int, study_id: int, token: str) -> Assignment | None:
    """The user's assignment on the item with ``token`` in the study, with its rater, the
    rater's study and the item loaded, or None."""
    rows = fetch_rows(
        f"SELECT {columns(Assignment, 'a')}, {columns(Rater, 'r')}, {columns(Study, 's')},"  # noqa: S608
        f" {columns(StudyItem, 'i')}"
        f" FROM {Assignment._meta.db_table} a"
        f" JOIN {Rater._meta.db_table} r ON r.id = a.rater_id"
        f" JOIN {Study._meta.db_table} s ON s.id = r.study_id"
        f" JOIN {StudyItem._meta.db_table} i ON i.id = a.item_id"
        " WHERE r.study_id = %s AND r.user_id = %s AND i.token = %s",
        [study_id, user_id, token],
    )
    if not rows:
        return None
    row, start = rows[0], width(Assignment)
    assignment = load(Assignment, row)
    assignment.rater = load(Rater, row, start)
    assignment.rater.study = load(Study, row, start + width(Rater))
    assignment.item = load(StudyItem, row, start + width(Rater) + width(Study))
    return assignment


def leased(rater_id: int, *, latest_only: bool = False) -> list[Assignment]:
    """The rater's leased assignments, latest first, each with its item loaded."""
    rows = fetch_rows(
        f"SELECT {columns(Assignment, 'a')}, {columns(StudyItem, 'i')}"  # noqa: S608
        f" FROM {Assignment._meta.db_table} a"
        f" JOIN {StudyItem._meta.db_table} i ON i.id = a.item_id"
        " WHERE a.rater_id = %s AND a.state = %s"
        f" ORDER BY a.leased_at DESC, a.id DESC{' LIMIT 1' if latest_only else ''}",
        [rater_id, AssignmentState.LEASED],
    )
    held = []
    for row in rows:
        assignment = load(Assignment, row)
        assignment.item = load(StudyItem, row, width(Assignment))
        held.append(assignment)
    return held


def places_taken(item_id: int, now: datetime, *, excluding: int | None = None) -> int:
    """Places taken on the item — done assignments and running leases — ``excluding`` one."""
    with connection.cursor() as cursor:
        prepared.execute(
            cursor,
            f"SELECT COUNT(*) FROM {Assignment._meta.db_table}"  # noqa: S608
            " WHERE item_id = %s AND id <> %s"
            " AND (state = %s OR (state = %s AND lease_expires_at > %s))",
            [
                item_id,
                -1 if excluding is None else excluding,
                AssignmentState.DONE,
                AssignmentState.LEASED,
                connection.ops.adapt_datetimefield_value(now),
            ],
        )
        return cursor.fetchone()[0]


class ProgressCounts(NamedTuple):
    """``progress_counts``: the rater's done assignments, the seconds their live answers took,
    the open items of the rater's role in the study, and how many of those the rater has held
    and no longer holds. What is left to the rater is ``open_items - held_before``."""

    done: int
    seconds: float
    open_items: int
    held_before: int


def progress_counts(rater: Rater, *, open_items: int | None = None) -> ProgressCounts:
    """How many of the rater's assignments are done, the seconds their live answers took, the
    open items of the rater's role (lacking answers, in the places their role takes), and how
    many of those the rater has held and no longer holds (``selectors.Progress.left`` is the
    difference). With ``open_items`` (a count the caller read recently), the study's open items
    are not counted again: it is returned as given.

    Done and seconds are read from the rater's done assignments outwards (their index) whatever
    the planner's statistics say about the answers table: each one's seconds a subquery, which
    PostgreSQL runs per row through the answer's index (as a join, the planner hash-joined the
    whole answers table once its statistics were fresh). The open items are counted over the
    study's items (nothing joined), the held ones from the rater's own assignments outwards:
    the same number as one NOT EXISTS per open item, which cost ~2.7 ms more database CPU per
    request than without the count on the annotation benchmark's 3,056-item study; this way
    ~1 ms (bench/README.md). An item has at most one assignment per rater. The held ones' items
    are named by study although a rater's items are all in its study: so the planner can
    take the study's open items from their partial index (``item_open_in_order``) instead of
    reading every study's items.

    Done, seconds and the held ones are read from the rater's whole history, so the cost
    grows with it. On PostgreSQL the indexes carry what is read (``assignment_by_rater``, the
    live-answer constraint with its seconds, ``item_open_in_order`` with the ids:
    annotation/models.py); the answers are read from the index alone, while the assignments'
    heap pages are still fetched, as annotating keeps clearing their visibility map
    (``bench/annotation_inproc.py --history``; bench/README.md, stop 33)."""
    role = "AND 1 = 0"
    if rater.annotates and rater.adjudicates:
        role = ""
    elif rater.annotates:
        role = "AND NOT i.needs_adjudication"
    elif rater.adjudicates:
        role = "AND i.needs_adjudication"
    count_open = (
        f"(SELECT COUNT(*) FROM {StudyItem._meta.db_table} i"  # noqa: S608
        f" WHERE i.study_id = %s AND i.completed_answers < i.required_answers {role})"
    )
    params: list = [rater.study_id]
    if open_items is not None:
        # Cast: a bare parameter in the select list has no type a prepared statement could
        # give it (core.prepared).
        count_open, params = "CAST(%s AS integer)", [open_items]
    with connection.cursor() as cursor:
        prepared.execute(
            cursor,
            # An assignment has at most one live answer (one_live_answer_per_assignment): its
            # seconds are looked up per done assignment, by the answer's index, so that the
            # planner never prefers reading the whole answers table to hash-join it.
            f"SELECT COUNT(*), SUM((SELECT an.time_on_item_s FROM {Answer._meta.db_table} an"  # noqa: S608
            "  WHERE an.assignment_id = a.id AND an.retracted_at IS NULL)),"
            f" {count_open},"
            f" (SELECT COUNT(*) FROM {Assignment._meta.db_table} m"
            f"  JOIN {StudyItem._meta.db_table} i ON i.id = m.item_id"
            "   WHERE m.rater_id = %s AND m.state <> %s"
            f"  AND i.study_id = %s AND i.completed_answers < i.required_answers {role})"
            f" FROM {Assignment._meta.db_table} a"
            " WHERE a.rater_id = %s AND a.state = %s",
            [
                *params,
                rater.pk,
                AssignmentState.LEASED,
                rater.study_id,
                rater.pk,
                AssignmentState.DONE,
            ],
        )
        done, seconds, open_count, held_before = cursor.fetchone()
    return ProgressCounts(done, seconds or 0.0, open_count, held_before)


def rater_lock(rater: Rater, *, relaxed_commit: bool = False) -> Rater:
    """Take the rater's row lock (never the study's: every rater of a study shares it) and
    read the study's status afresh under it into ``rater.study.status``.

    ``relaxed_commit`` (PostgreSQL): the transaction's commit will not wait for its WAL to
    reach the disk — for soft state only (a lease), set in the same statement to save a
    round trip."""
    lock = relax = ""
    if connection.features.has_select_for_update:
        lock = " FOR UPDATE OF r"
    if relaxed_commit and connection.vendor == "postgresql":
        relax = ", set_config('synchronous_commit', 'off', true)"
    with connection.cursor() as cursor:
        prepared.execute(
            cursor,
            f"SELECT s.status{relax} FROM {Rater._meta.db_table} r"  # noqa: S608
            f" JOIN {Study._meta.db_table} s ON s.id = r.study_id WHERE r.id = %s{lock}",
            [rater.pk],
            generic_plan=True,  # two rows by their keys, in tables annotating does not grow
        )
        rater.study.status = cursor.fetchone()[0]
    return rater


def first_candidate(
    rater: Rater, now: datetime, *, skipped: list[int], wait: bool
) -> StudyItem | None:
    """The first item in hand-out order (a split audit's third place first) that this rater
    may take — open, never held by them, answers plus running leases below k — with its row
    locked: on PostgreSQL ``SKIP LOCKED`` unless ``wait``; SQLite's IMMEDIATE transaction
    already holds the database."""
    role = ""
    if not rater.adjudicates:
        role = "AND NOT i.needs_adjudication"
    elif not rater.annotates:
        role = "AND i.needs_adjudication"
    skip = f"AND i.id NOT IN ({', '.join(['%s'] * len(skipped))})" if skipped else ""
    lock = ""
    if connection.features.has_select_for_update:
        lock = "FOR UPDATE OF i" + ("" if wait else " SKIP LOCKED")
    sql = f"""
        SELECT {columns(StudyItem, "i")} FROM {StudyItem._meta.db_table} i
        WHERE i.study_id = %s AND i.completed_answers < i.required_answers {role} {skip}
          AND NOT EXISTS (
            SELECT 1 FROM {Assignment._meta.db_table} mine
            WHERE mine.item_id = i.id AND mine.rater_id = %s)
          AND (SELECT COUNT(*) FROM {Assignment._meta.db_table} a
               WHERE a.item_id = i.id
                 AND (a.state = %s OR (a.state = %s AND a.lease_expires_at > %s))
              ) < i.required_answers
        ORDER BY i.needs_adjudication DESC, i.position
        LIMIT 1 {lock}"""  # noqa: S608
    params = [
        rater.study_id,
        *skipped,
        rater.pk,
        AssignmentState.DONE,
        AssignmentState.LEASED,
        connection.ops.adapt_datetimefield_value(now),
    ]
    return first(StudyItem, sql, params)


@dataclass(frozen=True)
class AnswerTarget:
    """The rater's assignment on the answered item (``assignment.item`` loaded, its row
    locked), the answer already stored under the form's idempotency key, if any, and whether
    the rater holds a lease on another item (the answer's own hand-out is then not the common
    case: services/assignments.py)."""

    assignment: Assignment
    replay_answer_id: int | None
    replay_rater_id: int | None
    holds_another_lease: bool


def answer_target(*, rater_id: int, item_token: str, idempotency_key: str) -> AnswerTarget | None:
    """One statement: the rater's own assignment on the item with ``item_token`` (None: not
    theirs), the item, whose row it locks, any answer stored under ``idempotency_key``, and
    whether the rater holds another item's lease. A row locked by SELECT … FOR UPDATE is
    returned as it is once the lock is taken (PostgreSQL re-reads it if it waited), so the item
    read here is current; the rater's leases are, for a caller holding the rater's lock (their
    assignments change only under it)."""
    lock = "FOR UPDATE OF i" if connection.features.has_select_for_update else ""
    rows = fetch_rows(
        f"SELECT {columns(Assignment, 'a')}, {columns(StudyItem, 'i')},"  # noqa: S608
        " p.id, p.rater_id,"
        f" EXISTS (SELECT 1 FROM {Assignment._meta.db_table} o"
        "   WHERE o.rater_id = a.rater_id AND o.state = %s AND o.id <> a.id)"
        f" FROM {Assignment._meta.db_table} a"
        f" JOIN {StudyItem._meta.db_table} i ON i.id = a.item_id"
        " LEFT JOIN ("
        f"   SELECT an.id, pa.rater_id FROM {Answer._meta.db_table} an"
        f"   JOIN {Assignment._meta.db_table} pa ON pa.id = an.assignment_id"
        "    WHERE an.idempotency_key = %s"
        " ) p ON 1 = 1"
        f" WHERE i.token = %s AND a.rater_id = %s {lock}",
        [AssignmentState.LEASED, idempotency_key, item_token, rater_id],
    )
    if not rows:
        return None
    row = rows[0]
    assignment = load(Assignment, row)
    assignment.item = load(StudyItem, row, width(Assignment))
    replay_answer_id, replay_rater_id, other_lease = row[width(Assignment) + width(StudyItem) :]
    return AnswerTarget(assignment, replay_answer_id, replay_rater_id, bool(other_lease))


@dataclass(frozen=True)
class TurnRow:
    index: int
    user_message: str
    assistant_response: str


@dataclass(frozen=True)
class TriggerTurn:
    index: int


@dataclass(frozen=True)
class TriggerRow:
    """A trigger's rubric and where it is (the shape ``conversation_until`` reads of a
    trigger: ``.turn.index``)."""

    type: str
    pass_criteria: str
    partial_criteria: str
    fail_criteria: str
    dialogue_id: int
    turn: TriggerTurn


@dataclass(frozen=True)
class ImageRow:
    """A turn image as the conversation shows it: which turn, its place, its content's hash
    (the image URL's key) and its alt text."""

    turn: int
    position: int
    sha256: str
    alt: str


def trigger_conversation_replies(
    trigger_id: int, unit_ids: tuple[int | None, ...]
) -> tuple[TriggerRow, list[TurnRow], dict[int, str], list[ImageRow]]:
    """The trigger, the dialogue's turns up to and including its turn (in order), the
    replies of ``unit_ids`` (one or more; None matches nothing) by unit id, and those turns'
    images (by turn, then place), in one statement: a UNION ALL of the turns (part 0; the
    trigger's columns repeat on each turn's row), the replies (part 1: unit id and reply in the
    turn columns) and the images (part 2: hash and alt text in two rubric columns, turn and
    place in the two index columns)."""
    if not unit_ids:
        raise ValueError("trigger_conversation_replies needs at least one unit id")
    index = connection.ops.quote_name("index")
    placeholders = ", ".join(["%s"] * len(unit_ids))
    with connection.cursor() as cursor:
        prepared.execute(
            cursor,
            "SELECT 0 AS part, t.type, t.pass_criteria, t.partial_criteria,"  # noqa: S608
            f" t.fail_criteria, tu.dialogue_id, tu.{index}, c.{index} AS pos, c.user_message,"
            " c.assistant_response"
            f" FROM {Trigger._meta.db_table} t"
            f" JOIN {Turn._meta.db_table} tu ON tu.id = t.turn_id"
            f" JOIN {Turn._meta.db_table} c"
            f"   ON c.dialogue_id = tu.dialogue_id AND c.{index} <= tu.{index}"
            " WHERE t.id = %s"
            " UNION ALL"
            " SELECT 1, NULL, NULL, NULL, NULL, NULL, NULL, u.id, u.reply, NULL"
            f" FROM {EvaluationUnit._meta.db_table} u WHERE u.id IN ({placeholders})"
            " UNION ALL"
            f" SELECT 2, NULL, i.sha256, i.alt, NULL, NULL, c.{index}, i.position, NULL, NULL"
            f" FROM {Trigger._meta.db_table} t"
            f" JOIN {Turn._meta.db_table} tu ON tu.id = t.turn_id"
            f" JOIN {Turn._meta.db_table} c"
            f"   ON c.dialogue_id = tu.dialogue_id AND c.{index} <= tu.{index}"
            f" JOIN {TurnImage._meta.db_table} i ON i.turn_id = c.id"
            " WHERE t.id = %s"
            " ORDER BY part, pos",
            [trigger_id, *unit_ids, trigger_id],
            # The corpus does not grow while a study is annotated, and planning this cost six
            # times running it (core.prepared).
            generic_plan=True,
        )
        rows = cursor.fetchall()
    turns = [row for row in rows if row[0] == 0]
    replies = {row[7]: row[8] for row in rows if row[0] == 1}
    images = sorted(
        (ImageRow(row[6], row[7], row[2], row[3]) for row in rows if row[0] == 2),
        key=lambda image: (image.turn, image.position),
    )
    kind, pass_criteria, partial_criteria, fail_criteria, dialogue_id, turn_index = turns[0][1:7]
    trigger = TriggerRow(
        kind, pass_criteria, partial_criteria, fail_criteria, dialogue_id, TriggerTurn(turn_index)
    )
    return trigger, [TurnRow(*row[7:]) for row in turns], replies, images
