"""Building providers from endpoints: keys from the environment (never echoed), endpoint
settings stripped from what is sent, and the connection test."""

import logging

import pytest

from benchmark.models import ModelEndpoint
from benchmark.providers import factory
from benchmark.providers.anthropic_messages import AnthropicMessagesProvider
from benchmark.providers.base import ChatMessage, ChatRequest, ProviderError
from benchmark.providers.openai_chat import OpenAIChatProvider
from benchmark.providers.ratelimit import LocalConcurrencyLimiter, LocalRateLimiter
from benchmark.providers.replay import ReplayProvider
from tests.benchmark.providers.conftest import hello, unsaved_endpoint
from tests.fakes.vendor_server import Fault

SECRET = "sk-live-THIS-MUST-NEVER-LEAK-0123456789"


def _endpoint(provider: str, **fields) -> ModelEndpoint:
    fields.setdefault("model_name", "test-model")
    return unsaved_endpoint(provider, **fields)


def _hello() -> ChatRequest:
    return hello("test-model")


def test_a_missing_key_names_the_variable_and_the_endpoint(monkeypatch):
    monkeypatch.delenv("PB_TEST_OPENAI_API_KEY", raising=False)
    endpoint = _endpoint("openai", name="gpt-main", api_key_env="PB_TEST_OPENAI_API_KEY")

    with pytest.raises(ProviderError) as caught:
        factory.provider_for(endpoint)

    assert str(caught.value) == (
        "environment variable PB_TEST_OPENAI_API_KEY is not set for endpoint gpt-main"
    )
    assert not caught.value.retryable


def test_the_key_reaches_the_server_but_never_an_error_or_a_log(monkeypatch, server, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("PB_TEST_OPENAI_API_KEY", SECRET)
    endpoint = _endpoint(
        "openai-compatible",
        base_url=server.openai_base_url,
        api_key_env="PB_TEST_OPENAI_API_KEY",
    )
    server.script(Fault.unauthorized())  # whose message quotes the key, as OpenAI's does

    with pytest.raises(ProviderError) as caught:
        factory.provider_for(endpoint).complete(_hello())

    assert server.requests()[0].headers["authorization"] == f"Bearer {SECRET}"
    assert caught.value.status == 401
    assert SECRET not in str(caught.value) and SECRET not in caplog.text


def test_openai_compatible_without_a_key_sends_a_placeholder(server):
    endpoint = _endpoint("openai-compatible", base_url=server.openai_base_url)

    result = factory.provider_for(endpoint).complete(_hello())

    assert result.text == "echo: hello"
    assert server.requests()[0].headers["authorization"] == "Bearer not-needed"


def test_openai_compatible_needs_a_base_url():
    with pytest.raises(ProviderError, match="no base URL"):
        factory.provider_for(_endpoint("openai-compatible"))


def test_endpoint_settings_are_stripped_and_applied(server, settings):
    settings.REDIS_URL = None  # in-process limiters, whatever the environment says
    endpoint = _endpoint(
        "openai-compatible",
        base_url=server.openai_base_url,
        default_params={
            "temperature": 0.3,
            "rate_limit_rpm": 600,
            "rate_limit_tpm": 90_000,
            "max_concurrency": 8,
            "timeout_s": 45,
        },
    )

    provider = factory.provider_for(endpoint)
    provider.complete(_hello())

    body = server.requests()[0].body
    assert body["temperature"] == 0.3
    assert not {"rate_limit_rpm", "rate_limit_tpm", "max_concurrency", "timeout_s"} & set(body)
    assert provider.timeout_s == 45
    limiter = provider._limiter
    assert isinstance(limiter.rate, LocalRateLimiter)
    assert (limiter.rate.rpm, limiter.rate.tpm) == (600, 90_000)
    assert isinstance(limiter.concurrency, LocalConcurrencyLimiter)
    assert limiter.concurrency.limit == 8 and limiter.concurrency.lease_s > 45


@pytest.mark.parametrize("setting", ["rate_limit_rpm", "max_concurrency", "timeout_s"])
def test_a_bad_endpoint_setting_is_named(setting, server):
    endpoint = _endpoint(
        "openai-compatible",
        base_url=server.openai_base_url,
        default_params={setting: "fast"},
    )

    with pytest.raises(ProviderError, match=setting):
        factory.provider_for(endpoint)


def test_openai_sends_max_completion_tokens_and_compatible_servers_max_tokens(monkeypatch, server):
    monkeypatch.setenv("PB_TEST_OPENAI_API_KEY", SECRET)
    request = ChatRequest(
        model="m", messages=(ChatMessage("user", "hi"),), params={"max_tokens": 9}
    )
    for provider, field in [
        ("openai", "max_completion_tokens"),
        ("openai-compatible", "max_tokens"),
    ]:
        endpoint = _endpoint(
            provider, base_url=server.openai_base_url, api_key_env="PB_TEST_OPENAI_API_KEY"
        )
        factory.provider_for(endpoint).complete(request)
        assert server.requests()[-1].body[field] == 9


def test_anthropic_endpoints_get_the_messages_provider(monkeypatch, server):
    monkeypatch.setenv("PB_TEST_ANTHROPIC_API_KEY", SECRET)
    endpoint = _endpoint(
        "anthropic",
        base_url=server.anthropic_base_url,
        api_key_env="PB_TEST_ANTHROPIC_API_KEY",
        default_params={"max_tokens": 300},
    )

    provider = factory.provider_for(endpoint)
    result = provider.complete(_hello())

    assert isinstance(provider, AnthropicMessagesProvider) and result.text == "echo: hello"
    assert server.requests()[0].api == "anthropic"
    assert server.requests()[0].body["max_tokens"] == 300


def test_replay_endpoints_need_no_key():
    endpoint = _endpoint("replay", model_name="demo-atlas-large")

    assert isinstance(factory.provider_for(endpoint), ReplayProvider)
    assert factory.test_connection(endpoint).text == "OK"


def test_connection_test_sends_one_tiny_request(server):
    endpoint = _endpoint(
        "openai-compatible", base_url=server.openai_base_url, model_name="llama-test"
    )
    server.reply = lambda body: "OK"

    result = factory.test_connection(endpoint)

    assert result.text == "OK"
    (entry,) = server.requests()
    assert entry.body["model"] == "llama-test"
    assert entry.body["messages"] == [{"role": "user", "content": "Reply with the word OK."}]
    assert entry.body["max_tokens"] == 5


def test_connection_test_reports_a_missing_key(monkeypatch):
    monkeypatch.delenv("PB_TEST_ANTHROPIC_API_KEY", raising=False)
    endpoint = _endpoint("anthropic", api_key_env="PB_TEST_ANTHROPIC_API_KEY")

    with pytest.raises(ProviderError, match="PB_TEST_ANTHROPIC_API_KEY is not set"):
        factory.test_connection(endpoint)


def test_providers_are_built_for_every_vendor_shape(monkeypatch):
    monkeypatch.setenv("PB_TEST_OPENAI_API_KEY", SECRET)
    endpoint = _endpoint("openai", api_key_env="PB_TEST_OPENAI_API_KEY")

    provider = factory.provider_for(endpoint)

    assert isinstance(provider, OpenAIChatProvider) and provider.vendor == "openai"
