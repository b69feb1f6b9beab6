"""Annotation pages. Annotators: their home, and one workspace per study (htmx: every action —
next, answer, undo — returns the one ``#workspace`` partial; without htmx the same actions
redirect back to the page). Staff (admin or researcher): the studies, creating one, and a page
per study with progress and rater quality."""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, HttpResponseNotModified
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import get_resolver, get_script_prefix, get_urlconf, reverse
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.views.decorators.http import require_GET, require_POST

from annotation import kinds, selectors, study_progress
from annotation.forms import (
    AnswerForm,
    ConsentForm,
    ExclusionForm,
    FlagForm,
    OnboardingForm,
    QualificationOverrideForm,
    SkipForm,
    StudyCreateForm,
    kind_switch_data,
)
from annotation.kinds.base import COMMON_SHORTCUTS, StudyKind
from annotation.models import (
    Assignment,
    AssignmentState,
    Rater,
    Study,
    StudyStatus,
)
from annotation.services import onboarding, participation
from annotation.services.assignments import (
    AnswerRejected,
    SkipRefused,
    SubmitResult,
    UndoRefused,
    answer_submit,
    answer_undo,
    answer_verdict_reveal,
    assignment_current,
    assignment_next,
    item_skip,
    time_is_up,
)
from annotation.services.flags import FlagRefused, item_flag
from annotation.services.studies import StudyInputError, rater_exclusion_set, study_create
from benchmark.models import turn_image_storage
from core.http import SignedInRequest
from core.roles import is_participant, staff_like_required

# Said when Next hands out nothing while items are still left for the annotator (the finished
# and the closed study say so in the workspace itself).
NOTHING_FREE = (
    "Nothing is free for you right now: the items left are with other annotators for the "
    "moment. Try again in a few minutes."
)
LATE_NOTICE = (
    "Your answer arrived after this item's time ran out and it had gone to someone else: it was "
    "kept, but not counted."
)
TIME_UP = (
    "Time ran out on your item: it went back to the pool as a skip (time limit). "
    "Next gives you another."
)
TIMED_OUT_ANSWER = (
    "Your answer arrived after the item's time limit: it was kept, but not counted, and the "
    "item went back to the pool."
)
SKIPPED = "Skipped: the item went back to the pool, and you will not be given it again."
FLAGGED = "Flagged, thank you: staff will look at it. You can still answer or skip the item."
ALREADY_ANSWERED = (
    "Not saved: you had already answered that item (in another tab or window?), and that first "
    "answer is kept: {answer}. To change it, use Undo while it is your last answer."
)


# --- Annotators -------------------------------------------------------------------------------


@login_required
@require_GET
def turn_image(request: SignedInRequest, sha256: str) -> HttpResponse | FileResponse:
    """A turn image for someone who was shown its turn (404 for anyone else): the copy without
    metadata (EXIF and the like stripped at import), private to the browser's cache, its ETag
    the content's hash."""
    image = selectors.visible_turn_image(user=request.user, sha256=sha256)
    headers = {"Cache-Control": "private, max-age=86400", "ETag": f'"{image.sha256}"'}
    if request.headers.get("If-None-Match") == headers["ETag"]:
        response: HttpResponse | FileResponse = HttpResponseNotModified()
    else:
        response = FileResponse(
            turn_image_storage().open(image.display_name, "rb"), content_type=image.media_type
        )
    for name, value in headers.items():
        response[name] = value
    return response


@login_required
@require_GET
def annotator_home(request: SignedInRequest) -> HttpResponse:
    """Each person's own work page: the studies they are a rater in, with their progress. A
    participant has one study: their work page is its workspace."""
    if is_participant(request.user):
        study_id = participation.participant_study_id(request.user)
        if study_id is None:
            raise Http404("No such study for you.")
        return redirect("annotation:workspace", study_id=study_id)
    return render(
        request,
        "annotation/home.html",
        {"raters": selectors.home_studies(user=request.user), "shortcuts": COMMON_SHORTCUTS},
    )


