from django.urls import path

from stats import views

app_name = "stats"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("benchmarks/", views.benchmark_scores, name="benchmark_scores"),
]
