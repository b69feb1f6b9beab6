"""The permission matrix, generated from the URLconf: every named URL × (anonymous, annotator,
rater, researcher, staff, participant) → the expected status of a GET. The annotator is a rater
in no study; the rater is an annotator who is a rater in one study, and the annotation URLs are
asked for with that study and the rater's own item (so their pages are 200, and nobody else's).
The participant is a crowd participant whose account the same study's participation link made
(issue #19): a rater of that study alone, who holds no item yet.

Every URL name the project serves must match a row of ``EXPECTED`` below: a new URL without
one fails this test, naming it. URL arguments are real objects (the demo data plus one of every
other model the admin shows), so a change page is the page of an existing row.

Statuses: 302 to a login page for the anonymous; 404 (not 403) for a logged-in user below the
bar, so staff URLs are not revealed; the admin sends every non-staff user to its login page.

``test_a_rater_reaches_their_own_items_only`` then asks every annotation URL that names a study
again, as the rater, with another rater's item of the same study and with another study.
"""

import io
import re

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token, TokenProxy

from annotation import kinds
from annotation.models import (
    Answer,
    Assignment,
    ConsentRecord,
    ItemFlag,
    ItemSkip,
    RaterExclusion,
    Study,
    StudyArchiveEvent,
)
from annotation.services.assignments import (
    AnswerInput,
    answer_submit,
    assignment_next,
    item_skip,
)
from annotation.services.flags import item_flag
from annotation.services.onboarding import (
    OnboardingSpec,
    qualification_override_set,
    study_onboarding_set,
)
from annotation.services.participation import ParticipationInput, participant_join
from annotation.services.studies import StudySpec, study_archive, study_create
from benchmark.evaluation import runs
from benchmark.evaluation.demo_run import DEMO_RUN_NAME
from benchmark.models import (
    AuditAction,
    AuditVia,
    CallInFlight,
    CurationJob,
    Dialogue,
    EvaluationRun,
    ModelEndpoint,
    ModelPrice,
    ProviderCall,
    ResponseCacheEntry,
    ResultRecordMeta,
)
from stats.models import ExternalBenchmarkScore
from tests.images import stored_turn_image

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "annotator", "rater", "researcher", "staff", "participant")
LOGIN = "302 to a login page"  # the site's or the admin's; any other 302 is written as 302
NOT_FOUND, OK = 404, 200
_UNSET = object()


def row(anonymous, annotator, researcher, staff, *, rater=_UNSET, participant=_UNSET):
    """A rater is an annotator, and a participant a rater (of the one study of its link): the
    same status unless the row says otherwise."""
    rater = annotator if rater is _UNSET else rater
    participant = rater if participant is _UNSET else participant
    return dict(
        zip(ROLES, (anonymous, annotator, rater, researcher, staff, participant), strict=True)
    )


STAFF_LIKE = row(LOGIN, NOT_FOUND, OK, OK)
API = row(401, NOT_FOUND, OK, OK)  # token auth first: the anonymous get 401 + WWW-Authenticate
ADMIN = row(LOGIN, LOGIN, LOGIN, OK)  # the admin's login page, for anyone who is not staff
ADMIN_READ_ONLY_ADD = row(LOGIN, LOGIN, LOGIN, 403)