def _workspace(
    request: SignedInRequest,
    rater: Rater,
    assignment: Assignment | None,
    *,
    form: AnswerForm | None = None,
    notice: str = "",
    nothing_handed_out: bool = False,
    saved: bool = False,
) -> HttpResponse:
    study = rater.study
    kind = kinds.get(study.kind)
    now = timezone.now()
    if (
        assignment is not None
        and assignment.state == AssignmentState.LEASED
        and time_is_up(assignment, now)
    ):
        # Shown as given back (no form): the next Next records the skip (services).
        assignment, notice = None, notice or TIME_UP
    holding = assignment is not None and assignment.state == AssignmentState.LEASED
    progress = selectors.rater_progress(rater=rater, holding=holding)
    context = {
        "study": study,
        "kind": kind,
        "assignment": assignment,
        "progress": progress,
        "saved": saved,
        "time_left_s": _time_left_s(assignment, now) if holding else None,
        "shortcuts": kind.all_shortcuts(),
        "notice": notice,
        "is_open": study.status == StudyStatus.OPEN,
        "draft_owner": _draft_owner(request.user),
        "nothing_free": NOTHING_FREE if nothing_handed_out and progress.left else "",
        "urls": workspace_urls(study.pk, assignment.item.token if assignment else None),
        # Read by the partial in most states, here as the nothing it means when it does not
        # apply: looking up a name missing from the context costs the template engine three
        # exceptions (a twentieth of a pairwise workspace's render time for these four).
        "answer": None,
        "practice_feedback": None,
        "gate": None,
        "flag_ok": False,
        "flag_message": "",
    }
    if assignment is not None:
        context["view"] = kind.item_view(assignment, study)
        if assignment.state == AssignmentState.LEASED and context["is_open"]:
            if form is None:
                form = kind.answer_form(
                    initial=_initial(kind, assignment), study=study, assignment=assignment
                )
            context["form"] = form
        else:
            context["answer"] = assignment.answers.order_by("-id").first()
    context["reveal"] = kind.feedback(study, rater, assignment.item_id if assignment else None)
    context.update(
        _onboarding(request, rater, assignment, is_open=study.status == StudyStatus.OPEN)
    )
    template = "annotation/workspace.html"
    if request.htmx:
        template += "#workspace"
    return render(request, template, context)


@dataclass(frozen=True)
class WorkspaceUrls:
    """Where the workspace's forms and links go (the item's three only with an item)."""

    next: str
    undo: str
    my_answers: str
    answer: str = ""
    skip: str = ""
    flag: str = ""


STUDY_URLS = ("next", "undo", "my_answers")
ITEM_URLS = ("answer", "skip", "flag")
_SLUG = re.compile(r"[-a-zA-Z0-9_]+\Z")


def workspace_urls(study_id: int, token: str | None) -> WorkspaceUrls:
    """The workspace's URLs as ``reverse`` writes them, without reversing each on every
    request (five reverse() calls were a twentieth of the CPU of an answer): reversed once
    per study, script prefix and URLconf (``_reversed``). Every token is a slug
    (secrets.token_urlsafe, and the URLs' ``<slug:token>``), which reverse() writes into a
    URL as it is, so an item's URL is the text around the token slot with its token between."""
    study_urls, item_urls = _reversed(study_id, get_script_prefix(), get_resolver(get_urlconf()))
    if token is None:
        return WorkspaceUrls(*study_urls)
    if not _SLUG.match(token):  # never a real token: reverse() refuses it, as before
        return WorkspaceUrls(
            *study_urls,
            *(reverse(f"annotation:{name}", args=[study_id, token]) for name in ITEM_URLS),
        )
    return WorkspaceUrls(*study_urls, *(head + token + tail for head, tail in item_urls))


@lru_cache(maxsize=1024)
def _reversed(study_id: int, script_prefix: str, resolver: object) -> tuple[tuple, tuple]:
    """The study's URLs, and each item URL as the text before and after its token slot: what
    two reversals with different tokens have in common at either end."""
    study_urls = tuple(reverse(f"annotation:{name}", args=[study_id]) for name in STUDY_URLS)
    item_urls = []
    for name in ITEM_URLS:
        a, b = (reverse(f"annotation:{name}", args=[study_id, token]) for token in ("a", "b"))
        head = os.path.commonprefix([a, b])
        tail = a[len(head) + 1 :]
        if not (a == f"{head}a{tail}" and b == f"{head}b{tail}"):
            raise ValueError(f"annotation:{name} has no single token slot")
        item_urls.append((head, tail))
    return study_urls, tuple(item_urls)


def _time_left_s(assignment: Assignment | None, now) -> int | None:
    """Whole seconds left on the item's time limit (the page's timer counts down from it)."""
    if assignment is None or assignment.time_limit_ends_at is None:
        return None
    return max(0, int((assignment.time_limit_ends_at - now).total_seconds()))


