from django.urls import path

from annotation import views

app_name = "annotation"

urlpatterns = [
    path("", views.annotator_home, name="home"),
]
