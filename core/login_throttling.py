"""The username django-axes records for a login attempt (``AXES_USERNAME_CALLABLE``).

As axes reads it (the form's ``username``, from the credentials or the POST), cut to the 255
characters its column holds and without NUL characters, which PostgreSQL cannot store: an
anonymous POST with a longer or stranger username must be a failed login, not a server error.
"""

from django.http import HttpRequest

AXES_USERNAME_MAX_LENGTH = 255


def throttled_username(request: HttpRequest | None, credentials: dict | None) -> str | None:
    if credentials:
        username = credentials.get("username")
    elif request is not None:
        username = getattr(request, "data", request.POST).get("username")
    else:
        username = None
    if not isinstance(username, str):
        return username
    return username.replace("\x00", "")[:AXES_USERNAME_MAX_LENGTH]
