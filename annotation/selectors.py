"""Read-side queries for the annotation pages, each in a fixed number of queries.

The two access helpers (``rater_for``, ``assignment_for``) are where permissions and blinding
are enforced: an annotator reaches a study only as one of its raters, and an item only through
an assignment of their own (anything else is a 404). ``item_view`` builds what the workspace
shows, and is the one place that turns sides and judges into "Response 1/2" and "Judge A/B":
nothing it returns names a model, a judge, a condition or a unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from django.db import connection
from django.db.models import Count, Exists, F, FloatField, IntegerField, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce
from django.http import Http404

from annotation.highlight import highlight
from annotation.kinds import (
    AUDIT_CHECKS,
    FAILURE_MODE_DEFINITIONS,
    FAILURE_MODE_KEYS,
    FailureMode,
    StudyKind,
)
from annotation.metrics import Vote, gold_accuracy, percent_agreement, rater_figures
from annotation.models import (
    Answer,
    Assignment,
    AssignmentRole,
    AssignmentState,
    Rater,
    RaterExclusion,
    RetractionReason,
    Study,
    StudyItem,
    StudyStatus,
)
from benchmark.evaluation.requests import conversation_until
from benchmark.models import (
    Anchor,
    EvaluationUnit,
    Judgment,
    JudgmentState,
    Trigger,
    TriggerType,
    Turn,
)
from benchmark.selectors import dialogue_for_reading
from core.rows import columns, fetch_rows, first, load_each

JUDGE_LETTERS = "ABCDEFGH"
# Rater-quality flags (docs/annotation.md): fast clicking, one label, one side.
FAST_MEDIAN_S = 30
ONE_SIDED_SHARE = 0.8
FLAG_MIN_ANSWERS = 10


# --- Access -----------------------------------------------------------------------------------


def rater_for(*, user, study_id: int) -> Rater:
    """The user's place in the study, with the study, or 404 (not a rater there, or no such
    study). Plain SQL: every annotator request starts here (see core/rows.py)."""
    rows = fetch_rows(
        f"SELECT {columns(Rater, 'r')}, {columns(Study, 's')}"  # noqa: S608
        f" FROM {Rater._meta.db_table} r JOIN {Study._meta.db_table} s ON s.id = r.study_id"
        " WHERE r.study_id = %s AND r.user_id = %s",
        [study_id, user.pk],
    )
    if not rows:
        raise Http404("No such study for you.")
    rater, rater.study = load_each(rows[0], Rater, Study)
    return rater


def assignment_for(*, user, study_id: int, token: str) -> Assignment:
    """The user's own assignment on the item with this token in this study, with its rater,
    study and item, or 404 (not their item, not their study, no such thing). Plain SQL, as
    ``rater_for``."""
    rows = fetch_rows(
        f"SELECT {columns(Assignment, 'a')}, {columns(Rater, 'r')}, {columns(Study, 's')},"  # noqa: S608
        f" {columns(StudyItem, 'i')}"
        f" FROM {Assignment._meta.db_table} a"
        f" JOIN {Rater._meta.db_table} r ON r.id = a.rater_id"
        f" JOIN {Study._meta.db_table} s ON s.id = r.study_id"
        f" JOIN {StudyItem._meta.db_table} i ON i.id = a.item_id"
        " WHERE r.study_id = %s AND r.user_id = %s AND i.token = %s",
        [study_id, user.pk, token],
    )
    if not rows:
        raise Http404("No such item for you.")
    assignment, rater, study, item = load_each(rows[0], Assignment, Rater, Study, StudyItem)
    assignment.rater, rater.study, assignment.item = rater, study, item
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
    """For a Rater row: items of its study it has not held that still lack answers (an
    estimate of what is left for them: others' running leases are not subtracted)."""
    return Subquery(
        StudyItem.objects.filter(
            study=OuterRef("study_id"), completed_answers__lt=F("required_answers")
        )
        .exclude(
            Exists(Assignment.objects.filter(item=OuterRef("pk"), rater=OuterRef(OuterRef("pk"))))
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
    done: int
    left: int | None
    seconds: float


def rater_progress(*, rater: Rater, with_left: bool = True) -> Progress:
    """Done, time spent and (``with_left``) what is left: the one figure that counts the
    study's open items, so the workspace asks for it only between items. Done and time are
    read from the rater's done assignments outwards (their index), whatever the planner's
    statistics say about the answers table; as plain SQL, since every workspace request asks
    (the ORM's aggregate cost more to compose than to run)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COUNT(*), SUM(an.time_on_item_s) FROM {Assignment._meta.db_table} a"  # noqa: S608
            f" LEFT JOIN {Answer._meta.db_table} an"
            "  ON an.assignment_id = a.id AND an.retracted_at IS NULL"
            " WHERE a.rater_id = %s AND a.state = %s",
            [rater.pk, AssignmentState.DONE],
        )
        done, seconds = cursor.fetchone()
    left = None
    if with_left:
        left = (
            Rater.objects.filter(pk=rater.pk)
            .annotate(left=Coalesce(_open_for_rater(), 0))
            .values_list("left", flat=True)
            .get()
        )
    return Progress(done=done, left=left, seconds=seconds or 0.0)


def last_answer(*, rater: Rater) -> Answer | None:
    return (
        Answer.objects.filter(assignment__rater=rater, retracted_at__isnull=True)
        .select_related("assignment__item")
        .order_by("-submitted_at", "-id")
        .first()
    )


def undone_answer(*, assignment: Assignment) -> Answer | None:
    """The assignment's latest undone answer, to refill the form with."""
    if getattr(assignment, "fresh", False):
        return None
    return first(
        Answer,
        f"SELECT {columns(Answer, 'an')} FROM {Answer._meta.db_table} an"  # noqa: S608
        " WHERE an.assignment_id = %s"
        " AND an.retraction_reason = %s ORDER BY retracted_at DESC, id DESC LIMIT 1",
        [assignment.pk, RetractionReason.UNDO],
    )


def judge_verdict_reveal(*, study: Study, answer: Answer) -> dict | None:
    """Direct rating, after submission only: the run's primary judge on the answered reply."""
    item = answer.assignment.item
    judgment = (
        Judgment.objects.filter(
            unit_id=item.unit_id, judge_id=study.run.primary_judge_id, state=JudgmentState.DONE
        ).first()
        if study.run_id and item.unit_id
        else None
    )
    verdict = judgment.verdict if judgment else item.payload.get("judge_score", "").upper()
    if not verdict:
        return None
    return {
        "yours": answer.label,
        "judge": verdict,
        "rationale": judgment.rationale if judgment else item.payload.get("judge_rationale", ""),
        "agree": verdict == answer.label,
    }


@dataclass(frozen=True)
class _TriggerRow:
    """What the workspace reads of a trigger and its turn (the shape ``conversation_until``
    expects of a trigger: ``.turn.index``)."""

    type: str
    pass_criteria: str
    partial_criteria: str
    fail_criteria: str
    dialogue_id: int
    turn: SimpleNamespace


@dataclass(frozen=True)
class _TurnRow:
    index: int
    user_message: str
    assistant_response: str


def _trigger_conversation_replies(
    trigger_id: int, unit_ids: tuple[int | None, int | None]
) -> tuple[_TriggerRow, list[dict], dict[int, str]]:
    """The trigger (rubric, where it is), the conversation up to it, and the replies of the
    item's units, in one statement: a UNION ALL of the turns (part 0; the trigger's columns
    repeat on each turn's row) and the replies (part 1: unit id and reply in the turn columns).
    Plain SQL: the workspace reads it on every request, and the ORM's composition cost more
    than the database's work (bench/README.md)."""
    index = connection.ops.quote_name("index")
    with connection.cursor() as cursor:
        cursor.execute(
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
            f" FROM {EvaluationUnit._meta.db_table} u WHERE u.id IN (%s, %s)"
            " ORDER BY part, pos",
            [trigger_id, *unit_ids],
        )
        rows = cursor.fetchall()
    turns = [row for row in rows if row[0] == 0]
    replies = {row[7]: row[8] for row in rows if row[0] == 1}
    *fields, dialogue_id, turn_index = turns[0][1:7]
    trigger = _TriggerRow(*fields, dialogue_id, SimpleNamespace(index=turn_index))
    messages = conversation_until(trigger, [_TurnRow(*row[7:]) for row in turns])
    return trigger, [{"role": m.role, "text": m.content} for m in messages], replies


def _rubric(trigger: _TriggerRow) -> dict:
    return {
        "type": TriggerType(trigger.type).label,
        "pass": trigger.pass_criteria,
        "partial": trigger.partial_criteria,
        "fail": trigger.fail_criteria,
    }


def item_view(*, assignment: Assignment, study: Study) -> dict:
    """What the workspace shows for this assignment (blinded; see the module docstring)."""
    item = assignment.item
    kind = study.kind
    if kind == StudyKind.DIALOGUE_AUDIT:
        return _audit_view(assignment)
    trigger, conversation, replies = _trigger_conversation_replies(
        item.trigger_id, (item.unit_id, item.unit_b_id)
    )
    reply = replies.get(item.unit_id, "")
    view = {"conversation": conversation}
    if kind == StudyKind.PAIRWISE:
        replies = {"A": reply, "B": replies.get(item.unit_b_id, "")}
        view["responses"] = [
            {"number": n, "text": replies[case]}
            for n, case in enumerate(assignment.display["order"], start=1)
        ]
    elif kind == StudyKind.DIRECT_RATING:
        view["reply"] = reply
        view["rubric"] = _rubric(trigger)
        view["known"] = list(
            Anchor.objects.filter(
                dialogue_id=trigger.dialogue_id,
                disclosed_in__index__lte=trigger.turn.index,
            )
            .order_by("disclosed_in__index", "key")
            .values_list("text", flat=True)
        )
    elif kind == StudyKind.ADJUDICATION:
        view["rubric"] = _rubric(trigger)
        by_judge = {
            j.judge_name: j
            for j in Judgment.objects.filter(unit_id=item.unit_id, state=JudgmentState.DONE)
        }
        judges = []
        for letter, name in zip(JUDGE_LETTERS, assignment.display.get("order", []), strict=False):
            judgment = by_judge.get(name)
            if judgment is None:
                continue
            judges.append(
                {
                    "letter": letter,
                    "css": f"judge-{letter.lower()}",
                    "verdict": judgment.get_verdict_display(),
                    "rationale": judgment.rationale,
                    "evidence": judgment.evidence,
                }
            )
        view["judges"] = judges
        view["reply_html"] = highlight(
            reply, [(j["css"], j["evidence"]) for j in judges if j["evidence"]]
        )
    elif kind == StudyKind.FAILURE_MODE:
        view["reply"] = reply
        suggestion = assignment.display.get("suggested") or {}
        view["suggestion"] = {
            "label": suggestion.get("label", ""),
            "name": FailureMode(suggestion["label"]).label if suggestion.get("label") else "",
            "reason": suggestion.get("reason", ""),
        }
        view["definitions"] = [
            (mode.value, FAILURE_MODE_KEYS[mode.value], mode.label, FAILURE_MODE_DEFINITIONS[mode])
            for mode in FailureMode
        ]
    return view


def _audit_view(assignment: Assignment) -> dict:
    dialogue = dialogue_for_reading(pk=assignment.item.dialogue_id)
    findings: dict[int | None, list[dict]] = {}
    for finding in dialogue.findings:
        findings.setdefault(finding.get("turn"), []).append(finding)
    view = {
        "dialogue": dialogue,
        "turns": [
            {"turn": turn, "findings": findings.get(turn.index, [])}
            for turn in dialogue.turns.all()
        ],
        "dialogue_findings": findings.get(None, []),
        "adjudicating": assignment.role == AssignmentRole.ADJUDICATE,
        "audits": [],
    }
    if view["adjudicating"]:
        questions = dict(AUDIT_CHECKS)
        earlier = Answer.objects.filter(
            assignment__item_id=assignment.item_id,
            assignment__role=AssignmentRole.ANNOTATE,
            retracted_at__isnull=True,
        ).order_by("submitted_at", "id")
        view["audits"] = [
            {
                "number": n,
                "decision": answer.label,
                "note": answer.note,
                "checks": [
                    (questions.get(key, key), check.get("ok"), check.get("note", ""))
                    for key, check in (answer.details.get("checks") or {}).items()
                ],
            }
            for n, answer in enumerate(earlier, start=1)
        ]
    return view


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
        for item, rater, label, seconds, choice in Answer.objects.filter(
            assignment__item__study=study, retracted_at__isnull=True
        ).values_list(
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
    items = study.items.aggregate(
        total=Count("id"),
        complete=Count("id", filter=Q(completed_answers__gte=F("required_answers"))),
        gold=Count("id", filter=Q(is_gold=True)),
        outcomes_pass=Count("id", filter=Q(outcome__in=["pass", "PASS"])),
        outcomes_decided=Count("id", filter=~Q(outcome="")),
    )
    rows = []
    for rater in raters:
        fig = figures.get(rater.pk)
        rows.append({"rater": rater, "figures": fig, "flags": _flags(fig) if fig else []})
    preference = None
    if study.kind == StudyKind.PAIRWISE:
        decided = [v for v in counted if v.label in ("A", "B")]
        preference = {
            "b": sum(v.label == "B" for v in decided),
            "decided": len(decided),
            "ties": sum(v.label == "tie" for v in counted),
        }
    return {
        "raters": rows,
        "items": items,
        "answers": len(counted),
        "answers_all": len(votes),
        "agreement": agreement,
        "agreement_items": agreement_items,
        "gold_accuracy": accuracy,
        "gold_answers": gold_answers,
        "preference": preference,
        "exclusions": list(
            RaterExclusion.objects.filter(rater__study=study)
            .select_related("rater__user", "by")
            .order_by("-at", "-id")[:20]
        ),
    }