def _onboarding(
    request: SignedInRequest, rater: Rater, assignment: Assignment | None, *, is_open: bool
) -> dict:
    """The workspace's onboarding parts (services/onboarding.py): the feedback on a practice
    answer just given, the consent screen or the "not qualified" page in place of Start, and a
    participant's completion code once they have finished. No query for a study without
    onboarding or participation."""
    study = rater.study
    context: dict = {"participant": study.participation_enabled and is_participant(request.user)}
    shown = assignment.item_id if assignment else None
    if study.practice_items:
        answer = onboarding.practice_answer_to_show(rater, shown)
        # Recorded before it is shown: the answer is final from then on (no undo).
        if answer is not None and answer_verdict_reveal(answer_id=answer.pk):
            context["practice_feedback"] = onboarding.practice_feedback(rater, answer)
    if assignment is None and is_open:
        gate = onboarding.rater_gate(rater)
        if gate in (onboarding.Gate.CONSENT, onboarding.Gate.UNQUALIFIED):
            context["gate"] = gate.value
            context["consent_form"] = ConsentForm(
                initial={"text_sha256": onboarding.consent_text_sha256(study)}
            )
    return context


def _draft_owner(user: User) -> str:
    """Whose drafts this browser keeps (static/js/drafts.js): a keyed hash of the account, so
    that one annotator's unsent answer is never refilled for another, and the key names no one."""
    return _draft_owner_of(user.pk, settings.SECRET_KEY)


@lru_cache(maxsize=4096)
def _draft_owner_of(user_id: int, secret: str) -> str:
    # Kept per process: the same on every request of the user's, and an HMAC each time was
    # a hundredth of the CPU of an answer.
    return salted_hmac("annotation.draft-owner", str(user_id), secret=secret).hexdigest()[:16]


def _initial(kind: StudyKind, assignment: Assignment) -> dict:
    """The form as the rater left it (an undone answer), with a fresh idempotency key."""
    initial = kind.form_initial(selectors.undone_answer(assignment=assignment), assignment)
    initial["idempotency_key"] = secrets.token_urlsafe(16)
    return initial


def _after_action(
    request: SignedInRequest,
    rater: Rater,
    assignment: Assignment | None,
    *,
    notice: str = "",
    nothing_handed_out: bool = False,
    saved: bool = False,
) -> HttpResponse:
    """The workspace after a POST: in the htmx swap, or (without htmx) redirected to, with the
    notice as a message. ``nothing_handed_out``: Next (or an answer's hand-out) found nothing.
    ``saved``: an answer was just stored (the page says so)."""
    if request.htmx:
        return _workspace(
            request,
            rater,
            assignment,
            notice=notice,
            nothing_handed_out=nothing_handed_out,
            saved=saved,
        )
    if nothing_handed_out and not notice and rater.study.status == StudyStatus.OPEN:
        notice = NOTHING_FREE if selectors.rater_progress(rater=rater).left else ""
    if saved and not notice:
        notice = "Saved."
    if notice:
        messages.info(request, notice)
    return redirect("annotation:workspace", study_id=rater.study_id)


@login_required
@require_GET
def workspace(request: SignedInRequest, study_id: int) -> HttpResponse:
    """The study's workspace: the item the annotator is on (resumed as they left it)."""
    rater = selectors.rater_for(user=request.user, study_id=study_id)
    return _workspace(request, rater, assignment_current(rater=rater))


@login_required
@require_POST
def next_item(request: SignedInRequest, study_id: int) -> HttpResponse:
    rater = selectors.rater_for(user=request.user, study_id=study_id)
    assignment = assignment_next(rater=rater)
    return _after_action(request, rater, assignment, nothing_handed_out=assignment is None)


@login_required
@require_POST
def answer(request: SignedInRequest, study_id: int, token: str) -> HttpResponse:
    assignment = selectors.assignment_for(user=request.user, study_id=study_id, token=token)
    rater = assignment.rater
    study = rater.study
    form: AnswerForm = kinds.get(study.kind).answer_form(
        request.POST, study=study, assignment=assignment
    )
    if not form.is_valid():
        return _workspace(request, rater, assignment, form=form)
    try:
        result = answer_submit(
            rater=rater,
            item_token=token,
            answer=form.to_input(),
            idempotency_key=form.cleaned_data["idempotency_key"],
            elapsed_ms=form.cleaned_data["elapsed_ms"],
            hand_out_next=True,
        )
    except AnswerRejected as exc:
        return _after_action(
            request, rater, assignment_current(rater=rater), notice=f"Not saved: {exc}."
        )
    following = result.following
    notice = LATE_NOTICE if result.late else ""
    if result.timed_out:
        notice = TIMED_OUT_ANSWER
    if result.kept_earlier:
        notice = ALREADY_ANSWERED.format(answer=_answer_summary(kinds.get(study.kind), result))
    return _after_action(
        request,
        rater,
        following,
        notice=notice,
        nothing_handed_out=following is None,
        saved=not notice,
    )


