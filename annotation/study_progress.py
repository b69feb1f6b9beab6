"""Read-side queries for working through a study, split from ``selectors.py`` by topic: the
annotator's own history ("My answers") and the staff page's live progress, item table and
flags. Each runs a fixed number of queries, whatever the study's size.

"My answers" is blind like the workspace: it shows an answer as its annotator saw it (by screen
position: ``StudyKind.answer_shown``), the item by its opaque token, and nothing that names a
model, judge or condition. The staff side is not blind (staff see item keys)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.core.paginator import Page, Paginator
from django.db.models import (
    Case,
    CharField,
    Count,
    F,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from annotation.models import (
    Answer,
    Assignment,
    AssignmentState,
    ItemFlag,
    ItemSkip,
    Rater,
    SkipCause,
    Study,
    StudyStatus,
)

HISTORY_PAGE_SIZE = 100
ITEM_TABLE_PAGE_SIZE = 50
FLAGS_SHOWN = 100


# --- My answers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryRow:
    """One item the rater has finished with: answered (``answer``, live) or given back
    (``skip``). ``number``: its place in the order the rater was given their items (1-based,
    skipped ones included). ``undoable``: it is their last live answer and today's undo rule
    (``services.assignments.answer_undo``) would take it back."""

    number: int
    assignment: Assignment
    answer: Answer | None
    skip: ItemSkip | None
    undoable: bool


def rater_history(*, rater: Rater, page_number: int | str | None = 1) -> tuple[Page, list]:
    """The rater's answered and skipped items in this study, in the order they were handed
    out, a page at a time: (the page, its rows). Four queries (count, page, its live answers,
    the last live answer)."""
    finished = (
        Assignment.objects.filter(
            rater=rater, state__in=[AssignmentState.DONE, AssignmentState.SKIPPED]
        )
        .select_related("item", "skip")
        .prefetch_related(
            Prefetch(
                "answers",
                queryset=Answer.objects.filter(retracted_at__isnull=True),
                to_attr="live",
            )
        )
        .order_by("id")
    )
    page = Paginator(finished, HISTORY_PAGE_SIZE).get_page(page_number)
    last = (
        Answer.objects.filter(assignment__rater=rater, retracted_at__isnull=True)
        .order_by("-submitted_at", "-id")
        .values_list("pk", "verdict_revealed_at")
        .first()
    )
    undoable_id = None
    if last is not None and last[1] is None and rater.study.status == StudyStatus.OPEN:
        undoable_id = last[0]
    rows = []
    for offset, assignment in enumerate(page.object_list):
        answer = assignment.live[0] if assignment.live else None
        rows.append(
            HistoryRow(
                number=page.start_index() + offset,
                assignment=assignment,
                answer=answer,
                skip=getattr(assignment, "skip", None),
                undoable=answer is not None and answer.pk == undoable_id,
            )
        )
    return page, rows


# --- Staff: live progress, items, flags -------------------------------------------------------


def _count(queryset: QuerySet, group: str) -> Subquery:
    return Subquery(
        queryset.values(group).annotate(n=Count("id")).values("n"),
        output_field=IntegerField(),
    )


def _item_counts(now: datetime) -> dict[str, Coalesce]:
    """Per item: ``holding`` (running leases), ``skips`` and ``flags``."""
    running = Assignment.objects.filter(
        item=OuterRef("pk"), state=AssignmentState.LEASED, lease_expires_at__gt=now
    )
    skips = ItemSkip.objects.filter(assignment__item=OuterRef("pk"))
    flags = ItemFlag.objects.filter(assignment__item=OuterRef("pk"))
    return {
        "holding": Coalesce(_count(running, "item"), 0),
        "skips": Coalesce(_count(skips, "assignment__item"), 0),
        "flags": Coalesce(_count(flags, "assignment__item"), 0),
    }


# An item's status on the staff page: complete (k live answers), in progress (some answer or a
# running lease), not started. Over ``_item_counts``' ``holding``.
ITEM_STATUS = Case(
    When(completed_answers__gte=F("required_answers"), then=Value("complete")),
    When(Q(completed_answers__gt=0) | Q(holding__gt=0), then=Value("in progress")),
    default=Value("not started"),
    output_field=CharField(),
)
ITEM_STATUSES = ("not started", "in progress", "complete")


def study_live(*, study: Study, now: datetime) -> dict:
    """The staff page's live panel (polled): items by status, live answers, skips by cause,
    flags and the raters on an item now. Two queries."""
    by_status = dict.fromkeys(ITEM_STATUSES, 0)
    for status, n in (
        study.items.annotate(**_item_counts(now))
        .annotate(status=ITEM_STATUS)
        .values_list("status")
        .annotate(n=Count("id"))
        .order_by()
    ):
        by_status[status] = n
    of_study = {"assignment__item__study": OuterRef("pk")}
    counts = (
        Study.objects.filter(pk=study.pk)
        .annotate(
            answers=_count(
                Answer.objects.filter(**of_study, retracted_at__isnull=True),
                "assignment__item__study",
            ),
            skips_by_annotator=_count(
                ItemSkip.objects.filter(**of_study, cause=SkipCause.ANNOTATOR),
                "assignment__item__study",
            ),
            skips_by_time_limit=_count(
                ItemSkip.objects.filter(**of_study, cause=SkipCause.TIME_LIMIT),
                "assignment__item__study",
            ),
            flags=_count(ItemFlag.objects.filter(**of_study), "assignment__item__study"),
            holding=_count(
                Assignment.objects.filter(
                    item__study=OuterRef("pk"),
                    state=AssignmentState.LEASED,
                    lease_expires_at__gt=now,
                ),
                "item__study",
            ),
        )
        .values("answers", "skips_by_annotator", "skips_by_time_limit", "flags", "holding")
        .get()
    )
    return {
        "by_status": by_status,
        "total": sum(by_status.values()),
        **{name: n or 0 for name, n in counts.items()},
        "at": now,
    }


def study_item_table(*, study: Study, now: datetime, page_number: int | str | None = 1) -> Page:
    """A page of the study's items in hand-out order with their status, answers so far (of
    k), running leases, skips and flags. Two queries (count, page)."""
    items = (
        study.items.annotate(**_item_counts(now))
        .annotate(status=ITEM_STATUS)
        .order_by("-needs_adjudication", "position")
    )
    return Paginator(items, ITEM_TABLE_PAGE_SIZE).get_page(page_number)


def study_flags(*, study: Study) -> list[ItemFlag]:
    """The study's latest ``FLAGS_SHOWN`` flags with their rater and item (how many there are
    in all: ``study_live``'s ``flags``). One query."""
    return list(
        ItemFlag.objects.filter(assignment__item__study=study)
        .select_related("assignment__rater__user", "assignment__item")
        .order_by("-at", "-id")[:FLAGS_SHOWN]
    )
