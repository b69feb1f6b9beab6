"""The site's own pages: where a person starts, and the health check."""

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
