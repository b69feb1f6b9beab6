"""The OpenAI Chat Completions adapter, through the real SDK against a local server."""

import threading

import pytest

from benchmark.providers.base import ChatMessage, ChatRequest, ProviderError
from benchmark.providers.openai_chat import OpenAIChatProvider, OpenAICompatibleProvider
from benchmark.providers.ratelimit import EndpointLimiter, LocalConcurrencyLimiter
from tests.fakes.vendor_server import FakeVendorServer, Reply

API_KEY = "sk-test-openai-0123456789abcdef"


def _provider(server: FakeVendorServer, **options) -> OpenAIChatProvider:
    return OpenAIChatProvider(base_url=server.openai_base_url, api_key=API_KEY, **options)


def _request(*messages: ChatMessage, **params) -> ChatRequest:
    return ChatRequest(model="gpt-test", messages=messages, params=params)


def test_reply_usage_and_request_id_are_parsed(server):
    server.reply = lambda body: Reply("Four words right here.", reasoning_tokens=7)

    result = _provider(server).complete(
        _request(ChatMessage("system", "Be terse."), ChatMessage("user", "Say something now"))
    )

    assert result.text == "Four words right here."
    assert result.input_tokens == 5  # the fake counts words: "Be terse." + "Say something now"
    # The server reports 4 + 7 completion tokens; output and reasoning are kept apart.
    assert (result.output_tokens, result.reasoning_tokens) == (4, 7)
    assert result.request_id == "req_1"
    assert result.attempts == 1 and result.latency_s > 0


def test_the_conversation_is_sent_in_order_with_every_role(server):
    messages = (
        ChatMessage("system", "Be terse."),
        ChatMessage("user", "Hi"),
        ChatMessage("assistant", "Hello."),
        ChatMessage("user", "Again"),
    )

    _provider(server).complete(_request(*messages))

    (entry,) = server.requests()
    assert entry.body["model"] == "gpt-test"
    assert entry.body["messages"] == [{"role": m.role, "content": m.content} for m in messages]
    assert entry.headers["authorization"] == f"Bearer {API_KEY}"


def test_sampling_parameters_are_mapped_and_the_rest_passed_through(server):
    provider = _provider(server, default_params={"temperature": 0.2, "top_k": 40})

    provider.complete(
        _request(
            ChatMessage("user", "Hi"),
            temperature=0.7,
            top_p=0.9,
            max_tokens=64,
            seed=11,
            stop=["\n\n"],
            repetition_penalty=1.1,
        )
    )

    body = server.requests()[0].body
    assert body["temperature"] == 0.7  # the request overrides the endpoint's default
    assert (body["top_p"], body["max_completion_tokens"], body["seed"], body["stop"]) == (
        0.9,
        64,
        11,
        ["\n\n"],
    )
    assert (body["top_k"], body["repetition_penalty"]) == (40, 1.1)


def test_openai_gets_max_tokens_as_max_completion_tokens_and_compatible_servers_as_max_tokens(
    server,
):
    request = _request(ChatMessage("user", "Hi"), max_tokens=32)

    _provider(server).complete(request)
    OpenAICompatibleProvider(base_url=server.openai_base_url, api_key="").complete(request)

    openai_body, compatible_body = (entry.body for entry in server.requests())
    assert openai_body["max_completion_tokens"] == 32 and "max_tokens" not in openai_body
    assert compatible_body["max_tokens"] == 32 and "max_completion_tokens" not in compatible_body


def test_params_cannot_override_the_model_or_turn_on_streaming(server):
    with pytest.raises(ProviderError, match="stream") as caught:
        _provider(server).complete(_request(ChatMessage("user", "Hi"), stream=True))
    assert not caught.value.retryable and caught.value.attempts == 0
    assert server.requests() == []


@pytest.mark.parametrize("content", [None, "", "   \n"])
def test_an_empty_reply_is_a_non_retryable_error(server, content):
    server.reply = lambda body: Reply(content, finish_reason="length")

    with pytest.raises(ProviderError, match="empty reply") as caught:
        _provider(server).complete(_request(ChatMessage("user", "Think hard")))

    assert not caught.value.retryable and caught.value.attempts == 1
    assert "finish_reason=length" in str(caught.value)
    assert len(server.requests()) == 1


