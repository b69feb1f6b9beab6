"""The Anthropic Messages adapter, through the real SDK against a local server."""

import pytest

from benchmark.providers.anthropic_messages import AnthropicMessagesProvider
from benchmark.providers.base import ChatMessage, ChatRequest, ProviderError
from tests.fakes.vendor_server import FakeVendorServer, Reply

API_KEY = "sk-ant-test-0123456789abcdef"


def _provider(server: FakeVendorServer, **options) -> AnthropicMessagesProvider:
    return AnthropicMessagesProvider(base_url=server.anthropic_base_url, api_key=API_KEY, **options)


def _request(*messages: ChatMessage, **params) -> ChatRequest:
    return ChatRequest(model="claude-test", messages=messages, params=params)


def test_reply_usage_and_request_id_are_parsed(server):
    server.reply = lambda body: Reply("Three words here.")

    result = _provider(server).complete(
        _request(ChatMessage("system", "Be terse."), ChatMessage("user", "Say something now"))
    )

    assert result.text == "Three words here."
    assert result.input_tokens == 5  # the fake counts words, the system text included
    assert result.output_tokens == 3 and result.reasoning_tokens == 0
    assert result.request_id == "req_1"
    assert result.attempts == 1 and result.latency_s > 0


def test_system_messages_go_to_the_system_parameter(server):
    _provider(server).complete(
        _request(
            ChatMessage("system", "Be terse."),
            ChatMessage("user", "Hi"),
            ChatMessage("assistant", "Hello."),
            ChatMessage("system", "Answer in English."),
            ChatMessage("user", "Again"),
        )
    )

    body = server.requests()[0].body
    assert body["system"] == "Be terse.\n\nAnswer in English."
    assert body["messages"] == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Again"},
    ]
    # This SDK version sends the key as a bearer token (older ones used x-api-key).
    headers = server.requests()[0].headers
    assert API_KEY in (headers.get("x-api-key"), headers.get("authorization", "")[7:])


def test_no_system_parameter_without_system_messages(server):
    _provider(server).complete(_request(ChatMessage("user", "Hi")))

    assert "system" not in server.requests()[0].body


def test_parameters_are_mapped_to_the_messages_api(server):
    provider = _provider(server, default_params={"temperature": 0.2, "top_k": 40})

    provider.complete(
        _request(ChatMessage("user", "Hi"), temperature=0.7, top_p=0.9, stop="END", seed=3)
    )

    body = server.requests()[0].body
    assert body["max_tokens"] == 1024  # required by the API; our default
    assert body["stop_sequences"] == ["END"] and "stop" not in body
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.7, 0.9, 40)
    assert "seed" not in body  # no Anthropic equivalent


def test_max_tokens_is_passed_when_given(server):
    _provider(server).complete(_request(ChatMessage("user", "Hi"), max_tokens=16))

    assert server.requests()[0].body["max_tokens"] == 16


def test_text_blocks_are_concatenated_and_thinking_left_out(server):
    server.reply = lambda body: Reply(("part one, ", "part two"), thinking="Let me see.")

    result = _provider(server).complete(_request(ChatMessage("user", "Hi")))

    assert result.text == "part one, part two"


def test_an_empty_reply_is_a_non_retryable_error(server):
    server.reply = lambda body: Reply(None, finish_reason="length")

    with pytest.raises(ProviderError, match="empty reply") as caught:
        _provider(server).complete(_request(ChatMessage("user", "Think hard")))

    assert not caught.value.retryable and caught.value.attempts == 1
    assert "stop_reason=max_tokens" in str(caught.value)
