"""Who is who. Roles are Django groups; an admin is a staff user.

- Annotator: audits, rates and labels items; sees only their own work, never model identities.
- Researcher: reads the corpus, results and statistics; creates studies.
- Admin (``is_staff``): everything, including the Django admin.
- Participant: an account a study's participation link made for a crowd-platform participant
  (docs/annotation.md, "Running a study on Prolific"); reaches that one study's workspace only.

"Staff-like" (admin or researcher) is the bar for the corpus pages, study management and the
statistics.
"""

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.http import Http404, HttpRequest, HttpResponse
from django.utils.functional import SimpleLazyObject

ANNOTATOR = "Annotator"
RESEARCHER = "Researcher"
PARTICIPANT = "Participant"
ROLE_GROUPS = (ANNOTATOR, RESEARCHER, PARTICIPANT)


def _group_names(user: AbstractBaseUser | AnonymousUser) -> set[str]:
    """The user's role groups, read once per user object (one request's), cached on it as
    Django's ModelBackend caches permissions (``_perm_cache``)."""
    if not isinstance(user, User):  # the anonymous have no groups
        return set()
    cached: set[str] | None = getattr(user, "_role_group_names", None)
    if cached is None:
        cached = set(user.groups.values_list("name", flat=True))
        setattr(user, "_role_group_names", cached)  # noqa: B010 (not a declared attribute)
    return cached


def is_admin(user) -> bool:
    return bool(user.is_authenticated and user.is_active and user.is_staff)


def is_researcher(user) -> bool:
    return RESEARCHER in _group_names(user)


def is_annotator(user) -> bool:
    return ANNOTATOR in _group_names(user)


def is_participant(user) -> bool:
    return PARTICIPANT in _group_names(user)


def is_staff_like(user) -> bool:
    """Admins and researchers: allowed to read the corpus and manage studies."""
    return is_admin(user) or is_researcher(user)


View = TypeVar("View", bound=Callable[..., HttpResponse])


def staff_like_required(view: View) -> View:
    """Login required; then 404 for anyone who is not staff-like, so that annotators cannot even
    learn which staff URLs exist."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_staff_like(request.user):
            raise Http404("Not found")
        return view(request, *args, **kwargs)

    return cast(View, wrapped)


def role_context(request: HttpRequest) -> dict[str, object]:
    """Lazy: a partial (an htmx swap) that never shows the navigation costs no query."""
    user = getattr(request, "user", None)
    if user is None:
        return {}
    return {
        "user_is_staff_like": SimpleLazyObject(lambda: is_staff_like(user)),
        "user_is_annotator": SimpleLazyObject(lambda: is_annotator(user)),
        "user_is_admin": SimpleLazyObject(lambda: is_admin(user)),
    }
