"""``id__in`` with a value no integer column can hold matches nothing (as ``exact`` does in
Django) instead of failing inside whatever asked: an admin form's many-to-many field posted an
id beyond 64 bits is "not one of the available choices", not a 500 (SQLite cannot bind it)."""

import pytest
from django.contrib.auth.models import Group, Permission

from benchmark.models import EvaluationRun, ModelEndpoint

pytestmark = pytest.mark.django_db
HUGE = int("9" * 30)


def test_out_of_range_ids_in_an_in_lookup_match_nothing():
    endpoint = ModelEndpoint.objects.create(
        name="e", display_name="E", provider="replay", model_name="e"
    )
    endpoints = ModelEndpoint.objects.all()
    assert list(endpoints.filter(pk__in=[HUGE, endpoint.pk, -HUGE])) == [endpoint]
    assert list(endpoints.filter(pk__in=[HUGE])) == []
    assert list(endpoints.exclude(pk__in=[HUGE])) == [endpoint]
    assert Permission.objects.filter(pk__in=[str(HUGE)]).count() == 0


def test_an_admin_many_to_many_field_posted_a_huge_id_is_a_form_error(admin_client):
    page = admin_client.post("/admin/auth/group/add/", {"name": "g", "permissions": str(HUGE)})
    assert (
        page.status_code == 200 and "is not one of the available choices" in page.content.decode()
    )
    assert not Group.objects.filter(name="g").exists()
    run = EvaluationRun.objects.create(name="r", status="done")
    for form in ("pairwise", "rejudge"):
        page = admin_client.post(
            f"/admin/benchmark/evaluationrun/{run.pk}/{form}/",
            {"judges": [str(HUGE)], "pairs": "models"},
        )
        assert page.status_code == 200, form
        assert "is not one of the available choices" in page.content.decode()
