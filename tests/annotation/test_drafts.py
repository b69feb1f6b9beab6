"""Workspace drafts (static/js/drafts.js) are keyed by an opaque per-annotator value the
workspace carries; the browser behaviour itself is in test_browser.py (issue #14, F7)."""

import re

import pytest
from django.urls import reverse
from django.utils.crypto import salted_hmac

pytestmark = pytest.mark.django_db

OWNER = re.compile(r'data-draft-owner="([0-9a-f]{16})"')


def draft_owner(client, user, study) -> str:
    client.force_login(user)
    response = client.get(reverse("annotation:workspace", args=[study.pk]))
    assert response.status_code == 200
    return OWNER.search(response.content.decode()).group(1)


def test_each_annotator_has_their_own_opaque_draft_owner(client, make_study, make_annotators):
    one, two = make_annotators(2)
    study = make_study(annotators=[one, two])
    first = draft_owner(client, one, study)
    assert draft_owner(client, one, study) == first  # a new session: the same owner
    other = draft_owner(client, two, study)
    assert other != first
    for user, owner in ((one, first), (two, other)):
        assert user.username not in owner and owner != str(user.pk)


def test_the_owner_is_the_keyed_hash_of_the_account_under_the_current_secret(
    client, make_study, make_annotators, settings
):
    user = make_annotators(1)[0]
    study = make_study(annotators=[user], overlap=1)
    owner = draft_owner(client, user, study)
    assert owner == salted_hmac("annotation.draft-owner", str(user.pk)).hexdigest()[:16]
    settings.SECRET_KEY = "another secret key, of fifty characters or so, for the test"
    again = draft_owner(client, user, study)  # kept per process, but never under an old key
    assert again != owner
    assert again == salted_hmac("annotation.draft-owner", str(user.pk)).hexdigest()[:16]


def test_every_page_carries_the_logout_form_that_forgets_drafts(
    client, make_study, make_annotators
):
    user = make_annotators(1)[0]
    client.force_login(user)
    page = client.get(reverse("annotation:home")).content.decode()
    assert "data-logout" in page and "js/drafts.js" in page


def test_logging_out_tells_the_browser_to_clear_the_sites_storage(client, django_user_model):
    user = django_user_model.objects.create_user("leaving", password="x")
    client.force_login(user)
    response = client.post(reverse("logout"))
    assert response["Clear-Site-Data"] == '"storage"'
    assert "_auth_user_id" not in client.session
