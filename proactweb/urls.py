from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("", include("core.urls")),
    path("corpus/", include("benchmark.urls")),
    path("annotate/", include("annotation.urls")),
    path("stats/", include("stats.urls")),
    path("api/v1/", include("stats.api_urls")),
    path("admin/", admin.site.urls),
]

# The plain 404 page for everyone; Django's URL list only for staff with DEBUG on (core.errors).
handler404 = "core.errors.page_not_found"
