"""The site's own pages: where a person starts, the health check, and logging out."""

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET

from core.roles import is_staff_like


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Send each person to their own starting page."""
    if is_staff_like(request.user):
        return redirect("benchmark:dialogue_list")
    return redirect("annotation:home")


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for load balancers and compose healthchecks: the database answers."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


class LogoutView(auth_views.LogoutView):
    """Django's logout, also telling the browser to clear this site's storage: the workspace
    keeps answer drafts there (static/js/drafts.js), and on a shared browser the next person
    must not find them. The logout form clears them too; the header covers a browser whose
    script did not run. Browsers honour it on HTTPS and on localhost."""

    def post(self, request, *args, **kwargs):
        response = super().post(request, *args, **kwargs)
        response["Clear-Site-Data"] = '"storage"'
        return response
