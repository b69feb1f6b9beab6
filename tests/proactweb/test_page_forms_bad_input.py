"""The pages' own forms with bad input (Hypothesis): the corpus filters (/corpus/), the dashboard
filters (/stats/), the scores upload form and the login form, given empty, huge, wrongly
encoded and malicious values. Never a 5xx; a value the form cannot use falls back to the default
or is refused with a message; nothing given is rendered as markup."""

import io

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.django_db

NASTY = st.sampled_from(
    [
        "",
        " ",
        "0",
        "-1",
        "1" * 40,
        "9" * 400,
        "1e309",
        "NaN",
        "٣",  # a digit, but not an ASCII one
        "x" * 5000,
        "%00",
        "\x00",
        "\ud800",
        "Zoë ☕",
        "<script>alert(1)</script>",
        '"><img src=x onerror=alert(1)>',
        "../../etc/passwd",
        "1 OR 1=1",
        "'; DROP TABLE benchmark_dialogue; --",
    ]
) | st.text(max_size=30)
FORMS = {
    "benchmark:dialogue_list": [
        "q",
        "domain",
        "style",
        "status",
        "trigger_type",
        "with_findings",
        "page",
    ],
    "stats:dashboard": ["run", "verdicts", "condition"],
}
PROPERTY_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def researcher_client(client_for, researcher):
    call_command("load_demo", "--no-users", stdout=io.StringIO())
    return client_for(researcher)


def _query(values: dict) -> dict:
    # What a browser can send: the test client encodes str as UTF-8; an unpaired surrogate
    # cannot be encoded at all, so it travels percent-encoded as its escape.
    return {k: v.encode("utf-8", "surrogatepass").decode("latin-1") for k, v in values.items()}


@PROPERTY_SETTINGS
@given(data=st.data())
def test_filter_forms_never_fail_and_never_render_what_they_were_given(researcher_client, data):
    name = data.draw(st.sampled_from(sorted(FORMS)))
    keys = data.draw(st.lists(st.sampled_from(FORMS[name]), min_size=1, unique=True))
    values = {key: data.draw(NASTY) for key in keys}
    response = researcher_client.get(reverse(name), _query(values), HTTP_HX_REQUEST="true")
    assert response.status_code == 200, (name, values)
    html = response.content.decode()
    assert "<script>alert(1)" not in html and "<img src=x" not in html


def test_the_login_form_with_empty_huge_and_malicious_values(client):
    for username, password in [
        ("", ""),
        ("x" * 10_000, "y" * 10_000),
        ("<script>alert(1)</script>", "pw"),
        ("admin' --", "' OR '1'='1"),
        ("\x00", "\x00"),
    ]:
        response = client.post(reverse("login"), {"username": username, "password": password})
        assert response.status_code in (200, 429), username[:20]
        html = response.content.decode()
        assert "<script>alert(1)" not in html
        assert "_auth_user_id" not in client.session


def test_a_run_or_study_in_unicode_digits_falls_back_to_the_default(researcher_client):
    # "²".isdigit() is True, but int("²") raises: this was a 500.
    for query in ({"run": "²"}, {"study": "²"}):
        assert researcher_client.get(reverse("stats:dashboard"), query).status_code == 200


def test_a_negative_bootstrap_seed_is_a_400(researcher_client):
    response = researcher_client.get("/api/v1/tables/leaderboard/", {"seed": "-1"})
    assert response.status_code == 400
    assert "seed" in response.json()


def test_a_session_cookie_with_a_nul_byte_is_no_session(client):
    # PostgreSQL refuses NUL in text: the session read failed on every page, login included.
    client.cookies["sessionid"] = "abcdefgh\x00ijklmnop"
    assert client.get(reverse("login")).status_code == 200


@pytest.mark.parametrize("token", ["a%00b", "%00", "a%20b", "%C2%B2"])
def test_an_item_token_that_no_item_can_have_is_a_404(client_for, annotator, token):
    """A NUL byte in the token reached PostgreSQL (which refuses NUL in text): a 500. Tokens are
    secrets.token_urlsafe, so the URL accepts only their characters."""
    response = client_for(annotator).get(f"/annotate/1/items/{token}/")
    assert response.status_code == 404
    response = client_for(annotator).post(f"/annotate/1/items/{token}/answer", {"x": "1"})
    assert response.status_code == 404


# --- Every form that is POSTed (issue #14, F6): the study form, the rater exclusion, each
# study kind's answer form; given the hostile values above in any of their fields. -----------


@pytest.fixture
def posted_forms(client_for, researcher, django_user_model):
    """The whole demo (studies with raters); for each study kind, a demo annotator's held item
    and its answer form's fields; a rater of the first study to exclude."""
    from annotation import kinds
    from annotation.forms import ExclusionForm, StudyCreateForm
    from annotation.models import Rater, Study
    from annotation.services.assignments import assignment_next

    call_command("load_demo", stdout=io.StringIO())
    forms = {
        "study_new": (
            client_for(researcher),
            reverse("annotation:study_new"),
            sorted(StudyCreateForm.base_fields),
        )
    }
    first = Study.objects.order_by("pk").first()
    rater = first.raters.order_by("pk").first()
    forms["rater_exclusion"] = (
        client_for(researcher),
        reverse("annotation:rater_exclusion", args=[first.pk, rater.pk]),
        sorted(ExclusionForm.base_fields),
    )
    for study in Study.objects.filter(status="open").order_by("pk"):
        demo_rater = (
            Rater.objects.filter(study=study, annotates=True, user__isnull=False)
            .order_by("pk")
            .first()
        )
        held = demo_rater and assignment_next(rater=demo_rater)
        if not held:
            continue
        client = Client()
        client.force_login(demo_rater.user)
        form = kinds.get(study.kind).answer_form(None, study=study, assignment=held)
        forms[f"answer ({study.kind})"] = (
            client,
            reverse("annotation:answer", args=[study.pk, held.item.token]),
            sorted(form.fields),
        )
    assert {"study_new", "rater_exclusion"} < set(forms) and len(forms) >= 4, sorted(forms)
    return forms


@PROPERTY_SETTINGS
@given(data=st.data())
def test_posted_forms_never_fail_and_never_render_what_they_were_given(posted_forms, data):
    name = data.draw(st.sampled_from(sorted(posted_forms)))
    client, url, fields = posted_forms[name]
    keys = data.draw(st.lists(st.sampled_from(fields), min_size=1, unique=True))
    values = {key: data.draw(NASTY) for key in keys}
    response = client.post(url, _query(values), HTTP_HX_REQUEST="true")
    assert response.status_code < 500, (name, values)
    html = response.content.decode()
    assert "<script>alert(1)" not in html and "<img src=x" not in html
