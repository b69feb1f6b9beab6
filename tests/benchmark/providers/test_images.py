"""A user turn's images through each provider: the exact JSON each vendor's wire format receives
(real SDKs against the fake vendor servers), the vendors' errors for an image they cannot take,
image tokens in the usage, and the limiter's estimate of them."""

import asyncio
import base64
import json
import urllib.error
import urllib.request

import pytest

from benchmark.providers.anthropic_messages import AnthropicMessagesProvider
from benchmark.providers.base import ChatMessage, ChatRequest, ProviderError
from benchmark.providers.images import (
    UNREADABLE_IMAGE_TOKENS,
    anthropic_image_tokens,
    openai_image_tokens,
)
from benchmark.providers.openai_chat import OpenAIChatProvider, OpenAICompatibleProvider
from benchmark.providers.ratelimit import estimate_request_tokens
from tests.benchmark.providers.images import image_part, raw_part
from tests.fakes.vendor_images import (
    ANTHROPIC_COULD_NOT_PROCESS,
    FAKE_IMAGE_TOKENS,
    OPENAI_INVALID_IMAGE,
    OPENAI_TEXT_ONLY_MODEL,
)
from tests.fakes.vendor_server import Fault

OCCLUDED = image_part(64, 48, color="navy", alt="a box behind a hand")
BLURRY = image_part(16, 12, color="gray", file_format="JPEG")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _conversation() -> tuple[ChatMessage, ...]:
    return (
        ChatMessage("system", "Be helpful."),
        ChatMessage("user", "What is behind the hand?", images=(OCCLUDED, BLURRY)),
        ChatMessage("assistant", "I cannot tell."),
        ChatMessage("user", "Guess."),
    )


def _openai(server, cls=OpenAIChatProvider) -> OpenAIChatProvider:
    return cls(base_url=server.openai_base_url, api_key="sk-test-images-0123456789")


def _anthropic(server) -> AnthropicMessagesProvider:
    return AnthropicMessagesProvider(
        base_url=server.anthropic_base_url, api_key="sk-ant-test-images-0123456789"
    )


@pytest.mark.parametrize("cls", [OpenAIChatProvider, OpenAICompatibleProvider])
def test_openai_wire_format_sends_images_as_data_url_parts_after_the_text(server, cls):
    _openai(server, cls).complete(ChatRequest(model="gpt-vision", messages=_conversation()))

    (entry,) = server.requests()
    assert entry.status == 200
    assert entry.body["messages"] == [
        {"role": "system", "content": "Be helpful."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is behind the hand?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64," + _b64(OCCLUDED.data)},
                },
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/jpeg;base64," + _b64(BLURRY.data)},
                },
            ],
        },
        # Messages without images keep plain string content, exactly as before.
        {"role": "assistant", "content": "I cannot tell."},
        {"role": "user", "content": "Guess."},
    ]


def test_anthropic_wire_format_sends_base64_image_blocks_after_the_text(server):
    _anthropic(server).complete(ChatRequest(model="claude-vision", messages=_conversation()))

    (entry,) = server.requests()
    assert entry.status == 200
    assert entry.body["system"] == "Be helpful."
    assert entry.body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is behind the hand?"},
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": "image/png",
                        "data": _b64(OCCLUDED.data),
                    },
                },
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": "image/jpeg",
                        "data": _b64(BLURRY.data),
                    },
                },
            ],
        },
        {"role": "assistant", "content": "I cannot tell."},
        {"role": "user", "content": "Guess."},
    ]


def test_an_image_without_text_sends_no_empty_text_part(server):
    message = ChatMessage("user", "  ", images=(OCCLUDED,))

    _openai(server).complete(ChatRequest(model="gpt-vision", messages=(message,)))
    _anthropic(server).complete(ChatRequest(model="claude-vision", messages=(message,)))

    openai_entry, anthropic_entry = server.requests()
    assert [part["type"] for part in openai_entry.body["messages"][0]["content"]] == ["image_url"]
    assert [block["type"] for block in anthropic_entry.body["messages"][0]["content"]] == ["image"]
    assert (openai_entry.status, anthropic_entry.status) == (200, 200)


def test_the_async_path_sends_the_same_parts(server):
    provider = _openai(server)

    async def call():
        try:
            await provider.acomplete(ChatRequest(model="gpt-vision", messages=_conversation()))
        finally:
            await provider.aclose()

    asyncio.run(call())

    (entry,) = server.requests()
    assert entry.status == 200
    assert [part["type"] for part in entry.body["messages"][1]["content"]] == [
        "text",
        "image_url",
        "image_url",
    ]


