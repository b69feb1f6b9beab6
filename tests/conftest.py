import importlib
import os

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import Group

from core.roles import ANNOTATOR, RESEARCHER
from tests import parallel


def _user(django_user_model, username: str, *, staff: bool = False, group: str | None = None):
    user = django_user_model.objects.create_user(
        username=username, password="pw-" + username, is_staff=staff, is_superuser=staff
    )
    if group:
        user.groups.add(Group.objects.get(name=group))
    return user


@pytest.fixture
def admin_user(django_user_model):
    return _user(django_user_model, "alice-admin", staff=True)


@pytest.fixture
def researcher(django_user_model):
    return _user(django_user_model, "rita-researcher", group=RESEARCHER)


@pytest.fixture
def annotator(django_user_model):
    return _user(django_user_model, "ann-annotator", group=ANNOTATOR)


@pytest.fixture
def study_rater(django_user_model):
    """An annotator who is (once a test adds them to one) a rater in a study: the annotator
    persona above is in none."""
    return _user(django_user_model, "ravi-rater", group=ANNOTATOR)


@pytest.fixture
def outsider(django_user_model):
    """Logged in, but in no role group."""
    return _user(django_user_model, "otto-outsider")


@pytest.fixture
def client_for(client):
    def login(user):
        client.force_login(user)
        return client

    return login


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config, specs):
    """``make test`` runs the suite in several processes (pytest-xdist): each gets a Redis
    database of its own, before it starts (tests/parallel.py)."""
    parallel.give_each_process_its_redis(specs, os.environ.get("REDIS_URL"))


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """PBKDF2 is slow by design; tests need no protection from brute force."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _migrated_rows_for_transactional_tests(request, django_db_blocker):
    """A transactional test ends by emptying every table (Django's flush), including the rows
    the migrations seed: the five domains, the 24 styles and the role groups. Put them back
    (the seeding is idempotent) before each transactional test, so that none depends on
    running before another one."""
    marker = request.node.get_closest_marker("django_db")
    transactional = (marker is not None and marker.kwargs.get("transaction")) or any(
        name in request.fixturenames for name in ("transactional_db", "live_server")
    )
    if not transactional:
        return
    request.getfixturevalue("transactional_db")
    seeds = importlib.import_module("benchmark.migrations.0002_seed_domains_and_styles")
    roles = importlib.import_module("annotation.migrations.0001_roles")
    with django_db_blocker.unblock():
        seeds.seed(django_apps, None)
        roles.create_groups(django_apps, None)


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium for one test module (tests/browser.py)."""
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM, LAUNCH_ARGS

    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium (.ci/run does)")
    # Playwright's sync API keeps an event loop running in this thread for as long as the
    # browser lives; the ORM calls the tests (and the database teardown) make meanwhile are
    # ordinary synchronous calls, which Django would otherwise refuse.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS
            )
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous
