from django.urls import path

from benchmark import views

app_name = "benchmark"

urlpatterns = [
    path("", views.dialogue_list, name="dialogue_list"),
    path("dialogues/<int:pk>/", views.dialogue_detail, name="dialogue_detail"),
    path("dialogues/<int:pk>/turns/<int:index>/<slug:part>/", views.turn_text, name="turn_text"),
]