def test_image_tokens_count_in_the_input_tokens_each_vendor_reports(server):
    request_openai = ChatRequest(model="gpt-vision", messages=(_conversation()[1],))
    request_anthropic = ChatRequest(model="claude-vision", messages=(_conversation()[1],))

    openai_result = _openai(server).complete(request_openai)
    anthropic_result = _anthropic(server).complete(request_anthropic)

    # The fake bills 5 words of text plus FAKE_IMAGE_TOKENS per image, inside the prompt's
    # count, as the vendors do; the providers report what the vendor reported.
    assert openai_result.input_tokens == 5 + 2 * FAKE_IMAGE_TOKENS
    assert anthropic_result.input_tokens == 5 + 2 * FAKE_IMAGE_TOKENS


def test_openai_refuses_an_image_sent_to_a_text_only_model_and_it_is_not_retried(server):
    server.text_only_models.add("gpt-text-only")

    with pytest.raises(ProviderError) as raised:
        _openai(server).complete(ChatRequest(model="gpt-text-only", messages=_conversation()))

    error = raised.value
    assert (error.status, error.retryable, error.attempts) == (400, False, 1)
    assert OPENAI_TEXT_ONLY_MODEL in str(error)
    assert "the request carried 2 image(s)" in str(error)
    assert len(server.requests()) == 1
    body = server.requests()[0]
    assert body.status == 400


def test_the_same_text_only_model_still_answers_a_request_without_images(server):
    server.text_only_models.add("gpt-text-only")

    result = _openai(server).complete(
        ChatRequest(model="gpt-text-only", messages=(ChatMessage("user", "Hello"),))
    )

    assert result.text == "echo: Hello"


def test_openai_refuses_bytes_that_are_not_an_image(server):
    broken = raw_part(b"\x89PNG but not really")

    with pytest.raises(ProviderError) as raised:
        _openai(server).complete(
            ChatRequest(model="gpt-vision", messages=(ChatMessage("user", "Look", (broken,)),))
        )

    assert raised.value.status == 400 and not raised.value.retryable
    assert OPENAI_INVALID_IMAGE in str(raised.value)


def test_anthropic_refuses_an_image_it_cannot_process(server):
    broken = raw_part(b"GIF89a truncated", media_type="image/gif")

    with pytest.raises(ProviderError) as raised:
        _anthropic(server).complete(
            ChatRequest(model="claude-vision", messages=(ChatMessage("user", "Look", (broken,)),))
        )

    error = raised.value
    assert (error.status, error.retryable, error.attempts) == (400, False, 1)
    assert f"messages.0.content.1.image.source.base64.data: {ANTHROPIC_COULD_NOT_PROCESS}" in str(
        error
    )
    assert "the request carried 1 image(s)" in str(error)


def test_anthropic_refuses_an_image_whose_media_type_is_not_what_the_file_is(server):
    mislabelled = image_part(file_format="PNG", media_type="image/jpeg")

    with pytest.raises(ProviderError, match="appears to be a image/png image"):
        _anthropic(server).complete(
            ChatRequest(
                model="claude-vision", messages=(ChatMessage("user", "Look", (mislabelled,)),)
            )
        )


@pytest.mark.parametrize(
    ("make", "expected"),
    [(_openai, OPENAI_TEXT_ONLY_MODEL), (_anthropic, ANTHROPIC_COULD_NOT_PROCESS)],
    ids=["openai", "anthropic"],
)
def test_a_scripted_unsupported_image_fault_gives_the_vendors_error(server, make, expected):
    server.script(Fault.unsupported_image())

    with pytest.raises(ProviderError) as raised:
        make(server).complete(ChatRequest(model="any-model", messages=_conversation()))

    assert raised.value.status == 400 and not raised.value.retryable
    assert expected in str(raised.value)
    assert server.requests()[0].fault == "unsupported_image"


@pytest.mark.parametrize("make", [_openai, _anthropic], ids=["openai", "anthropic"])
@pytest.mark.parametrize("role", ["assistant", "system"])
def test_images_on_a_message_other_than_a_user_s_are_refused_before_sending(server, make, role):
    message = ChatMessage(role, "Here is a picture", images=(OCCLUDED,))
    request = ChatRequest(model="vision", messages=(message, ChatMessage("user", "Hi")))

    with pytest.raises(ProviderError, match=f"only user messages may carry images, not {role}"):
        make(server).complete(request)

    assert server.requests() == []


# --- The limiter's estimate -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((512, 512), 85 + 170 * 1),
        ((1024, 1024), 85 + 170 * 4),  # shortest side 768 → 768×768, 2×2 tiles
        ((2048, 4096), 1105),  # OpenAI's worked example: 1024×2048 → 768×1536, 2×3 tiles
        ((100, 30), 85 + 170 * 1),
    ],
)
def test_openai_image_tokens_follow_the_published_tiling_formula(size, tokens):
    assert openai_image_tokens(image_part(*size)) == tokens


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1000, 1000), 1334),  # 1,000,000 / 750, rounded up
        ((3136, 2000), 2091),  # long edge scaled to 1568 → 1568×1000
        ((10, 10), 1),
    ],
)
def test_anthropic_image_tokens_are_pixels_over_750_after_the_resize(size, tokens):
    assert anthropic_image_tokens(image_part(*size)) == tokens


