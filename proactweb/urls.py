from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from benchmark import views as benchmark_views

urlpatterns = [
    path("", benchmark_views.home, name="home"),
    path("healthz", benchmark_views.healthz, name="healthz"),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(redirect_authenticated_user=True),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("corpus/", include("benchmark.urls")),
    path("annotate/", include("annotation.urls")),
    path("stats/", include("stats.urls")),
    path("api/v1/", include("stats.api_urls")),
    path("admin/", admin.site.urls),
]
