"""What the provider tests share: a fake vendor server speaking both wire formats, and an
unsaved endpoint (the factory reads its fields only)."""

import uuid

import pytest

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
