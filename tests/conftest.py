import pytest
from django.contrib.auth.models import Group

from annotation.roles import ANNOTATOR, RESEARCHER


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
def outsider(django_user_model):
    """Logged in, but in no role group."""
    return _user(django_user_model, "otto-outsider")


@pytest.fixture
def client_for(client):
    def login(user):
        client.force_login(user)
        return client

    return login


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """PBKDF2 is slow by design; tests need no protection from brute force."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
