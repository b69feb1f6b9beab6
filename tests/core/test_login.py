"""Signing in and out through the pages: the session names the user, logging out ends it."""

from importlib import import_module

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db


def test_logging_in_and_out_through_the_pages(client, annotator):
    store = import_module(settings.SESSION_ENGINE).SessionStore
    response = client.post(
        "/accounts/login/", {"username": annotator.username, "password": "pw-" + annotator.username}
    )
    assert response.status_code == 302
    assert client.get("/annotate/").status_code == 200
    key = client.cookies[settings.SESSION_COOKIE_NAME].value
    assert store(key).get("_auth_user_id") == str(annotator.pk)
    client.post("/accounts/logout/")
    assert store(key).load() == {}
    assert client.get("/annotate/").status_code == 302
