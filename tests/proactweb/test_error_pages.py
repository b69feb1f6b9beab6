"""The error pages with DEBUG on (``make run``'s default), through the whole stack: the 500 page
masks every URL password (settings, the environment in META, a frame's variables) but still
shows the host; the 404 page lists the URL patterns to staff only (core/errors.py)."""

import secrets

import pytest
from django.http import HttpResponse
from django.test import Client
from django.urls import include, path
from django.views.decorators.debug import sensitive_post_parameters

from core.errors import mask_url_passwords

pytestmark = pytest.mark.django_db

# Made up per run: the page shows the source around each frame, so a password written out
# here would be on it whatever the filter does.
PASSWORDS = DB_PW, REDIS_PW, SENTINEL_PW, LOCAL_PW, FORM_PW = [
    secrets.token_hex(8) for _ in range(5)
]
DB_URL = f"postgres://pbuser:{DB_PW}@db.example.org:5432/proactbench"
REDIS_URL = f"redis://:{REDIS_PW}@cache.example.org:6379/0"
BROKER_OPTION_URL = f"redis://sentinel:{SENTINEL_PW}@sentinel.example.org:26379"
HOSTS = ("db.example.org", "cache.example.org", "sentinel.example.org")


@sensitive_post_parameters("password")
def failing_view(request):
    broker_url = f"amqp://guest:{LOCAL_PW}@mq.example.org//"  # a frame variable
    raise RuntimeError(f"cannot reach the broker at {broker_url.split('@')[1]}")


def quoting_view(request):
    try:
        raise ConnectionError(f"cannot connect to {REDIS_URL}")
    except ConnectionError as exc:
        raise RuntimeError(f"the broker at {DB_URL} is down") from exc


def fine_view(request):
    return HttpResponse("ok")


urlpatterns = [
    path("boom/", failing_view),
    path("fine/", fine_view),
    path("quoting/", quoting_view),
    path("", include("proactweb.urls")),
]


@pytest.fixture
def debug_on(settings):
    settings.DEBUG = True
    return settings


def test_the_debug_500_page_masks_url_passwords_but_shows_the_hosts(debug_on):
    debug_on.ROOT_URLCONF = __name__
    debug_on.REDIS_URL = REDIS_URL
    debug_on.CELERY_BROKER_URL = REDIS_URL
    debug_on.CELERY_BROKER_TRANSPORT_OPTIONS = {"sentinels": [{"url": BROKER_OPTION_URL}]}
    debug_on.DATABASE_URL = DB_URL
    client = Client(raise_request_exception=False)
    # Under runserver, META holds the process environment: DATABASE_URL and REDIS_URL with it.
    response = client.post(
        "/boom/",
        {"password": FORM_PW, "username": "ann"},
        DATABASE_URL=DB_URL,
        REDIS_URL=REDIS_URL,
    )
    assert response.status_code == 500
    page = response.content.decode()
    assert "RuntimeError" in page and "broker_url" in page  # it is Django's technical page
    leaked = [p for p in PASSWORDS if p in page]
    assert not leaked, leaked
    assert all(host in page for host in HOSTS), [h for h in HOSTS if h not in page]
    assert "mq.example.org" in page


def test_the_debug_500_page_masks_url_passwords_in_exception_messages(debug_on):
    debug_on.ROOT_URLCONF = __name__
    response = Client(raise_request_exception=False).get("/quoting/")
    assert response.status_code == 500
    page = response.content.decode()
    assert "the broker at postgres://pbuser:" in page and "cannot connect to redis://" in page
    assert DB_PW not in page and REDIS_PW not in page


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        # Named, not shown: the test's id must be the same in every process of a parallel
        # run, and the password is made up per process.
        pytest.param(
            DB_URL, "postgres://pbuser:***@db.example.org:5432/proactbench", id="made-up-password"
        ),
        ("redis://:p@ss@h:1/0", "redis://:***@h:1/0"),  # urllib ends a password at the last @
        ("postgres://u:pa/ss@h/db", "postgres://u:***@h/db"),
        ("redis://:a@h1,redis://:b@h2", "redis://:***@h1,redis://:***@h2"),
        ("postgres://postgres@127.0.0.1:5432/x", "postgres://postgres@127.0.0.1:5432/x"),
        ("see https://example.org/a?b=c@d", "see https://example.org/a?b=c@d"),
        ("sqlite:////var/db.sqlite3", "sqlite:////var/db.sqlite3"),
    ],
)
def test_a_url_password_is_masked_and_nothing_else(url, masked):
    assert mask_url_passwords(url, "***") == masked


def _not_found(client, url):
    response = client.get(url)
    assert response.status_code == 404, url
    return response.content.decode()


URL_LIST = "Django tried these URL patterns"


@pytest.mark.parametrize(
    "url",
    [
        "/no-such-page/",  # matches no pattern
        "/corpus/",  # a staff page: the view raises Http404 for an annotator
        "/corpus/dialogues/999999/",
    ],
)
def test_with_debug_on_only_staff_see_the_url_patterns(debug_on, client, annotator, url):
    anonymous = Client()
    if url == "/no-such-page/":
        page = _not_found(anonymous, url)
        assert URL_LIST not in page and "healthz" not in page and "Not found" in page
    client.force_login(annotator)
    page = _not_found(client, url)
    assert URL_LIST not in page and "healthz" not in page and "Not found" in page


def test_with_debug_on_staff_see_the_url_patterns(debug_on, client, admin_user):
    client.force_login(admin_user)
    for url in ("/no-such-page/", "/corpus/dialogues/999999/"):
        page = _not_found(client, url)
        assert URL_LIST in page and "healthz" in page, url


def test_with_debug_off_everyone_gets_the_plain_page(client, admin_user):
    for who in (None, admin_user):
        if who is not None:
            client.force_login(who)
        page = _not_found(client, "/no-such-page/")
        assert URL_LIST not in page and "Not found" in page


def test_the_404_page_does_not_render_the_path_as_markup(client):
    page = _not_found(client, "/<script>alert(1)</script>/")
    assert "<script>alert(1)" not in page


def test_with_debug_off_a_500_is_the_plain_page(settings):
    settings.ROOT_URLCONF = __name__
    response = Client(raise_request_exception=False).get("/boom/")
    assert response.status_code == 500
    page = response.content.decode()
    assert "Something went wrong on our side" in page
    assert "RuntimeError" not in page and LOCAL_PW not in page
