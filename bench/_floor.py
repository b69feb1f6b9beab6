"""The floor under ``annotation_inproc.py``'s figure: a signed-in htmx POST through the site's
middleware, answered with a one-line template — what Django and the project's middleware spend
on any such request (session and user read, form body parsed, a template rendered) before an
answer's own work. Mounted beside the site's URLs for that benchmark only (``ROOT_URLCONF``)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.template import engines
from django.urls import include, path
from django.views.decorators.http import require_POST

PAGE = engines["django"].from_string(
    '<section id="workspace" data-item="floor">{{ request.user.pk }}{% csrf_token %}</section>'
)


@login_required
@require_POST
def floor(request: HttpRequest) -> HttpResponse:
    return HttpResponse(PAGE.render({}, request))


urlpatterns = [path("bench-floor", floor), path("", include("proactweb.urls"))]
