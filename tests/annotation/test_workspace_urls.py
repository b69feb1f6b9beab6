"""The workspace's URLs (``views.workspace_urls``) are reverse()'s, reversed once per study.
The pages that use them are checked by following their links and forms (test_workspace_pages,
the browser tests)."""

import pytest
from django.urls import NoReverseMatch, reverse, set_script_prefix

from annotation.views import ITEM_URLS, STUDY_URLS, workspace_urls


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
