"""Request types for views: what the middleware and the login decorators guarantee, said to
the type checker once."""

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """A request through django-htmx's middleware (every request here: settings.MIDDLEWARE)."""

    htmx: HtmxDetails


class SignedInRequest(HtmxHttpRequest):
    """A request of a signed-in person: a view behind ``login_required`` (or the staff
    decorator, or the admin's own check)."""

    user: User


def signed_in_user(request: HttpRequest) -> User:
    """The request's user, who must be signed in (views that ``login_required`` guards)."""
    user = request.user
    if not isinstance(user, User):
        raise PermissionDenied("sign in first")
    return user
