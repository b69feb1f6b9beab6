"""Renderings shared between web processes (core/render_cache.py), against a real Redis.

Each test keeps its entries under a fresh key prefix and deletes them after, so a value it
plants never reaches another test. Skipped, saying why, only when no Redis answers."""

import logging
import runpy
import socket
import uuid

import pytest
import redis
from django.conf import settings as django_settings
from django.core.cache import caches

from core import render_cache
from core.markdown import _readable_short, _render, _render_here, readable
from tests.texts import rendered_of

REDIS_URL = django_settings.REDIS_URL or "redis://127.0.0.1:6379/15"

# A reply as models write them: long enough to be shared (SHARED_FROM_CHARS).
REPLY = "## Plan\n\n" + "".join(
    f"{n}. **Step {n}**: pack the `stand` last, see [notes](https://example.org/{n}).\n"
    for n in range(1, 40)
)


def _redis_answers() -> bool:
    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _caches(location: str, prefix: str) -> dict:
    return {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "rendered": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": location,
            "KEY_PREFIX": prefix,
            "OPTIONS": {"socket_connect_timeout": 0.25, "socket_timeout": 0.25},
        },
    }


def _forget_in_process() -> None:
    """As a process that has rendered nothing yet."""
    _render.cache_clear()
    _readable_short.cache_clear()


@pytest.fixture
def shared(settings):
    if not _redis_answers():
        pytest.skip(f"no Redis answers at {REDIS_URL}")
    prefix = f"test-{uuid.uuid4().hex}"
    settings.CACHES = _caches(REDIS_URL, prefix)
    render_cache.reset()
    _forget_in_process()
    yield caches["rendered"]
    client = redis.Redis.from_url(REDIS_URL)
    for name in client.scan_iter(f"{prefix}:*"):
        client.delete(name)
    _forget_in_process()


def test_a_long_text_rendered_in_one_process_is_read_back_in_another(shared):
    first = readable(REPLY)
    stored = shared.get(render_cache.key(REPLY))
    assert stored == _render_here(REPLY) and rendered_of(first).strip() == stored.strip()
    assert render_cache.RENDERER in render_cache.key(REPLY)

    # What another process finds is what it shows: it does not render the text again.
    shared.set(render_cache.key(REPLY), "<p>as stored by another process</p>")
    _forget_in_process()
    assert "<p>as stored by another process</p>" in readable(REPLY)


def test_a_short_text_is_rendered_where_it_is_shown_and_not_stored(shared):
    text = "**Pack the stand last.**"
    assert len(text) < render_cache.SHARED_FROM_CHARS
    assert "<strong>Pack the stand last.</strong>" in readable(text)
    assert shared.get(render_cache.key(text)) is None


def test_keys_are_the_content_alone():
    # The same text has one key whoever shows it; texts differing by a character have two.
    assert render_cache.key(REPLY) == render_cache.key(str(REPLY))
    assert render_cache.key(REPLY) != render_cache.key(REPLY + " ")
    name = render_cache.key(REPLY)
    assert name.startswith(f"md:{render_cache.RENDERER}:") and "Step" not in name


def test_an_unreachable_cache_costs_rendering_not_the_page(settings, caplog):
    settings.CACHES = _caches(f"redis://127.0.0.1:{_closed_port()}/0", "unreachable")
    render_cache.reset()
    _forget_in_process()
    try:
        with caplog.at_level(logging.WARNING, logger="core.render_cache"):
            assert rendered_of(readable(REPLY)).strip() == _render_here(REPLY).strip()
            other = REPLY.replace("stand", "tent")
            assert "tent" in readable(other)
        # One warning, then the cache is left alone: the second text did not try it.
        warnings = [r for r in caplog.records if r.name == "core.render_cache"]
        assert len(warnings) == 1 and "ConnectionError" in warnings[0].getMessage()
        assert render_cache._resting()
    finally:
        render_cache.reset()
        _forget_in_process()


def test_the_cache_is_redis_at_render_cache_url_else_redis_url_else_none(monkeypatch):
    path = django_settings.BASE_DIR / "proactweb" / "settings.py"

    def rendered_cache(**env: str) -> dict:
        for name in ("REDIS_URL", "RENDER_CACHE_URL"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return runpy.run_path(str(path))["CACHES"]["rendered"]

    assert rendered_cache()["BACKEND"].endswith("DummyCache")  # the embedded default
    from_broker = rendered_cache(REDIS_URL="redis://broker:6379/0")
    assert from_broker["BACKEND"].endswith("RedisCache")
    assert from_broker["LOCATION"] == "redis://broker:6379/0"
    own = rendered_cache(REDIS_URL="redis://broker:6379/0", RENDER_CACHE_URL="redis://c:6379/3")
    assert own["LOCATION"] == "redis://c:6379/3"
