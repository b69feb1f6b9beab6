from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from stats import api

app_name = "stats_api"

urlpatterns = [
    # One route for every table: the registry is read per request (stats.api.TableView).
    path("tables/<slug:name>/", api.TableView.as_view(), name="table"),
    # Before the raw exports' route, which would take these names too.
    re_path(
        r"^exports/(?P<name>proposal-(?:labels|pairs))\.jsonl$",
        api.ProposalExportView.as_view(),
        name="proposal-export",
    ),
    path("exports/<slug:name>.<str:fmt>", api.RawExportView.as_view(), name="raw-export"),
    path(
        "schema/",
        SpectacularAPIView.as_view(permission_classes=[api.IsStaffLike]),
        name="schema",
    ),
    path(
        "docs/",
        SpectacularSwaggerView.as_view(
            url_name="stats_api:schema", permission_classes=[api.IsStaffLike]
        ),
        name="docs",
    ),
]
