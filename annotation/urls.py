from django.urls import path, re_path

from annotation import views

app_name = "annotation"

urlpatterns = [
    # Annotators: their own studies and items (anyone else's is a 404). An item token is
    # secrets.token_urlsafe, so <slug:> matches every real one, and anything else (a NUL byte,
    # which PostgreSQL refuses in text) is a 404 before any query.
    path("", views.annotator_home, name="home"),
    path("<int:study_id>/", views.workspace, name="workspace"),
    path("<int:study_id>/next", views.next_item, name="next"),
    path("<int:study_id>/undo", views.undo, name="undo"),
    path("<int:study_id>/items/<slug:token>/", views.item_detail, name="item"),
    path("<int:study_id>/items/<slug:token>/answer", views.answer, name="answer"),
    path("<int:study_id>/items/<slug:token>/skip", views.skip, name="skip"),
    path("<int:study_id>/items/<slug:token>/flag", views.flag, name="flag"),
    path("<int:study_id>/mine", views.my_answers, name="my_answers"),
    path("<int:study_id>/consent", views.consent, name="consent"),
    path("<int:study_id>/complete", views.complete, name="complete"),
    # A turn image, by its content's SHA-256 alone (blind: nothing of a model, a condition or
    # a study), for whoever was shown its turn; staff too (the dialogue page).
    re_path(r"^images/(?P<sha256>[0-9a-f]{64})$", views.turn_image, name="turn_image"),
    # Staff (admin or researcher).
    path("studies/", views.study_list, name="study_list"),
    path("studies/new", views.study_new, name="study_new"),
    path("studies/<int:study_id>/", views.study_detail, name="study_detail"),
    path("studies/<int:study_id>/live", views.study_live, name="study_live"),
    path(
        "studies/<int:study_id>/raters/<int:rater_id>/exclusion",
        views.rater_exclusion,
        name="rater_exclusion",
    ),
    path("studies/<int:study_id>/onboarding", views.study_onboarding, name="study_onboarding"),
    path(
        "studies/<int:study_id>/raters/<int:rater_id>/qualification",
        views.qualification_override,
        name="qualification_override",
    ),
]