# Each key is a regular expression matched against the whole URL name ("namespace:name").
EXPECTED: dict[str, dict[str, int]] = {
    "home": row(LOGIN, 302, 302, 302),  # each role to its own start page
    "healthz": row(OK, OK, OK, OK),
    "login": row(OK, 302, 302, 302),  # the logged-in are sent on
    "logout": row(405, 405, 405, 405),  # POST only
    "benchmark:dialogue_list": STAFF_LIKE,
    "benchmark:dialogue_detail": STAFF_LIKE,
    "benchmark:turn_text": STAFF_LIKE,  # a long turn text's "show all"
    # A participant's work page is their one study's workspace.
    "annotation:home": row(LOGIN, OK, OK, OK, participant=302),
    # Workspaces: only a study's own raters reach it (asked for with the rater's study and their
    # own item), anyone else is a 404, staff included; actions are POST only.
    "annotation:workspace": row(LOGIN, NOT_FOUND, NOT_FOUND, NOT_FOUND, rater=OK),
    # Asked for with the rater's own item: not the participant's.
    "annotation:item": row(LOGIN, NOT_FOUND, NOT_FOUND, NOT_FOUND, rater=OK, participant=NOT_FOUND),
    # The rater's own history in the study (issue #19): theirs only, like the workspace (a
    # participant's too: it is their one study).
    # A turn image: whoever was shown its turn (asked for with an image on the rater's own
    # item's trigger turn), and staff; any other annotator a 404, and the participant, who
    # holds no item showing it.
    "annotation:turn_image": row(LOGIN, NOT_FOUND, OK, OK, rater=OK, participant=NOT_FOUND),
    "annotation:my_answers": row(LOGIN, NOT_FOUND, NOT_FOUND, NOT_FOUND, rater=OK),
    r"annotation:(next|undo|answer|consent|skip|flag)": row(LOGIN, 405, 405, 405),
    # A participant's end of the study (back to the workspace until they have finished); a
    # rater who did not come by the link has none.
    "annotation:complete": row(
        LOGIN, NOT_FOUND, NOT_FOUND, NOT_FOUND, rater=NOT_FOUND, participant=302
    ),
    # The study's participation link: asked for without the platform's ids, a 400 naming them.
    "participate": row(400, 400, 400, 400),
    # Running studies is staff work (admin or researcher).
    "annotation:study_list": STAFF_LIKE,
    "annotation:study_new": STAFF_LIKE,
    "annotation:study_detail": STAFF_LIKE,
    "annotation:study_live": STAFF_LIKE,  # the study page's polled live panel
    r"annotation:(rater_exclusion|study_onboarding|qualification_override)": row(
        LOGIN, NOT_FOUND, 405, 405
    ),
    "admin:annotation_study_import": ADMIN,
    "admin:annotation_study_import_battles": ADMIN,
    "admin:annotation_study_import_halo": ADMIN,  # HALO checkpoints (issue #17)
    "admin:annotation_study_import_proposals": ADMIN,
    # Archive / Unarchive buttons: POST only; a GET goes back to the study's page.
    r"admin:annotation_study_(archive|unarchive)": row(LOGIN, LOGIN, LOGIN, 302),
    # Asked for with the rater's study, which has answers: never deleted, only archived.
    "admin:annotation_study_delete": ADMIN_READ_ONLY_ADD,
    "stats:dashboard": STAFF_LIKE,
    "stats:benchmark_scores": STAFF_LIKE,
    # The per-trigger sample viewer names models and conditions: never an annotator's.
    "stats:run_triggers": STAFF_LIKE,
    "stats:trigger_detail": STAFF_LIKE,
    # Every statistics table, asked for as the leaderboard (tests/stats/test_api.py asks each).
    "stats_api:table": API,
    "stats_api:raw-export": API,
    # Reward-model training data from proposal review (every such study when none is named).
    "stats_api:proposal-export": API,
    "stats_api:schema": API,
    "stats_api:docs": API,
    # The admin.
    "admin:login": row(OK, OK, OK, 302),
    "admin:logout": row(302, 302, 302, 405),  # POST only; the others to /admin/, then login
    "admin:index": ADMIN,
    "admin:app_list": ADMIN,
    "admin:password_change": ADMIN,
    "admin:password_change_done": ADMIN,
    "admin:jsi18n": ADMIN,
    "admin:autocomplete": row(LOGIN, LOGIN, LOGIN, 403),  # needs its query parameters
    "admin:view_on_site": row(LOGIN, LOGIN, LOGIN, NOT_FOUND),  # no model has a public page
    "admin:auth_user_password_change": ADMIN,
    "admin:benchmark_dialogue_import": ADMIN,
    "admin:benchmark_evaluationrun_progress": ADMIN,
    "admin:benchmark_evaluationrun_rejudge": ADMIN,
    "admin:benchmark_evaluationrun_pairwise": ADMIN,
    "admin:benchmark_evaluationrun_action": row(LOGIN, LOGIN, LOGIN, 302),  # GET: back to the run
    "admin:benchmark_curationjob_progress": ADMIN,
    "admin:benchmark_curationjob_action": row(LOGIN, LOGIN, LOGIN, 302),  # GET: back to the job
    # Rows nobody may add, change or delete by hand (records of what happened).
    r"admin:benchmark_(evaluationunit|judgment|providercall|responsecacheentry|pairwisecomparison"
    r"|pairwisejudgment)_add": ADMIN_READ_ONLY_ADD,
    r"admin:benchmark_runauditevent_(add|delete)": ADMIN_READ_ONLY_ADD,
    r"admin:axes_(accessattempt|accesslog|accessfailurelog)_add": ADMIN_READ_ONLY_ADD,
    # What annotators did is never added or deleted by hand (nothing a person did is lost).
    r"admin:annotation_(studyitem|assignment|answer|raterexclusion|consentrecord"
    r"|qualificationoverride|participant|itemskip|itemflag)_(add|delete)": (ADMIN_READ_ONLY_ADD),
    # Every other model's standard admin pages: staff only.
    r"admin:\w+_\w+_(changelist|add|change|delete|history)": ADMIN,
}
LOGIN_PAGES = ("/accounts/login/", "/admin/login/")