def test_an_unreadable_image_is_estimated_at_the_most_one_image_costs():
    broken = raw_part(b"not an image at all")

    assert openai_image_tokens(broken) == UNREADABLE_IMAGE_TOKENS
    assert anthropic_image_tokens(broken) == UNREADABLE_IMAGE_TOKENS


def test_the_request_estimate_adds_each_image_by_the_vendors_formula():
    messages = [
        ChatMessage("user", "x" * 400, images=(image_part(1024, 1024), image_part(512, 512)))
    ]

    assert estimate_request_tokens(messages, max_output_tokens=50) == 100 + 765 + 255 + 50
    assert (
        estimate_request_tokens(messages, max_output_tokens=50, image_tokens=anthropic_image_tokens)
        == 100 + 1399 + 350 + 50
    )


def test_each_provider_hands_the_limiter_its_own_vendors_image_estimate(server):
    request = ChatRequest(
        model="m",
        messages=(ChatMessage("user", "", images=(image_part(1024, 1024),)),),
        params={"max_tokens": 10},
    )

    *_, openai_estimate = _openai(server)._prepare(request)
    *_, anthropic_estimate = _anthropic(server)._prepare(request)

    assert (openai_estimate, anthropic_estimate) == (765 + 10, 1399 + 10)


# --- The fake's checks, as a vendor's client sees them ------------------------------------------


def _post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


PNG_URL = "data:image/png;base64," + base64.b64encode(OCCLUDED.data).decode()


@pytest.mark.parametrize(
    ("part", "message", "param"),
    [
        (
            {"type": "image_url", "image_url": {}},
            "Missing required parameter: 'messages.[0].content.[1].image_url.url'.",
            "messages.[0].content.[1].image_url.url",
        ),
        (
            {"type": "image_url", "image_url": {"url": "aW1n"}},
            "Invalid 'messages.[0].content.[1].image_url.url'. Expected a base64-encoded data URL",
            "messages.[0].content.[1].image_url.url",
        ),
        (
            {"type": "image_url", "image_url": {"url": PNG_URL, "detail": "ultra"}},
            "Invalid value: 'ultra'. Supported values are: 'auto', 'low', and 'high'.",
            "messages.[0].content.[1].image_url.detail",
        ),
        (
            {"type": "picture", "url": PNG_URL},
            "Invalid value: 'picture'.",
            "messages.[0].content.[1].type",
        ),
    ],
)
def test_the_fake_openai_server_refuses_malformed_image_parts(server, part, message, param):
    body = {
        "model": "gpt-vision",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Look"}, part]}],
    }

    status, answer = _post(server.openai_base_url + "/chat/completions", body)

    assert status == 400
    assert answer["error"]["type"] == "invalid_request_error"
    assert answer["error"]["message"].startswith(message)
    assert answer["error"]["param"] == param


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (
            {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": ""}},
            "messages.0.content.0.image.source.base64.media_type: Input should be 'image/jpeg'",
        ),
        (
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "%%"},
            },
            "messages.0.content.0.image.source.base64: invalid base64 data",
        ),
        ({"type": "text", "text": ""}, "messages: text content blocks must be non-empty"),
    ],
)
def test_the_fake_anthropic_server_refuses_malformed_image_blocks(server, block, message):
    body = {
        "model": "claude-vision",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": [block]}],
    }

    status, answer = _post(server.anthropic_base_url + "/v1/messages", body)

    assert status == 400
    assert answer["type"] == "error"
    assert answer["error"]["type"] == "invalid_request_error"
    assert answer["error"]["message"].startswith(message)


def test_a_request_s_payload_names_its_images_by_hash_and_a_text_only_one_is_unchanged():
    text_only = ChatRequest(model="m", messages=(ChatMessage("user", "Hi"),))
    with_images = ChatRequest(model="m", messages=_conversation()[1:2])
    other_image = ChatRequest(
        model="m", messages=(ChatMessage("user", "What is behind the hand?", images=(BLURRY,)),)
    )

    assert text_only.payload()["messages"] == [{"role": "user", "content": "Hi"}]
    assert with_images.payload()["messages"] == [
        {
            "role": "user",
            "content": "What is behind the hand?",
            "images": [OCCLUDED.sha256, BLURRY.sha256],
        }
    ]
    # What caches a call (curation's response cache) tells two images apart.
    assert other_image.payload() != with_images.payload()
