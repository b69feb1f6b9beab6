"""The workspace's URLs (``views.workspace_urls``) are reverse()'s, reversed once per study,
and the workspace is written byte for byte as it was with a ``{% url %}`` tag for each: the
templates as they were are kept in ``workspace_before/``."""

import re
from pathlib import Path

import pytest
from django.test import override_settings
from django.urls import NoReverseMatch, reverse, set_script_prefix

from annotation.views import ITEM_URLS, STUDY_URLS, workspace_urls
from tests.annotation.test_workspace_pages import pairwise_answer, token_of

BEFORE = Path(__file__).parent / "workspace_before"
HTMX = {"HX-Request": "true"}
# Random in every response: the CSRF token's mask and a fresh form's idempotency key.
RANDOM = re.compile(
    rb'name="(?:csrfmiddlewaretoken|idempotency_key)" value="[^"]+"|"X-CSRFToken": "[^"]+"'
)


@pytest.mark.parametrize("prefix", ["/", "/tokens/a/b/"])
def test_the_urls_are_reverses(prefix):
    set_script_prefix(prefix)
    try:
        for study_id in (1, 7, 123456):
            for token in ("abcDEF-_09", "a", "b", "ab", "token"):
                urls = workspace_urls(study_id, token)
                for name in STUDY_URLS:
                    assert getattr(urls, name) == reverse(f"annotation:{name}", args=[study_id])
                for name in ITEM_URLS:
                    expected = reverse(f"annotation:{name}", args=[study_id, token])
                    assert getattr(urls, name) == expected
            assert workspace_urls(study_id, None).answer == ""
    finally:
        set_script_prefix("/")


def test_a_token_that_is_no_slug_is_refused_as_reverse_refuses_it():
    with pytest.raises(NoReverseMatch):
        workspace_urls(1, "a/b")


def _before(settings):
    """The project's template settings with ``workspace_before/`` looked in first."""
    templates = [dict(settings.TEMPLATES[0])]
    templates[0]["DIRS"] = [BEFORE, *templates[0]["DIRS"]]
    return override_settings(TEMPLATES=templates)


def _both(settings, request):
    """A response's bytes with the templates as they are and as they were."""
    now = request()
    with _before(settings):
        before = request()
    return RANDOM.sub(b"", now.content), RANDOM.sub(b"", before.content), now


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["pairwise", "direct_rating", "failure_mode"])
def test_the_workspace_is_written_as_with_url_tags(
    kind, settings, make_study, make_annotators, client
):
    users = make_annotators(1)
    study = make_study(kind, annotators=users, overlap=1, item_time_limit_s=600)
    client.force_login(users[0])
    workspace = reverse("annotation:workspace", args=[study.pk])
    start_now, start_before, _ = _both(settings, lambda: client.get(workspace))
    assert start_now == start_before and b"Start" in start_now
    held = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    token = token_of(held)
    fresh_now, fresh_before, _ = _both(settings, lambda: client.get(workspace, headers=HTMX))
    assert fresh_now == fresh_before and b"data-time-left-s" in fresh_now
    answer_url = reverse("annotation:answer", args=[study.pk, token])
    bad = {"idempotency_key": "abcdefgh12"}  # nothing answered: errors
    errors_now, errors_before, _ = _both(
        settings, lambda: client.post(answer_url, bad, headers=HTMX)
    )
    assert errors_now == errors_before and b"errorlist" in errors_now
    if kind == "pairwise":
        client.post(answer_url, pairwise_answer(held), headers=HTMX)
        item = reverse("annotation:item", args=[study.pk, token])
        answered_now, answered_before, _ = _both(settings, lambda: client.get(item, headers=HTMX))
        assert answered_now == answered_before and b"Your answer" in answered_now
        assert b"Undo last answer" in answered_now