def _named_patterns(patterns=None, namespace=""):
    """(full name, pattern) for every named URL pattern, including those in namespaces."""
    for item in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(item, URLResolver):
            inner = f"{namespace}{item.namespace}:" if item.namespace else namespace
            yield from _named_patterns(item.url_patterns, inner)
        elif isinstance(item, URLPattern) and item.name:
            yield f"{namespace}{item.name}", item


def _expectation(name: str) -> dict[str, int] | None:
    for key, statuses in EXPECTED.items():
        if re.fullmatch(key, name):
            return statuses
    return None


@pytest.fixture
def world(admin_user, researcher, annotator, study_rater, django_user_model):
    """The demo data, at least one row of every model the admin shows, and the rater's study:
    a direct rating over the demo run, k = 1, its raters the rater and the demo's annotator1,
    who has answered one item and holds another; the rater holds one."""
    # With its users: the demo studies belong to the demo annotators, none of the roles below.
    call_command("load_demo", stdout=io.StringIO())
    run = EvaluationRun.objects.get(name=DEMO_RUN_NAME)
    endpoint = ModelEndpoint.objects.first()
    runs.run_audit_record(run=run, action=AuditAction.LAUNCH, via=AuditVia.ADMIN, actor=admin_user)
    ModelPrice.objects.get_or_create(
        model_name=endpoint.model_name,
        defaults={"input_usd_per_mtok": 1, "output_usd_per_mtok": 2},
    )
    ExternalBenchmarkScore.objects.create(
        endpoint=endpoint, benchmark="GPQA", score=0.5, uploaded_at=timezone.now()
    )
    CallInFlight.objects.create(key="k" * 64, expires_at=timezone.now())
    # A curation job with one target, made directly (launching one would enqueue its task).
    job = CurationJob.objects.create(
        name="matrix job", planner=endpoint, user_agent=endpoint, assistant=endpoint
    )
    job.targets.create(
        scenario=Dialogue.objects.first().scenario, style=Dialogue.objects.first().style
    )
    unit = run.units.first()
    ProviderCall.objects.create(
        run=run, unit=unit, endpoint=endpoint, purpose="reply", cache_key="c" * 64
    )
    ResponseCacheEntry.objects.get_or_create(
        key="c" * 64, defaults={"endpoint_name": endpoint.name, "text": unit.reply}
    )
    if not ResultRecordMeta.objects.exists():
        ResultRecordMeta.objects.create(
            run=run, endpoint=endpoint, dialogue=Dialogue.objects.first(), meta={}
        )
    # An annotator's assignment, answer and an exclusion, so their admin pages have a row.
    study = Study.objects.filter(kind="direct_rating").first()
    demo_rater = study.raters.filter(annotates=True).order_by("pk").first()
    assignment = assignment_next(rater=demo_rater)
    answer_submit(
        rater=demo_rater,
        item_token=assignment.item.token,
        answer=AnswerInput(label=kinds.get(study.kind).labels[0], confidence=3, note="ok"),
        idempotency_key="matrix-1",
    )
    RaterExclusion.objects.create(rater=demo_rater, excluded=False, reason="matrix", by=admin_user)
    # A skip and a flag, so that their admin pages have a row (issue #19).
    flagged = assignment_next(rater=demo_rater)
    item_flag(assignment=flagged, category="unclear", note="matrix")
    item_skip(rater=demo_rater, item_token=flagged.item.token, reason="matrix")
    Token.objects.create(user=researcher)
    AccessAttempt.objects.create(
        username="someone", ip_address="127.0.0.1", user_agent="t", failures_since_start=1
    )
    AccessLog.objects.create(username="someone", ip_address="127.0.0.1", user_agent="t")
    AccessFailureLog.objects.create(username="someone", ip_address="127.0.0.1", user_agent="t")
    colleague = django_user_model.objects.get(username="annotator1")
    rater_study = study_create(
        spec=StudySpec(
            kind="direct_rating",
            name="Rate these replies",
            annotators=[study_rater, colleague],
            overlap=1,
            run=run,
            max_items=4,
            seed=7,
        ),
        created_by=admin_user,
    )
    raters = {r.user_id: r for r in rater_study.raters.all()}
    theirs = assignment_next(rater=raters[colleague.pk])
    answer_submit(
        rater=raters[colleague.pk],
        item_token=theirs.item.token,
        answer=AnswerInput(label="PASS", confidence=4, note="fine"),
        idempotency_key="matrix-2",
    )
    held_by_colleague = assignment_next(rater=raters[colleague.pk])
    own = assignment_next(rater=raters[study_rater.pk])
    own_image = stored_turn_image(own.item.trigger.turn, alt="the rater's turn image")
    study_onboarding_set(
        study=rater_study,
        spec=OnboardingSpec(participation_enabled=True, completion_code="MATRIX1"),
    )
    rater_study.refresh_from_db()
    participant = participant_join(
        study=rater_study, given=ParticipationInput(external_id="5f1e2d3c4b5a69788796a5b4")
    )
    # Their consent and a staff override, so those records' admin pages have a row.
    participant_rater = rater_study.raters.get(user=participant)
    ConsentRecord.objects.create(rater=participant_rater, text_sha256="0" * 64)
    qualification_override_set(rater=participant_rater, qualified=True, by=admin_user)
    other_study = Study.objects.filter(kind="pairwise").exclude(pk=rater_study.pk).get()
    other_item = assignment_next(rater=other_study.raters.order_by("pk").first()).item
    # One archived study, so the archive history has a row.
    study_archive(study=Study.objects.get(kind="failure_mode", status="open"), by=admin_user)
    assert StudyArchiveEvent.objects.exists()
    return {
        "anonymous": None,
        "annotator": annotator,
        "rater": study_rater,
        "researcher": researcher,
        "staff": admin_user,
        "participant": participant,
        "rater_study": rater_study,
        "own_item": own.item,
        "own_image": own_image,
        "colleagues_item": held_by_colleague.item,
        "other_study": other_study,
        "other_item": other_item,
    }


