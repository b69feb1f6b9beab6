"""What the provider tests share: a fake vendor server speaking both wire formats, an unsaved
endpoint (the factory reads its fields only), and a real Redis for the shared limiters.

Redis tests use REDIS_URL or redis://127.0.0.1:6379/15 and a fresh key prefix per test; they
are skipped, saying why, only when no Redis answers there."""

import os
import uuid

import pytest
import redis

from benchmark.models import ModelEndpoint
from benchmark.providers.base import ChatMessage, ChatRequest
from tests.fakes.vendor_server import FakeVendorServer


@pytest.fixture
def server():
    with FakeVendorServer() as running:
        yield running


def unsaved_endpoint(provider: str, *, model_name: str, **fields) -> ModelEndpoint:
    """A unique name keeps rate limiters apart per test."""
    fields.setdefault("name", f"ep-{uuid.uuid4().hex[:12]}")
    return ModelEndpoint(
        provider=provider, display_name="Test endpoint", model_name=model_name, **fields
    )


def hello(model: str) -> ChatRequest:
    return ChatRequest(model=model, messages=(ChatMessage("user", "hello"),))


REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/15"


def redis_test_client() -> redis.Redis:
    return redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)


@pytest.fixture
def redis_client():
    client = redis_test_client()
    try:
        client.ping()
    except redis.ConnectionError as exc:
        pytest.skip(f"no Redis answers at REDIS_URL or the default test URL ({exc})")
    yield client
    client.close()


@pytest.fixture
def prefix(redis_client):
    key_prefix = f"test:ratelimit:{uuid.uuid4().hex}"
    yield key_prefix
    keys = list(redis_client.scan_iter(f"{key_prefix}:*"))
    if keys:
        redis_client.delete(*keys)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
