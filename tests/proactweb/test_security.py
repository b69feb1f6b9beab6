"""Production security settings, login throttling and CSRF on every form that changes state."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from tests.proactweb.test_settings import PRODUCTION_ENV, _manage

pytestmark = pytest.mark.django_db


def test_production_settings_are_secure():
    """What ``check --deploy`` does not check, or checks only as a warning, with the values a
    production deployment uses (README: DEBUG=0, a real SECRET_KEY, TLS)."""
    names = [
        "DEBUG",
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SESSION_COOKIE_HTTPONLY",
        "SECURE_HSTS_SECONDS",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS",
        "SECURE_SSL_REDIRECT",
        "SECURE_CONTENT_TYPE_NOSNIFF",
        "X_FRAME_OPTIONS",
        "ALLOWED_HOSTS",
        "MIDDLEWARE",
        "AXES_FAILURE_LIMIT",
    ]
    script = (
        "import json; from django.conf import settings as s; "
        f"print(json.dumps({{k: getattr(s, k) for k in {names!r}}}, default=str))"
    )
    result = _manage("shell", "-c", script, env_overrides=PRODUCTION_ENV)
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout.strip().splitlines()[-1])
    assert values["DEBUG"] is False
    assert values["SESSION_COOKIE_SECURE"] and values["CSRF_COOKIE_SECURE"]
    assert values["SESSION_COOKIE_HTTPONLY"]
    assert values["SECURE_HSTS_SECONDS"] >= 31_536_000 and values["SECURE_HSTS_INCLUDE_SUBDOMAINS"]
    assert values["SECURE_SSL_REDIRECT"] and values["SECURE_CONTENT_TYPE_NOSNIFF"]
    assert values["X_FRAME_OPTIONS"] == "DENY" and "*" not in values["ALLOWED_HOSTS"]
    for middleware in (
        "django.middleware.security.SecurityMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
        "axes.middleware.AxesMiddleware",
    ):
        assert middleware in values["MIDDLEWARE"]
    assert 1 <= values["AXES_FAILURE_LIMIT"] <= 10


def test_a_secure_request_gets_hsts_and_the_cookies_are_secure(client, settings, admin_user):
    settings.SECURE_HSTS_SECONDS = 31_536_000
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    response = client.get(reverse("login"), secure=True)
    assert "max-age=31536000" in response["Strict-Transport-Security"]
    assert response.cookies["csrftoken"]["secure"]
    response = client.post(
        reverse("login"),
        {"username": admin_user.username, "password": "pw-" + admin_user.username},
        secure=True,
    )
    assert response.status_code == 302
    session = response.cookies["sessionid"]
    assert session["secure"] and session["httponly"]


# --- Login throttling ---------------------------------------------------------------------------


def _login(client, username, password, url="login"):
    return client.post(reverse(url), {"username": username, "password": password})


def test_repeated_failed_logins_lock_that_user_out_from_that_address(client, settings):
    user = get_user_model().objects.create_user("victim", password="right-password-1")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = _login(client, "victim", "wrong")
        assert response.status_code == 200  # the form again, with its error
    locked = _login(client, "victim", "wrong")
    assert locked.status_code == 429
    assert b"Too many failed logins" in locked.content
    # Even the right password is refused now, and nobody is logged in.
    assert _login(client, "victim", "right-password-1").status_code == 429
    assert "_auth_user_id" not in client.session
    # Another user from the same address is not locked out (no denial of service by guessing).
    get_user_model().objects.create_user("bystander", password="right-password-2")
    assert _login(Client(), "bystander", "right-password-2").status_code == 302
    # The admin's login is throttled alike.
    admin_login = _login(Client(), "victim", "right-password-1", url="admin:login")
    assert admin_login.status_code == 429
    assert user.is_active  # a lockout is not a deactivation


def test_a_successful_login_resets_the_count(client, settings):
    get_user_model().objects.create_user("forgetful", password="right-password-3")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        _login(client, "forgetful", "wrong")
    assert _login(client, "forgetful", "right-password-3").status_code == 302
    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _login(client, "forgetful", "wrong").status_code == 200


def test_an_overlong_username_is_a_failed_login_that_counts(client, settings):
    """On PostgreSQL a username longer than axes' column (255) was a 500 for anyone: it is
    recorded cut to the column, and throttled like any other. (A NUL character never gets that
    far: the form refuses it, no password is tried.)"""
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _login(client, "x" * 10_000, "wrong").status_code == 200
    assert _login(client, "x" * 10_000, "wrong").status_code == 429
    assert _login(client, "a\x00b", "wrong").status_code == 200


# --- CSRF ---------------------------------------------------------------------------------------


def test_state_changing_forms_refuse_a_post_without_the_csrf_token(admin_user, researcher):
    strict = Client(enforce_csrf_checks=True)
    assert _login(strict, admin_user.username, "pw-" + admin_user.username).status_code == 403
    strict.force_login(admin_user)
    for url in (
        reverse("admin:benchmark_dialogue_import"),
        reverse("admin:benchmark_evaluationrun_add"),
        reverse("logout"),
    ):
        assert strict.post(url, {}).status_code == 403, url
    strict.force_login(researcher)
    assert strict.post(reverse("stats:benchmark_scores"), {}).status_code == 403