def _object_pk(model):
    if model is TokenProxy:  # the token admin addresses a token by its user
        return Token.objects.first().user_id
    obj = model._default_manager.order_by("pk").first()
    return None if obj is None else obj.pk


def _url(name: str, pattern: URLPattern, models: dict[str, type], world: dict) -> str:
    """Reverse a URL name with real objects for its arguments."""
    params = list(pattern.pattern.regex.groupindex)
    if not pattern.pattern.regex.groups:
        return reverse(name)
    study = world["rater_study"]
    if name == "admin:annotation_study_delete":
        return reverse(name, args=[study.pk])
    match = re.fullmatch(r"admin:(\w+?)_([a-z0-9]+)_(password_change|change|delete|history)", name)
    if match:
        model = models[f"{match.group(1)}.{match.group(2)}"]
        pk = _object_pk(model)
        assert pk is not None, f"no {model.__name__} to open {name} with: add one to world"
        return reverse(name, args=[pk])
    run = EvaluationRun.objects.get(name=DEMO_RUN_NAME)
    by_name = {
        "benchmark:dialogue_detail": [Dialogue.objects.first().pk],
        "benchmark:turn_text": [Dialogue.objects.first().pk, 1, "user"],
        "admin:app_list": ["benchmark"],
        "admin:view_on_site": [
            __import__("django.contrib.contenttypes.models")
            .contrib.contenttypes.models.ContentType.objects.get_for_model(Dialogue)
            .pk,
            Dialogue.objects.first().pk,
        ],
        "admin:benchmark_evaluationrun_progress": [run.pk],
        "admin:benchmark_evaluationrun_rejudge": [run.pk],
        "admin:benchmark_evaluationrun_pairwise": [run.pk],
        "admin:benchmark_evaluationrun_action": [run.pk, "resume"],
        "admin:benchmark_curationjob_progress": [CurationJob.objects.get().pk],
        "admin:benchmark_curationjob_action": [CurationJob.objects.get().pk, "cancel"],
        "stats_api:raw-export": ["judgments", "csv"],
        "stats_api:proposal-export": ["proposal-labels"],
        "stats_api:table": ["leaderboard"],
        "stats:run_triggers": [run.pk],
        "stats:trigger_detail": [run.pk, run.units.order_by("pk").first().trigger_id],
    }
    item = world["own_item"]
    rater = study.raters.order_by("pk").first()
    by_name |= {
        "annotation:workspace": [study.pk],
        "annotation:next": [study.pk],
        "annotation:undo": [study.pk],
        "annotation:item": [study.pk, item.token],
        "annotation:answer": [study.pk, item.token],
        "annotation:skip": [study.pk, item.token],
        "annotation:flag": [study.pk, item.token],
        "annotation:my_answers": [study.pk],
        "annotation:study_detail": [study.pk],
        "annotation:study_live": [study.pk],
        "annotation:rater_exclusion": [study.pk, rater.pk],
        "annotation:turn_image": [world["own_image"].sha256],
        "annotation:qualification_override": [study.pk, rater.pk],
        "annotation:study_onboarding": [study.pk],
        "annotation:consent": [study.pk],
        "annotation:complete": [study.pk],
        "participate": [study.participation_token],
        "admin:annotation_study_archive": [study.pk],
        "admin:annotation_study_unarchive": [study.pk],
    }
    assert name in by_name, f"{name} takes {params}: say which real object to use"
    return reverse(name, args=by_name[name])


