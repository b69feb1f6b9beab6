from django.contrib import admin
from django.urls import include, path

from annotation.views import participate

urlpatterns = [
    path("", include("core.urls")),
    path("corpus/", include("benchmark.urls")),
    path("annotate/", include("annotation.urls")),
    # A study's participation link for a crowd platform (docs/annotation.md, "Running a study
    # on Prolific"): an opaque token; <slug:> matches every real one.
    path("participate/<slug:token>/", participate, name="participate"),
    path("stats/", include("stats.urls")),
    path("api/v1/", include("stats.api_urls")),
    path("admin/", admin.site.urls),
]

# The plain 404 page for everyone; Django's URL list only for staff with DEBUG on (core.errors).
handler404 = "core.errors.page_not_found"
