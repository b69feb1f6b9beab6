"""Error pages that tell a visitor nothing they should not know, DEBUG or not.

``make run`` turns DEBUG on, and a development server is sometimes reachable by others. Django's
debug pages then show every setting and the request's environment (where ``DATABASE_URL`` and
``REDIS_URL`` carry their passwords) and, on a 404, every URL pattern. So:

- ``ExceptionReporterFilter`` (``DEFAULT_EXCEPTION_REPORTER_FILTER``) masks the password of every
  URL it finds in settings, the request's META (the environment, under ``runserver``) and a
  frame's local variables, and applies ``sensitive_post_parameters`` with DEBUG on too;
  ``ExceptionReporter`` (``DEFAULT_EXCEPTION_REPORTER``) masks any left in the rendered report
  (exception messages, the reprs of objects);
- ``page_not_found`` (``handler404``) shows Django's technical 404 only to staff with DEBUG on,
  and ``DebugNotFoundMiddleware`` sends a 404 to it when DEBUG is on (Django then skips the
  handler and shows the technical page to anyone).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotFound,
    JsonResponse,
)
from django.template import loader
from django.urls import Resolver404
from django.views import debug

logger = logging.getLogger(__name__)
_ADMIN_PREFIX = "/admin/"  # proactweb/urls.py

# scheme://user:PASSWORD@host — the password runs to the first "@" that is followed by a host
# (no further "@" before the path, query, a comma of a host list, or the end), which is where
# urllib.parse (and so dj-database-url and kombu) ends it: a raw "@" in a password stays masked.
_URL_PASSWORD = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@\s'\"]*:)"
    r"(?P<password>[^\s'\"]+?)"
    r"(?=@[^@\s'\"/?#,]*(?:[/?#,\s'\"]|$))"
)


def mask_url_passwords(text: str, substitute: str) -> str:
    """``text`` with the password of every URL in it replaced by ``substitute``."""
    return _URL_PASSWORD.sub(lambda m: m["head"] + substitute, text)


class ExceptionReporterFilter(debug.SafeExceptionReporterFilter):
    """Django's filter (settings named like a secret are hidden), plus URL passwords masked
    wherever a string is shown, and active whatever DEBUG is."""

    def is_active(self, request) -> bool:
        # Django turns the sensitive_post_parameters / sensitive_variables markers off with
        # DEBUG on; a login form's password would then be on the page.
        return True

    def cleanse_setting(self, key, value):
        # Django's method recurses into dicts, lists and tuples through self, so every string
        # nested in a setting (DATABASES, broker transport options) passes here.
        cleansed = super().cleanse_setting(key, value)
        # type(), not isinstance(): a lazy object claims str's class without being evaluated.
        if issubclass(type(cleansed), str):
            return mask_url_passwords(cleansed, self.cleansed_substitute)
        return cleansed

    def get_traceback_frame_variables(self, request, tb_frame):
        return [
            (name, self.cleanse_setting("", value))
            for name, value in super().get_traceback_frame_variables(request, tb_frame)
        ]


class ExceptionReporter(debug.ExceptionReporter):
    """Django's report, with every URL password masked in what it renders: also those the
    filter never sees as strings, such as an exception's message (a connection error may quote
    the URL it tried) or the repr of an object in a frame's variables."""

    def get_traceback_html(self):
        return mask_url_passwords(super().get_traceback_html(), self.filter.cleansed_substitute)

    def get_traceback_text(self):
        return mask_url_passwords(super().get_traceback_text(), self.filter.cleansed_substitute)


API_PREFIX = "/api/"


def _is_admin(request: HttpRequest) -> bool:
    # Imported here: Django's logging set-up imports this module (the error e-mails' reporter)
    # before the apps, and so the user model, are loaded.
    from core.roles import is_admin

    user = getattr(request, "user", None)  # none if the request failed before authentication
    return user is not None and is_admin(user)


def page_not_found(request: HttpRequest, exception: Http404) -> HttpResponse:
    """The 404 page: with DEBUG on, staff get Django's technical page (the URL patterns tried);
    everyone else, always, the site's plain one."""
    if settings.DEBUG and _is_admin(request):
        return debug.technical_404_response(request, exception)
    if request.path.startswith(API_PREFIX):  # API clients read JSON errors (the schema says so)
        return JsonResponse({"detail": "Not found."}, status=404)
    body = loader.render_to_string("404.html", {"request_path": request.path}, request)
    return HttpResponseNotFound(body)


class DebugNotFoundMiddleware:
    """With DEBUG on, Django answers a 404 with its technical page instead of calling
    ``handler404``; this sends it to the handler after all. Off (no-op) without DEBUG.

    A view's ``Http404`` arrives in ``process_exception``; a path that matches no pattern never
    reaches a view, so it is known by ``request.resolver_match`` being unset on a 404. Placed
    after the authentication middleware: the handler needs ``request.user``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            settings.DEBUG
            and response.status_code == 404
            and request.resolver_match is None
            and not _is_admin(request)
        ):
            return page_not_found(request, Resolver404({"path": request.path_info}))
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> Any:
        if settings.DEBUG and isinstance(exception, Http404):
            return page_not_found(request, exception)
        return None


class AdminBadLookupMiddleware:
    """A 400, not a 500, for an admin page asked with a lookup the database cannot hold.

    Django's admin passes list-filter and ``_to_field`` values through to the query: an integer
    beyond 64 bits (SQLite cannot bind it; a date hierarchy's year is refused by datetime), a
    NUL byte in a text lookup (PostgreSQL refuses NUL in text) and an empty ``_to_field`` on a
    change or delete page (``ModelAdmin.get_object`` asks for a field named "") each raised
    from inside admin code. Only reading requests are answered so: on a GET nothing was
    written, and the same errors from a write, or outside the admin, stay errors to fix."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> Any:
        from django.core.exceptions import FieldDoesNotExist
        from django.db import DataError

        if request.method not in ("GET", "HEAD") or not request.path.startswith(_ADMIN_PREFIX):
            return None
        if not isinstance(exception, (OverflowError, DataError, FieldDoesNotExist)):
            return None
        logger.warning("admin lookup refused (%s): %s", type(exception).__name__, request.path)
        return HttpResponseBadRequest(
            "Bad request: a filter or lookup in this address is not a value the database can "
            "hold (a number too large, a NUL character, an empty field name).",
            content_type="text/plain; charset=utf-8",
        )