def _answer_summary(kind: StudyKind, result: SubmitResult) -> str:
    """The kept answer as its annotator saw it (by screen position in a pairwise study)."""
    kept = result.answer
    shown = kind.answer_shown(kept)
    return f"{shown}, confidence {kept.confidence}" if kept.confidence else shown


@login_required
@require_POST
def undo(request: SignedInRequest, study_id: int) -> HttpResponse:
    rater = selectors.rater_for(user=request.user, study_id=study_id)
    try:
        reopened = answer_undo(rater=rater)
    except UndoRefused as exc:
        return _after_action(
            request, rater, assignment_current(rater=rater), notice=f"Not undone: {exc}."
        )
    if reopened is None:
        return _after_action(
            request, rater, assignment_current(rater=rater), notice="Nothing to undo."
        )
    return _after_action(
        request, rater, reopened, notice="Undone: the item is back, as you left it."
    )


@login_required
@require_POST
def skip(request: SignedInRequest, study_id: int, token: str) -> HttpResponse:
    """Give the held item back (optional reason), then the next item."""
    assignment = selectors.assignment_for(user=request.user, study_id=study_id, token=token)
    rater = assignment.rater
    form = SkipForm(request.POST)
    if not form.is_valid():
        return _after_action(
            request,
            rater,
            assignment_current(rater=rater),
            notice=f"Not skipped: {form.errors.as_text()}",
        )
    try:
        result = item_skip(
            rater=rater,
            item_token=token,
            reason=form.cleaned_data["reason"],
            hand_out_next=True,
        )
    except SkipRefused as exc:
        return _after_action(
            request, rater, assignment_current(rater=rater), notice=f"Not skipped: {exc}."
        )
    following = result.following
    return _after_action(
        request, rater, following, notice=SKIPPED, nothing_handed_out=following is None
    )


@login_required
@require_POST
def flag(request: SignedInRequest, study_id: int, token: str) -> HttpResponse:
    """Flag one of the annotator's items for staff. With htmx only the flag's status line is
    swapped (the answer being written stays as it is); without, back to the page."""
    assignment = selectors.assignment_for(user=request.user, study_id=study_id, token=token)
    form = FlagForm(request.POST)
    status = 200
    if form.is_valid():
        try:
            item_flag(
                assignment=assignment,
                category=form.cleaned_data["category"],
                note=form.cleaned_data["note"],
            )
            message = FLAGGED
        except FlagRefused as exc:
            message, status = f"Not flagged: {exc}.", 400
    else:
        message, status = f"Not flagged: {form.errors.as_text()}", 400
    if request.htmx:
        return render(
            request,
            "annotation/workspace/item_tools.html#flag_status",
            {"flag_message": message, "flag_ok": status == 200},
            status=status,
        )
    messages.info(request, message)
    return redirect("annotation:workspace", study_id=study_id)


@login_required
@require_GET
def my_answers(request: SignedInRequest, study_id: int) -> HttpResponse:
    """The annotator's own history in the study: answered and skipped items, with links to
    them and, on their last answer, today's Undo (nothing more)."""
    rater = selectors.rater_for(user=request.user, study_id=study_id)
    page, rows = study_progress.rater_history(rater=rater, page_number=request.GET.get("page"))
    study = rater.study
    return render(
        request,
        "annotation/my_answers.html",
        {
            "study": study,
            "kind": kinds.get(study.kind),
            "page": page,
            "rows": rows,
            "is_open": study.status == StudyStatus.OPEN,
        },
    )


@login_required
@require_GET
def item_detail(request: SignedInRequest, study_id: int, token: str) -> HttpResponse:
    """One of the annotator's own items: to answer if they hold it, else their answer."""
    assignment = selectors.assignment_for(user=request.user, study_id=study_id, token=token)
    return _workspace(request, assignment.rater, assignment)


