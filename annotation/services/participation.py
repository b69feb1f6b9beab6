"""Crowd-platform participation (Prolific and the like): a study's participation link makes
or finds the participant's account, scoped to that one study (docs/annotation.md, "Running a
study on Prolific").

The account is a plain Django user in the Participant group (``core.roles``), with no usable
password (the link is the only way in), a rater in the one study whose link made it, and
nothing else: every annotator page already answers only a study's own raters, the staff pages
only staff. Its username is a keyed hash of the study and the platform's id, so it names no one
and the same id on another study's link is another account.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.contrib.auth.models import Group, User
from django.db import transaction
from django.db.models import F
from django.utils.crypto import salted_hmac

from annotation.models import Participant, Rater, Study, StudyStatus
from core.roles import PARTICIPANT

# Prolific's ids are 24 hexadecimal characters; other platforms use their own. Anything of
# letters, digits, ".", "-" and "_" up to 64 characters is taken; nothing else is stored.
EXTERNAL_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


class ParticipationRefused(Exception):
    """The link's parameters cannot make an account (the message names the parameter)."""


@dataclass(frozen=True)
class ParticipationInput:
    external_id: str
    platform_study_id: str = ""
    session_id: str = ""


def participation_input(params) -> ParticipationInput:
    """The participant's ids from the link's query string: Prolific's ``PROLIFIC_PID``,
    ``STUDY_ID``, ``SESSION_ID``, or a generic ``participant``. Raises
    ``ParticipationRefused`` naming the parameter that is missing or malformed."""
    pid = params.get("PROLIFIC_PID") or params.get("participant") or ""
    if not pid:
        raise ParticipationRefused("the link has no participant id (PROLIFIC_PID, or participant)")
    checked = {"PROLIFIC_PID or participant": pid}
    for name in ("STUDY_ID", "SESSION_ID"):
        if params.get(name):
            checked[name] = params[name]
    for name, value in checked.items():
        if not EXTERNAL_ID.fullmatch(value):
            raise ParticipationRefused(f"{name} must be 1 to 64 letters, digits, '.', '-' or '_'")
    return ParticipationInput(
        external_id=pid,
        platform_study_id=params.get("STUDY_ID", ""),
        session_id=params.get("SESSION_ID", ""),
    )


def study_for_participation(token: str) -> Study | None:
    """The open study whose participation link this is, or None (no such link, switched off,
    closed or archived: the link then shows nothing, not even that a study is behind it)."""
    return Study.objects.filter(
        participation_token=token, participation_enabled=True, status=StudyStatus.OPEN
    ).first()


def _username(study: Study, external_id: str) -> str:
    digest = salted_hmac("annotation.participant", f"{study.pk}:{external_id}").hexdigest()
    return f"participant-{digest[:24]}"


@transaction.atomic
def participant_join(*, study: Study, given: ParticipationInput) -> User:
    """The participant's account for this study: made (with its rater) the first time this id
    uses this study's link, the same one every later time (its session id updated).
    Idempotent; two first visits at once make one account: joins to a study queue on its
    row lock (and the unique constraint on (study, external id) stands behind it).

    A new rater joins the gold (and practice) items' "every annotator" count: each such item's
    required answers grow by one, in one UPDATE per study (each row changed atomically)."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    existing = Participant.objects.select_related("user").filter(
        study=study, external_id=given.external_id
    )
    found = existing.first()
    if found is not None:
        if given.session_id and given.session_id != found.session_id:
            found.session_id = given.session_id
            found.save(update_fields=["session_id", "last_seen_at"])
        return found.user
    user = User(username=_username(study, given.external_id))
    user.set_unusable_password()
    user.save()
    user.groups.add(Group.objects.get_or_create(name=PARTICIPANT)[0])
    Participant.objects.create(
        study=study,
        user=user,
        external_id=given.external_id,
        platform_study_id=given.platform_study_id,
        session_id=given.session_id,
    )
    Rater.objects.create(study=study, user=user, annotates=True)
    study.items.filter(is_gold=True).update(required_answers=F("required_answers") + 1)
    return user


def participant_study_id(user: User) -> int | None:
    """The one study a participant account belongs to (None for anyone else)."""
    return Participant.objects.filter(user=user).values_list("study_id", flat=True).first()
