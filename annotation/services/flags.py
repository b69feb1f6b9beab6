"""Flags: an annotator tells staff that one of their items is broken, offensive or unclear.

A flag is not an answer: it changes neither the assignment nor the item's count, so the rater
may flag and then answer or skip as usual. Flags are listed on the staff study page."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from annotation.models import Assignment, FlagCategory, ItemFlag, StudyStatus

FLAG_NOTE_MAX_CHARS = 2000


class FlagRefused(Exception):
    """The flag cannot be recorded (a closed study, or an input the form should have caught)."""


def item_flag(
    *, assignment: Assignment, category: str, note: str = "", now: datetime | None = None
) -> ItemFlag:
    """Record the rater's flag on their item (``assignment``: theirs, with ``rater.study``
    loaded, as ``selectors.assignment_for`` gives it). Idempotent per category: flagging the
    same item with the same category again keeps one row and replaces its note and time."""
    now = now or timezone.now()
    note = note.strip()
    if category not in FlagCategory.values:
        raise FlagRefused(f"unknown flag category {category!r}")
    if len(note) > FLAG_NOTE_MAX_CHARS or "\x00" in note:
        raise FlagRefused(f"a note has at most {FLAG_NOTE_MAX_CHARS} characters, no NUL")
    if assignment.rater.study.status != StudyStatus.OPEN:
        raise FlagRefused("this study is closed")
    with transaction.atomic():
        flag, _ = ItemFlag.objects.update_or_create(
            assignment=assignment, category=category, defaults={"note": note, "at": now}
        )
    return flag
