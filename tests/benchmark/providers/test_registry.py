"""The provider registry: built-in providers register themselves, a new OpenAI-compatible vendor
is one small class registered in its own module, and endpoints take their choices and their
validation from it."""

import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from benchmark.models import ModelEndpoint
from benchmark.providers import factory, registry
from benchmark.providers.base import ChatRequest, ProviderError
from benchmark.providers.openai_chat import OpenAICompatibleProvider
from benchmark.providers.registry import ProviderSpec
from tests.benchmark.providers.conftest import hello, unsaved_endpoint
from tests.fakes.vendor_server import Reply

TOY = "toy-compatible"


# The whole of a new OpenAI-compatible vendor: this class and its registration (done per test
# below, so that it does not leak into other tests).
class ToyProvider(OpenAICompatibleProvider):
    vendor = TOY


TOY_SPEC = ProviderSpec(
    TOY,
    "Toy (a test vendor)",
    ToyProvider.from_connection,
    needs_api_key=False,
    needs_base_url=True,
)


@pytest.fixture
def toy():
    with registry.registered(TOY_SPEC):
        yield TOY_SPEC


def _endpoint(provider: str, **fields) -> ModelEndpoint:
    fields.setdefault("model_name", "toy-model")
    return unsaved_endpoint(provider, **fields)


def _hello() -> ChatRequest:
    return hello("toy-model")


def test_the_built_in_providers_are_registered_at_start_up():
    assert registry.choices() == [
        ("anthropic", "Anthropic"),
        ("openai", "OpenAI"),
        ("openai-compatible", "OpenAI-compatible (vLLM, Ollama, …)"),
        ("replay", "Replay (recorded replies, offline)"),
    ]


def test_a_registered_variant_answers_through_the_factory_with_nothing_else_changed(toy, server):
    endpoint = _endpoint(TOY, base_url=server.openai_base_url)

    provider = factory.provider_for(endpoint)
    result = provider.complete(_hello())

    assert isinstance(provider, ToyProvider)
    assert result.text == "echo: hello" and result.request_id == "req_1"
    (entry,) = server.requests()
    assert entry.api == "openai" and entry.body["model"] == "toy-model"
    assert entry.headers["authorization"] == "Bearer not-needed"
    assert factory.test_connection(endpoint).text.startswith("echo: ")


def test_a_registered_variant_names_itself_in_errors_and_needs_its_base_url(toy, server):
    server.reply = lambda body: Reply("", finish_reason="length")

    with pytest.raises(ProviderError, match=f"^{TOY} returned an empty reply"):
        factory.provider_for(_endpoint(TOY, base_url=server.openai_base_url)).complete(_hello())
    with pytest.raises(ProviderError, match=f"{TOY} but has no base URL"):
        factory.provider_for(_endpoint(TOY))


def test_an_unregistered_provider_cannot_be_built():
    with registry.registered(TOY_SPEC):
        pass

    with pytest.raises(ProviderError, match=f"unknown provider '{TOY}'") as caught:
        factory.provider_for(_endpoint(TOY, base_url="http://127.0.0.1:9/v1"))
    assert not caught.value.retryable


def test_a_key_is_registered_once_and_must_fit_the_column():
    with pytest.raises(ValueError, match="already registered"):
        registry.register(ProviderSpec("openai", "Another OpenAI", TOY_SPEC.build))
    with pytest.raises(ValueError, match="at most 20 characters"):
        registry.register(ProviderSpec("x" * 21, "Too long", TOY_SPEC.build))
    assert registry.lookup("openai").label == "OpenAI"


def test_endpoint_provider_choices_come_from_the_registry(toy):
    field = ModelEndpoint._meta.get_field("provider")

    assert (TOY, "Toy (a test vendor)") in list(field.choices)
    assert list(field.choices) == registry.choices()


@pytest.mark.django_db
def test_an_unknown_provider_is_refused_by_model_validation():
    endpoint = _endpoint("no-such-vendor", api_key_env="SOME_API_KEY")

    with pytest.raises(ValidationError) as caught:
        endpoint.full_clean()

    assert caught.value.message_dict["provider"] == [
        "Value 'no-such-vendor' is not a valid choice."
    ]


@pytest.mark.django_db
def test_what_a_provider_needs_is_validated_on_the_endpoint():
    with pytest.raises(ValidationError) as caught:
        _endpoint("openai").full_clean()
    assert caught.value.message_dict == {
        "api_key_env": ["OpenAI needs the name of the environment variable that holds its key."]
    }

    with pytest.raises(ValidationError) as caught:
        _endpoint("openai-compatible").full_clean()
    assert list(caught.value.message_dict) == ["base_url"]
    assert "give the server's base URL" in caught.value.message_dict["base_url"][0]

    _endpoint("replay").full_clean()  # needs neither
    _endpoint("openai-compatible", base_url="http://127.0.0.1:8000/v1").full_clean()


def _admin_add(client, provider: str, **fields):
    return client.post(
        reverse("admin:benchmark_modelendpoint_add"),
        {
            "name": "toy",
            "display_name": "Toy",
            "provider": provider,
            "model_name": "toy-model",
            "base_url": "",
            "default_params": "{}",
            "api_key_env": "",
            "is_active": "on",
            **fields,
        },
    )


@pytest.mark.django_db
def test_the_admin_form_offers_registered_providers_and_refuses_others(toy, client_for, admin_user):
    client = client_for(admin_user)

    page = client.get(reverse("admin:benchmark_modelendpoint_add")).content.decode()
    assert f'<option value="{TOY}">Toy (a test vendor)</option>' in page

    refused = _admin_add(client, "no-such-vendor")
    assert refused.status_code == 200
    assert (
        "Select a valid choice. no-such-vendor is not one of the available choices."
        in refused.content.decode()
    )

    needs_url = _admin_add(client, TOY)
    assert "has no default URL: give the server&#x27;s base URL." in needs_url.content.decode()
    assert not ModelEndpoint.objects.exists()

    saved = _admin_add(client, TOY, base_url="http://127.0.0.1:8000/v1")
    assert saved.status_code == 302
    assert ModelEndpoint.objects.get().provider == TOY


def test_the_registry_imports_no_sdk_and_no_django():
    """benchmark.models imports the registry, so it must stay a leaf."""
    code = (
        "import sys, benchmark.providers.registry; "
        "print(sorted(m for m in ('openai', 'anthropic', 'django') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[3],  # this checkout, not an installed copy
    ).stdout
    assert out.strip() == "[]"
