from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from stats import api

app_name = "stats_api"

urlpatterns = [
    *(
        path(f"tables/{name}/", view.as_view(), name=f"table-{name}")
        for name, view in api.TABLE_VIEWS.items()
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
