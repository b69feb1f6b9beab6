from django.urls import path

from stats import views

app_name = "stats"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("benchmarks/", views.benchmark_scores, name="benchmark_scores"),
    path("runs/<int:run_id>/triggers/", views.run_triggers, name="run_triggers"),
    path(
        "runs/<int:run_id>/triggers/<int:trigger_id>/",
        views.trigger_detail,
        name="trigger_detail",
    ),
]