@login_required
@require_POST
def consent(request: SignedInRequest, study_id: int) -> HttpResponse:
    """Accept the study's instructions (a consent screen), then on to the first item."""
    rater = selectors.rater_for(user=request.user, study_id=study_id)
    form = ConsentForm(request.POST)
    notice = ""
    if not form.is_valid():
        notice = "Not recorded: tick the box to say you agree."
    elif not onboarding.consent_accept(rater=rater, text_sha256=form.cleaned_data["text_sha256"]):
        notice = "The instructions changed while you were reading them: please read them again."
    elif rater.study.status == StudyStatus.OPEN:
        assignment = assignment_next(rater=rater)
        return _after_action(request, rater, assignment, nothing_handed_out=assignment is None)
    return _after_action(request, rater, assignment_current(rater=rater), notice=notice)


@login_required
@require_GET
def complete(request: SignedInRequest, study_id: int) -> HttpResponse:
    """A participant's end of the study: their completion code, or (when the study has one)
    straight on to the platform's completion URL. Only once nothing is left for them; before
    that, back to the workspace. Anyone but the study's participants: 404."""
    rater = selectors.rater_for(user=request.user, study_id=study_id)
    study = rater.study
    if not (study.participation_enabled and is_participant(request.user)):
        raise Http404("No such page for you.")
    if study.status == StudyStatus.OPEN and (
        assignment_current(rater=rater) is not None
        or selectors.rater_progress(rater=rater).left
        or onboarding.rater_gate(rater) is not onboarding.Gate.OPEN
    ):
        return redirect("annotation:workspace", study_id=study.pk)
    if study.completion_url:
        return redirect(study.completion_url)
    return render(request, "annotation/onboarding/complete.html", {"study": study})


def participate(request: HttpRequest, token: str) -> HttpResponse:
    """A study's participation link (``/participate/<token>/?PROLIFIC_PID=…&STUDY_ID=…&
    SESSION_ID=…``, or ``?participant=…``): make or find the participant's account for this
    study, sign them in and open its workspace. An unknown, switched-off or closed link is a
    404; malformed ids a 400 naming the parameter. Signing in replaces whoever was signed in
    in this browser."""
    if request.method != "GET":
        return HttpResponse(status=405, headers={"Allow": "GET"})
    study = participation.study_for_participation(token)
    if study is None:
        raise Http404("No such study.")
    try:
        given = participation.participation_input(request.GET)
    except participation.ParticipationRefused as exc:
        return render(
            request, "annotation/onboarding/participation_refused.html", {"error": exc}, status=400
        )
    user = participation.participant_join(study=study, given=given)
    login(request, user, backend=settings.AUTHENTICATION_BACKENDS[-1])
    return redirect("annotation:workspace", study_id=study.pk)


# --- Staff ------------------------------------------------------------------------------------


@staff_like_required
@require_GET
def study_list(request: SignedInRequest) -> HttpResponse:
    archived = request.GET.get("archived") == "1"
    return render(
        request,
        "annotation/study_list.html",
        {"studies": selectors.study_list(archived=archived), "archived": archived},
    )


@staff_like_required
def study_new(request: SignedInRequest) -> HttpResponse:
    """Create a study from a selection. With htmx, changing the kind re-renders the form with
    that kind's selection fields (values typed so far are kept)."""
    if request.method == "POST":
        form = StudyCreateForm(request.POST)
        if form.is_valid():
            try:
                study = study_create(spec=form.to_spec(), created_by=request.user)
            except StudyInputError as exc:
                for field_name, errors in exc.errors.items():
                    for error in errors:
                        form.add_error(None if field_name == "__all__" else field_name, error)
            else:
                messages.success(
                    request, f"Study {study.pk} created with {study.items.count()} items."
                )
                return redirect("annotation:study_detail", study_id=study.pk)
    else:
        switched = kind_switch_data(request.GET) if request.htmx and request.GET else None
        form = StudyCreateForm(switched) if request.htmx else StudyCreateForm()
        if request.htmx:
            form.errors.clear()  # a kind switch, not a submission: no errors yet
    template = "annotation/study_form.html"
    if request.htmx and request.method == "GET":
        template += "#form"
    return render(request, template, {"form": form})