def test_one_provider_serves_many_threads(server):
    provider = _provider(server)
    results: dict[int, str] = {}

    def call(index: int) -> None:
        results[index] = provider.complete(_request(ChatMessage("user", f"n{index}"))).text

    threads = [threading.Thread(target=call, args=(i,)) for i in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    assert results == {i: f"echo: n{i}" for i in range(24)}
    assert len(server.requests()) == 24


def test_the_concurrency_limit_holds_and_every_slot_is_released(server):
    slots = LocalConcurrencyLimiter(2)
    provider = _provider(server, limiter=EndpointLimiter(concurrency=slots))
    server.close_gate()
    threads = [
        threading.Thread(target=provider.complete, args=(_request(ChatMessage("user", str(i))),))
        for i in range(5)
    ]
    for thread in threads:
        thread.start()

    server.wait_for(lambda log: len(log) == 2)
    for thread in threads:
        thread.join(0.05)  # give the others every chance to slip past the limit
    assert len(server.requests()) == 2 and slots.in_use() == 2

    server.open_gate()
    for thread in threads:
        thread.join(10)
    assert len(server.requests()) == 5 and slots.in_use() == 0


# --- What the adapter makes of a response (it reads the JSON itself, not the SDK's model) -----


class _RawServer:
    """A bare HTTP server answering every POST with one fixed response, for bodies the fake
    vendor server never sends (a gateway's error object, a web page, JSON that is no object)."""

    def __init__(self, status: int, content_type: str, body: bytes, headers=None) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        answer = (status, content_type, body, dict(headers or {}))
        self.posts = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                owner.posts += 1
                status, content_type, body, headers = answer
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _complete_both_ways(raw: _RawServer, request: ChatRequest) -> list:
    """``complete`` and ``acomplete`` (on the engine's event loop), each a result or an error."""
    from benchmark.evaluation import aio

    provider = OpenAIChatProvider(base_url=raw.base_url, api_key=API_KEY, max_attempts=1)
    outcomes = []
    for call in (
        lambda: provider.complete(request),
        lambda: aio.submit(provider.acomplete(request)).result(timeout=30),
    ):
        try:
            outcomes.append(call())
        except ProviderError as error:
            outcomes.append(error)
    aio.submit(provider.aclose()).result(timeout=30)
    return outcomes


@pytest.mark.parametrize(
    ("content_type", "body", "message", "retryable"),
    [
        (
            "application/json",
            b'{"error": {"message": "upstream overloaded"}}',
            "without choices: {'message': 'upstream overloaded'}",
            True,
        ),
        ("application/json", b"[1, 2]", "without choices", True),
        ("application/json", b"null", "without choices", True),
        ("text/html", b"<html>Welcome to nginx!</html>", "other than JSON", False),
    ],
)
def test_a_200_that_is_no_chat_completion_is_a_provider_error_either_way(
    content_type, body, message, retryable
):
    raw = _RawServer(200, content_type, body)
    try:
        outcomes = _complete_both_ways(raw, _request(ChatMessage("user", "Hi")))
    finally:
        raw.close()

    for outcome in outcomes:
        assert isinstance(outcome, ProviderError), outcome
        assert message in str(outcome) and outcome.retryable is retryable
    assert raw.posts == 2


@pytest.mark.parametrize(
    ("headers", "request_id"),
    [({"x-request-id": "req_from_header"}, "req_from_header"), ({}, "chatcmpl-7")],
)
def test_a_sparse_completion_reads_with_zero_usage_and_its_request_id(headers, request_id):
    # No usage at all and no token details: what some compatible servers send.
    body = b'{"id": "chatcmpl-7", "choices": [{"message": {"content": "Hi."}}]}'
    raw = _RawServer(200, "application/json", body, headers)
    try:
        outcomes = _complete_both_ways(raw, _request(ChatMessage("user", "Hi")))
    finally:
        raw.close()

    for result in outcomes:
        assert (result.text, result.request_id) == ("Hi.", request_id)
        assert (result.input_tokens, result.output_tokens, result.reasoning_tokens) == (0, 0, 0)


def test_calls_make_no_uuid4_and_no_sync_client_on_the_event_loop(server, monkeypatch):
    """The SDK's own idempotency key is a ``uuid4()`` per request, whose ``os.urandom`` lets go
    of the GIL mid-call on the event loop; the adapter gives its own. A worker never uses the
    sync client, so it is never built (an SSL context each)."""
    import uuid

    from benchmark.evaluation import aio

    made = []
    real_uuid4 = uuid.uuid4
    monkeypatch.setattr(uuid, "uuid4", lambda: made.append(1) or real_uuid4())
    provider = _provider(server)

    for i in range(3):
        aio.submit(provider.acomplete(_request(ChatMessage("user", f"n{i}")))).result(timeout=30)

    assert made == [] and len(server.requests()) == 3
    assert provider._client is None
    aio.submit(provider.aclose()).result(timeout=30)
