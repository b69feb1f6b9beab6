"""Which environment variable an endpoint may name as its key (benchmark/providers/keys.py).

Whoever may edit endpoints chooses both the base URL and the variable whose value is sent
there, so a variable other than a provider key — the session signing key, the database URL —
must never be sent: the admin form refuses it on the field, and an endpoint written some other
way (the ORM here) is refused at call time, before anything reaches the server."""

import secrets

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from benchmark.corpus.importer import corpus_import
from benchmark.evaluation import runs
from benchmark.models import Dialogue, EvaluationUnit, ModelEndpoint
from benchmark.providers import factory
from benchmark.providers.base import ProviderError
from proactweb.celery import app as celery_app
from tests.factories import jsonl_bytes, records_for, stream
from tests.fakes.vendor_server import FakeVendorServer, bench_reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def endpoint_editor(django_user_model):
    """Staff, not a superuser, with the endpoint permissions only: the persona of the threat."""
    user = django_user_model.objects.create_user(
        username="eddie-endpoints", password="pw-eddie", is_staff=True
    )
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="benchmark",
            codename__in=["add_modelendpoint", "change_modelendpoint", "view_modelendpoint"],
        )
    )
    return user


@pytest.fixture
def app_secret(monkeypatch):
    """SECRET_KEY set in the environment to a value the test can look for."""
    value = "django-secret-" + secrets.token_hex(16)
    monkeypatch.setenv("SECRET_KEY", value)
    return value


def _add_endpoint(client, api_key_env: str, base_url: str = "https://attacker.example/v1"):
    return client.post(
        reverse("admin:benchmark_modelendpoint_add"),
        {
            "name": "exfil",
            "display_name": "Exfil",
            "provider": "openai-compatible",
            "model_name": "m",
            "base_url": base_url,
            "default_params": "{}",
            "api_key_env": api_key_env,
            "is_active": "on",
        },
    )


def _field_errors(response) -> list[str]:
    assert response.status_code == 200, "the form was accepted"
    return response.context["adminform"].form.errors.get("api_key_env", [])


@pytest.mark.parametrize("name", ["SECRET_KEY", "DATABASE_URL", "REDIS_URL", "AWS_SECRET_TOKEN"])
def test_the_admin_form_refuses_a_variable_that_is_not_a_provider_key(
    client_for, endpoint_editor, name
):
    errors = _field_errors(_add_endpoint(client_for(endpoint_editor), name))

    assert len(errors) == 1 and errors[0].startswith(name)
    assert not ModelEndpoint.objects.exists()


def test_the_app_s_own_secrets_are_refused_even_if_listed(client_for, endpoint_editor, settings):
    settings.PROACTBENCH_API_KEY_ENV_ALLOWED = ["SECRET_KEY", "DATABASE_URL"]
    client = client_for(endpoint_editor)

    for name in ("SECRET_KEY", "DATABASE_URL"):
        (error,) = _field_errors(_add_endpoint(client, name))
        assert "own secrets" in error
    assert not ModelEndpoint.objects.exists()


def test_a_name_ending_in_api_key_or_a_listed_name_is_accepted(
    client_for, endpoint_editor, settings
):
    settings.PROACTBENCH_API_KEY_ENV_ALLOWED = ["HF_TOKEN"]
    client = client_for(endpoint_editor)

    assert _add_endpoint(client, "TOGETHER_API_KEY").status_code == 302
    ModelEndpoint.objects.all().delete()
    assert _add_endpoint(client, "HF_TOKEN").status_code == 302
    assert ModelEndpoint.objects.get().api_key_env == "HF_TOKEN"


def test_a_pasted_key_is_not_echoed_by_the_refusal(client_for, endpoint_editor):
    response = _add_endpoint(client_for(endpoint_editor), "sk-live-abc123")

    assert _field_errors(response) == ["Name of an environment variable, e.g. OPENAI_API_KEY."]
    assert "sk-live-abc123 is not" not in response.content.decode()


def _saved_before_the_rule(base_url: str, api_key_env: str = "SECRET_KEY") -> ModelEndpoint:
    """Written by the ORM, as an old row, a fixture or an import would be: no ``clean``."""
    return ModelEndpoint.objects.create(
        name="old-exfil",
        display_name="Old exfil",
        provider="openai-compatible",
        model_name="m",
        base_url=base_url,
        api_key_env=api_key_env,
    )


def test_test_connection_refuses_a_stored_app_secret_before_sending_anything(
    client_for, admin_user, app_secret
):
    with FakeVendorServer() as server:
        endpoint = _saved_before_the_rule(server.openai_base_url)
        response = client_for(admin_user).post(
            reverse("admin:benchmark_modelendpoint_changelist"),
            {"action": "test_connection", "_selected_action": [endpoint.pk]},
            follow=True,
        )
        sent = server.requests()

    assert "api_key_env SECRET_KEY holds one of the workbench&#x27;s own secrets" in (
        response.content.decode()
    )
    assert sent == []
    assert app_secret not in response.content.decode()


def test_an_unlisted_variable_stored_on_an_endpoint_fails_the_call_and_is_not_retried(
    monkeypatch,
):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-" + secrets.token_hex(8))
    with FakeVendorServer() as server:
        endpoint = _saved_before_the_rule(server.openai_base_url, "AWS_SECRET_ACCESS_KEY")
        with pytest.raises(ProviderError) as caught:
            factory.test_connection(endpoint)
        sent = server.requests()

    assert not caught.value.retryable
    assert str(caught.value) == (
        "endpoint old-exfil: api_key_env AWS_SECRET_ACCESS_KEY is not an allowed key variable: "
        "use a name ending in _API_KEY, or list it in PROACTBENCH_API_KEY_ENV_ALLOWED."
    )
    assert sent == []


@pytest.fixture
def eager():
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


def test_a_run_with_a_stored_app_secret_errors_its_units_and_sends_no_secret(app_secret, eager):
    corpus_import(stream=stream(jsonl_bytes(records_for(1))))
    with FakeVendorServer(reply=bench_reply) as server:
        endpoint = _saved_before_the_rule(server.openai_base_url)
        judge = ModelEndpoint.objects.create(
            name="judge",
            display_name="Judge",
            provider="openai-compatible",
            model_name="j",
            base_url=server.openai_base_url,
        )
        run = runs.run_create(
            name="exfil run", endpoints=[endpoint], judges=[judge], dialogues=Dialogue.objects.all()
        )
        runs.run_launch(run_id=run.pk)
        sent = server.requests()

    units = EvaluationUnit.objects.filter(run=run)
    assert units.exists()
    assert all(u.state == "error" and "api_key_env SECRET_KEY" in u.error for u in units)
    assert not any(app_secret in str(r.headers) for r in sent)
    assert sent == []