def _study_page(
    study: Study, *, onboarding_form: OnboardingForm | None = None, page_number: str | None = None
) -> dict:
    """The whole study page's context (``_study_quality`` and the workflow parts: the live
    panel, the item table and the flags)."""
    now = timezone.now()
    live = study_progress.study_live(study=study, now=now)
    return {
        **_study_quality(study, onboarding_form=onboarding_form),
        "live": live,
        "item_page": study_progress.study_item_table(study=study, now=now, page_number=page_number),
        "flag_count": live["flags"],
        "flags": study_progress.study_flags(study=study),
    }


def _study_quality(study: Study, *, onboarding_form: OnboardingForm | None = None) -> dict:
    """What the ``#quality`` partial and the onboarding panel read."""
    if onboarding_form is None:
        onboarding_form = OnboardingForm(
            initial={
                "consent_required": study.consent_required,
                "qualification_percent": study.qualification_percent,
                "participation_enabled": study.participation_enabled,
                "completion_code": study.completion_code,
                "completion_url": study.completion_url,
                "practice": onboarding.practice_lines(study),
            }
        )
    return {
        "study": study,
        "kind": kinds.get(study.kind),
        "overview": selectors.study_overview(study=study),
        "onboarding": onboarding.onboarding_overview(study),
        "onboarding_form": onboarding_form,
    }


@staff_like_required
@require_GET
def study_detail(request: SignedInRequest, study_id: int) -> HttpResponse:
    study = get_object_or_404(Study.objects.select_related("run", "created_by"), pk=study_id)
    context = _study_page(study, page_number=request.GET.get("page"))
    context["participation_url"] = request.build_absolute_uri(
        reverse("participate", args=[study.participation_token])
    )
    return render(request, "annotation/study_detail.html", context)


@staff_like_required
@require_GET
def study_live(request: SignedInRequest, study_id: int) -> HttpResponse:
    """The study page's live panel (polled by htmx every few seconds): counts by status."""
    study = get_object_or_404(Study, pk=study_id)
    return render(
        request,
        "annotation/study_live.html",
        {"study": study, "live": study_progress.study_live(study=study, now=timezone.now())},
    )


@staff_like_required
@require_POST
def rater_exclusion(request: SignedInRequest, study_id: int, rater_id: int) -> HttpResponse:
    """Exclude a rater from the study's statistics, or include them again (recorded)."""
    rater = get_object_or_404(Rater, pk=rater_id, study_id=study_id)
    form = ExclusionForm(request.POST)
    if form.is_valid():
        rater_exclusion_set(
            rater=rater,
            excluded=form.cleaned_data["excluded"],
            by=request.user,
            reason=form.cleaned_data["reason"],
        )
    if request.htmx:
        study = get_object_or_404(Study.objects.select_related("run", "created_by"), pk=study_id)
        return render(request, "annotation/study_detail.html#quality", _study_quality(study))
    return redirect(reverse("annotation:study_detail", args=[study_id]) + "#quality")


@staff_like_required
@require_POST
def study_onboarding(request: SignedInRequest, study_id: int) -> HttpResponse:
    """Set the study's consent screen, practice items, threshold and participation."""
    study = get_object_or_404(Study.objects.select_related("run", "created_by"), pk=study_id)
    form = OnboardingForm(request.POST)
    if form.is_valid():
        try:
            onboarding.study_onboarding_set(study=study, spec=form.to_spec())
        except onboarding.OnboardingInputError as exc:
            for field_name, errors in exc.errors.items():
                for error in errors:
                    form.add_error(field_name if field_name in form.fields else None, error)
        else:
            messages.success(request, "Onboarding and participation saved.")
            return redirect(reverse("annotation:study_detail", args=[study_id]) + "#onboarding")
    study.refresh_from_db()
    context = _study_page(study, onboarding_form=form)
    context["participation_url"] = request.build_absolute_uri(
        reverse("participate", args=[study.participation_token])
    )
    return render(request, "annotation/study_detail.html", context, status=400)


@staff_like_required
@require_POST
def qualification_override(request: SignedInRequest, study_id: int, rater_id: int) -> HttpResponse:
    """Let a rater past the qualification threshold, or undo that (recorded)."""
    rater = get_object_or_404(Rater, pk=rater_id, study_id=study_id)
    form = QualificationOverrideForm(request.POST)
    if form.is_valid():
        onboarding.qualification_override_set(
            rater=rater,
            qualified=form.cleaned_data["qualified"],
            by=request.user,
            reason=form.cleaned_data["reason"],
        )
    return redirect(reverse("annotation:study_detail", args=[study_id]) + "#onboarding")
