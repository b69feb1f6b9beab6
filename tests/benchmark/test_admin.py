import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from benchmark.models import Dialogue, ModelEndpoint
from tests.factories import dialogue_record, jsonl_bytes, records_for

pytestmark = pytest.mark.django_db

MODELS = (
    "domain",
    "communicationstyle",
    "persona",
    "scenario",
    "blueprint",
    "dialogue",
    "turn",
    "trigger",
    "anchor",
    "modelendpoint",
)


def _upload(client, data: bytes, **flags):
    return client.post(
        reverse("admin:benchmark_dialogue_import"),
        {"file": SimpleUploadedFile("final_dialogues.jsonl", data), **flags},
    )


def test_every_model_has_a_searchable_admin_list(client_for, admin_user):
    client = client_for(admin_user)
    for model in MODELS:
        response = client.get(reverse(f"admin:benchmark_{model}_changelist"), {"q": "x"})
        assert response.status_code == 200, model


def test_upload_imports_and_reports(client_for, admin_user):
    response = _upload(client_for(admin_user), jsonl_bytes(records_for(2)))
    assert response.status_code == 302
    assert Dialogue.objects.count() == 2


def test_upload_with_errors_lists_them_and_writes_nothing(client_for, admin_user):
    bad = dialogue_record()
    bad["trigger_points"][0]["turn"] = 40
    response = _upload(client_for(admin_user), jsonl_bytes([*records_for(1)[1:], bad], lines=["{"]))
    html = response.content.decode()
    assert response.status_code == 200
    assert "line 1, $.trigger_points[0].turn: trigger points at turn 40" in html
    assert "line 2, $: invalid JSON" in html
    assert "nothing was written" in html
    assert Dialogue.objects.count() == 0


def test_upload_dry_run_shows_summary_without_writing(client_for, admin_user):
    response = _upload(client_for(admin_user), jsonl_bytes(records_for(2)), dry_run="on")
    assert "Dry run (nothing written): 2 dialogue(s)" in response.content.decode()
    assert Dialogue.objects.count() == 0


def test_researchers_and_annotators_cannot_upload(client_for, researcher, annotator):
    for user in (researcher, annotator):
        response = _upload(client_for(user), jsonl_bytes(records_for(1)))
        assert response.status_code == 302 and "login" in response.url
    assert Dialogue.objects.count() == 0


def test_endpoint_stores_the_name_of_the_key_variable_never_a_key(client_for, admin_user):
    client = client_for(admin_user)
    response = client.post(
        reverse("admin:benchmark_modelendpoint_add"),
        {
            "name": "gpt",
            "display_name": "GPT",
            "provider": "openai",
            "model_name": "gpt-x",
            "base_url": "",
            "default_params": "{}",
            "api_key_env": "sk-live-abc123",
            "is_active": "on",
        },
    )
    assert response.status_code == 200
    assert "Name of an environment variable" in response.content.decode()
    assert not ModelEndpoint.objects.exists()
