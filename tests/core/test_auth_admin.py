"""Django's own auth admin: a group's permissions and a user's groups posted with an id no
64-bit integer can be are refused on the field, not a 500 (SQLite cannot bind such an id;
``core/lookups.py`` drops such ids from every integer ``in`` lookup)."""

import pytest
from django.contrib.auth.models import Group

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("value", ["9" * 30, "-" + "9" * 25, "0"])
def test_a_group_with_an_impossible_permission_id_is_refused_on_the_field(
    client_for, admin_user, value
):
    response = client_for(admin_user).post(
        "/admin/auth/group/add/", {"name": "editors", "permissions": value}
    )
    assert response.status_code == 200
    assert "is not one of the available choices" in response.content.decode()
    assert not Group.objects.filter(name="editors").exists()


def test_a_group_is_still_added_with_real_permissions(client_for, admin_user):
    from django.contrib.auth.models import Permission

    permission = Permission.objects.order_by("pk").first()
    response = client_for(admin_user).post(
        "/admin/auth/group/add/", {"name": "editors", "permissions": [str(permission.pk)]}
    )
    assert response.status_code == 302
    assert list(Group.objects.get(name="editors").permissions.all()) == [permission]


def test_a_user_with_an_impossible_group_id_is_refused_on_the_field(client_for, admin_user):
    response = client_for(admin_user).post(
        f"/admin/auth/user/{admin_user.pk}/change/",
        {"username": admin_user.username, "groups": "9" * 30, "date_joined_0": "2026-01-01"},
    )
    assert response.status_code == 200
    assert "is not one of the available choices" in response.content.decode()