def test_every_url_has_an_expected_status_for_every_role(world):
    patterns = list(_named_patterns())
    missing = sorted({name for name, _ in patterns if _expectation(name) is None})
    assert not missing, (
        "URLs without a row in the permission matrix (add them to EXPECTED in "
        f"{__name__}): {', '.join(missing)}"
    )
    models = {f"{m._meta.app_label}.{m._meta.model_name}": m for m in admin.site._registry} | {
        "auth.user": __import__("django.contrib.auth").contrib.auth.get_user_model()
    }
    failures = []
    checked = 0
    for name, pattern in patterns:
        url = _url(name, pattern, models, world)
        for role in ROLES:
            client = Client()
            if world[role] is not None:
                client.force_login(world[role])
            response = client.get(url)
            expected = _expectation(name)[role]
            checked += 1
            got: int | str = response.status_code
            if got == 302 and response["Location"].startswith(LOGIN_PAGES):
                got = LOGIN
            if got != expected:
                where = f" to {response['Location']}" if response.status_code == 302 else ""
                failures.append(f"{role:<10} GET {url} ({name}): {got}{where}, expected {expected}")
    assert not failures, "\n".join(failures)
    assert checked >= len(ROLES) * 150  # every admin model's pages, and the site's


def test_annotators_reach_nothing_of_the_staff_side(world):
    """The matrix's promise for annotators, stated on its own: of everything the project serves,
    an annotator gets a page only from their own work page, the login page, the health check
    and the admin's login form — and a rater also from their study's workspace and items; a
    crowd participant from nothing but the health check, the admin's login form and their one
    study's workspace; everything else is 404, a redirect, a 400 or 405."""
    allowed = {"healthz", "annotation:home", "admin:login"}
    for name, _ in _named_patterns():
        statuses = _expectation(name)
        if statuses["annotator"] == OK:
            assert name in allowed, name
        if statuses["rater"] == OK:
            assert name in allowed | {
                "annotation:workspace",
                "annotation:item",
                "annotation:turn_image",  # of a turn they were shown
                "annotation:my_answers",
            }, name
        if statuses["participant"] == OK:  # their study's workspace and their own answers
            assert name in {
                "healthz",
                "admin:login",
                "annotation:workspace",
                "annotation:my_answers",
            }, name


