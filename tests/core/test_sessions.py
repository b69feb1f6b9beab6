"""The session store (core.sessions) and the login backend (core.auth) read with plain SQL
(core/sql.py): a live session loads, an expired, deleted or malformed one does not (and is
never revived), the user loaded is Django's, and the browser login path works end to end."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.utils import timezone

from core.sessions import SessionStore

pytestmark = pytest.mark.django_db


def test_the_project_uses_it():
    assert settings.SESSION_ENGINE == "core.sessions"


def test_a_saved_session_loads_with_its_data():
    store = SessionStore()
    store["answer"] = {"n": 42, "text": "ünïcode"}
    store.create()
    again = SessionStore(store.session_key)
    assert again["answer"] == {"n": 42, "text": "ünïcode"}
    assert again.session_key == store.session_key


def test_an_expired_session_is_empty_and_gets_a_new_key_when_saved():
    store = SessionStore()
    store["k"] = "v"
    store.create()
    Session.objects.filter(pk=store.session_key).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )
    again = SessionStore(store.session_key)
    assert again.load() == {}
    assert again.session_key is None
    again["k"] = "w"
    again.save()
    assert again.session_key != store.session_key


@pytest.mark.parametrize("key", [None, "", "short", "x" * 41, "' OR 1=1 --", "no-such-session"])
def test_a_missing_or_malformed_key_loads_nothing(key):
    assert SessionStore(key).load() == {}


def test_logging_in_and_out_through_the_pages(client, annotator):
    response = client.post(
        "/accounts/login/", {"username": annotator.username, "password": "pw-" + annotator.username}
    )
    assert response.status_code == 302
    assert client.get("/annotate/").status_code == 200
    key = client.cookies[settings.SESSION_COOKIE_NAME].value
    assert SessionStore(key).get("_auth_user_id") == str(annotator.pk)
    client.post("/accounts/logout/")
    assert SessionStore(key).load() == {}
    assert client.get("/annotate/").status_code == 302


def test_the_login_backend_loads_the_sessions_user_as_djangos_does(client, annotator):
    from django.contrib.auth.backends import ModelBackend as DjangoBackend

    from core.auth import ModelBackend

    ours, django = ModelBackend(), DjangoBackend()
    loaded = ours.get_user(str(annotator.pk))
    expected = django.get_user(str(annotator.pk))
    fields = [f.attname for f in type(annotator)._meta.concrete_fields]
    assert [getattr(loaded, f) for f in fields] == [getattr(expected, f) for f in fields]
    for bad in ["abc", "", "-1", "999999999", "1 OR 1=1"]:
        assert ours.get_user(bad) is None, bad
    type(annotator).objects.filter(pk=annotator.pk).update(is_active=False)
    assert ours.get_user(str(annotator.pk)) is None  # as Django's: inactive users are out


def test_a_login_names_this_backend_in_the_session(client, annotator):
    client.post(
        "/accounts/login/",
        {"username": annotator.username, "password": "pw-" + annotator.username},
    )
    key = client.cookies[settings.SESSION_COOKIE_NAME].value
    assert SessionStore(key)["_auth_user_backend"] == "core.auth.ModelBackend"
    assert settings.AUTHENTICATION_BACKENDS[-1] == "core.auth.ModelBackend"
