import pytest
from django.urls import reverse

from benchmark.corpus.importer import corpus_import
from benchmark.models import Dialogue
from tests.factories import dialogue_record, jsonl_bytes, records_for, stream

pytestmark = pytest.mark.django_db

EXTENSION = {
    "persona": {"name": "Mara Lind", "summary": "Runs a small design studio."},
    "scenario": {"title": "Studio offsite", "hidden_goal": "Keep the team together."},
    "anchors": [
        {"key": "A1", "text": "No projector at the venue.", "turn": 1},
        {"key": "A2", "text": "Budget is fixed at 900 euros.", "turn": 2},
        {"key": "A3", "text": "Last train leaves at 17:10.", "turn": 2},
    ],
    "trigger_anchors": {"3": ["A1", "A2"]},
}


@pytest.fixture
def corpus():
    record = dialogue_record(
        triggers=((1, "EMERGENT"), (3, "CRITICAL"), (8, "RECOVERY")), extension=EXTENSION
    )
    record["turn_records"][0]["user_message"] = "Hi <script>alert(1)</script> there"
    corpus_import(stream=stream(jsonl_bytes([record, *records_for(3)[1:]])))
    return Dialogue.objects.get(unique_id_eval=record["unique_id_eval"])


def test_login_page_renders(client):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert b"Log in" in response.content


def test_anonymous_visitors_are_sent_to_login(client, corpus):
    for url in (
        reverse("home"),
        reverse("benchmark:dialogue_list"),
        reverse("benchmark:dialogue_detail", args=[corpus.pk]),
        reverse("annotation:home"),
    ):
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith(reverse("login")), url


def test_login_lands_each_role_on_its_own_page(client, researcher, annotator, admin_user):
    for user, landing in (
        (researcher, reverse("benchmark:dialogue_list")),
        (admin_user, reverse("benchmark:dialogue_list")),
        (annotator, reverse("annotation:home")),
    ):
        response = client.post(
            reverse("login"),
            {"username": user.username, "password": "pw-" + user.username},
            follow=True,
        )
        assert response.redirect_chain[-1][0] == landing, user.username
        client.logout()


def test_annotators_and_outsiders_reach_neither_corpus_nor_admin(
    client_for, annotator, outsider, corpus
):
    for user in (annotator, outsider):
        client = client_for(user)
        assert client.get(reverse("benchmark:dialogue_list")).status_code == 404
        assert client.get(reverse("benchmark:dialogue_detail", args=[corpus.pk])).status_code == 404
        admin = client.get(reverse("admin:index"))
        assert admin.status_code == 302 and "login" in admin.url
        assert client.get(reverse("annotation:home")).status_code == 200


def test_dialogue_page_shows_conversation_triggers_rubrics_orders_and_findings(
    client_for, researcher, corpus
):
    response = client_for(researcher).get(reverse("benchmark:dialogue_detail", args=[corpus.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Studio offsite" in html and "Mara Lind" in html
    assert html.count('class="turn is-trigger"') == 3
    assert "Connects the facts about the team offsite" in html  # a rubric
    assert "Planner's order" in html and "Move the planning forward (turn 4)." in html
    assert "trigger_outside_window" in html  # CRITICAL at turn 3
    assert "anchor_drip" in html  # A2 and A3 both at turn 2
    assert "discloses A1" in html
    # Texts from the file are untrusted: escaped, never markup.
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_dialogue_list_filters_and_htmx_partial(client_for, researcher, corpus):
    client = client_for(researcher)
    full = client.get(reverse("benchmark:dialogue_list"))
    assert full.status_code == 200 and full.content.decode().count("/corpus/dialogues/") == 3
    flagged = client.get(reverse("benchmark:dialogue_list"), {"with_findings": "on"})
    assert flagged.content.decode().count("/corpus/dialogues/") == 1
    partial = client.get(
        reverse("benchmark:dialogue_list"), {"q": "Studio"}, headers={"HX-Request": "true"}
    )
    body = partial.content.decode()
    assert body.lstrip().startswith('<div id="results">') and "<html" not in body
    assert body.count("/corpus/dialogues/") == 1


def test_unknown_dialogue_is_404(client_for, researcher):
    assert (
        client_for(researcher).get(reverse("benchmark:dialogue_detail", args=[99999])).status_code
        == 404
    )


def test_list_page_query_count_does_not_grow_with_the_corpus(
    client_for, researcher, django_assert_max_num_queries
):
    client = client_for(researcher)
    corpus_import(stream=stream(jsonl_bytes(records_for(5))))
    with django_assert_max_num_queries(12):
        client.get(reverse("benchmark:dialogue_list"))
    corpus_import(stream=stream(jsonl_bytes(records_for(40))))
    with django_assert_max_num_queries(12):
        client.get(reverse("benchmark:dialogue_list"))


def test_detail_page_query_count_is_bounded(
    client_for, researcher, corpus, django_assert_max_num_queries
):
    client = client_for(researcher)
    with django_assert_max_num_queries(14):
        response = client.get(reverse("benchmark:dialogue_detail", args=[corpus.pk]))
    assert response.status_code == 200


def test_healthz(client):
    response = client.get(reverse("healthz"))
    assert response.json() == {"status": "ok"}