def _study_urls():
    """Every annotation URL that names a study, as (name, takes an item token)."""
    for name, pattern in _named_patterns():
        params = set(pattern.pattern.regex.groupindex)
        if name.startswith("annotation:") and "study_id" in params:
            yield name, "token" in params, params - {"study_id", "token"}


def test_a_rater_reaches_their_own_items_only(world):
    """As the rater, every annotation URL that names a study, asked for with another rater's
    item of the rater's own study and with another study (and its item): 404 every time, by
    GET or — for the actions, which refuse a GET — by POST, and nothing written. Their own
    pages show no model, endpoint or judge name."""
    client = Client()
    client.force_login(world["rater"])
    study, other = world["rater_study"], world["other_study"]
    cases = [
        ("another rater's item", study, world["colleagues_item"]),
        ("another study", other, world["other_item"]),
    ]
    other_rater = other.raters.order_by("pk").first().pk
    rater_ids = {
        "annotation:rater_exclusion": other_rater,
        "annotation:qualification_override": other_rater,
    }
    before = (
        Answer.objects.count(),
        Assignment.objects.count(),
        ItemSkip.objects.count(),
        ItemFlag.objects.count(),
    )
    asked = set()
    for name, takes_token, rest in _study_urls():
        assert rest <= {"rater_id"}, f"{name}: say which real object to use for {rest}"
        for case, in_study, item in cases:
            if case == "another rater's item" and not takes_token:
                continue
            args = [in_study.pk] + ([item.token] if takes_token else [])
            args += [rater_ids[name]] if "rater_id" in rest else []
            url = reverse(name, args=args)
            response = client.get(url)
            if response.status_code == 405:
                response = client.post(url, {"idempotency_key": "matrix-r-1", "verdict": "PASS"})
            asked.add(name)
            assert response.status_code == NOT_FOUND, (case, name, url, response.status_code)
    actions = ("workspace", "next", "undo", "item", "answer", "skip", "flag", "my_answers")
    assert {f"annotation:{n}" for n in actions} <= asked
    assert (
        Answer.objects.count(),
        Assignment.objects.count(),
        ItemSkip.objects.count(),
        ItemFlag.objects.count(),
    ) == before

    secrets = {
        n
        for e in ModelEndpoint.objects.all()
        for n in (e.name, e.display_name, e.model_name)
        if len(n) >= 4
    }
    for url in (
        reverse("annotation:home"),
        reverse("annotation:workspace", args=[study.pk]),
        reverse("annotation:item", args=[study.pk, world["own_item"].token]),
        reverse("annotation:my_answers", args=[study.pk]),
    ):
        response = client.get(url)
        html = response.content.decode()
        assert response.status_code == OK and study.name in html, url
        assert not [n for n in secrets if n in html], url


def test_no_view_skips_csrf_except_the_api_which_enforces_it_for_sessions():
    """DRF marks its views csrf_exempt and checks CSRF itself for session-authenticated
    requests (SessionAuthentication); no other view may skip the check."""
    from rest_framework.views import APIView

    for name, pattern in _named_patterns():
        if getattr(pattern.callback, "csrf_exempt", False):
            view_class = getattr(pattern.callback, "cls", None)
            assert view_class is not None and issubclass(view_class, APIView), name


def test_staff_only_means_staff_or_researcher_and_groups_exist():
    assert {"Annotator", "Researcher"} <= set(Group.objects.values_list("name", flat=True))
