"""Reading the vendors' rate-limit headers (ratelimit_headers.py)."""

from datetime import UTC, datetime

import pytest
from multidict import CIMultiDict

from benchmark.providers.ratelimit_headers import (
    ObservedLimits,
    anthropic_limits,
    openai_limits,
    parse_go_duration,
    parse_rfc3339_in_s,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("1m30s", 90.0),
        ("120ms", 0.12),
        ("1.5s", 1.5),
        ("2h1m", 7260.0),
        ("17ms", 0.017),
        ("250us", 0.00025),
        ("0", 0.0),
        ("0s", 0.0),
    ],
)
def test_go_durations(text, seconds):
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "1", "s", "1x", "1m 30s", "-1s", "1s2", "ms"])
def test_what_is_not_a_go_duration(text):
    assert parse_go_duration(text) is None


def test_rfc3339_times_in_seconds_from_now():
    now = datetime(2026, 12, 6, 12, 0, 0, tzinfo=UTC)
    assert parse_rfc3339_in_s("2026-12-06T12:00:30Z", now=now) == 30.0
    assert parse_rfc3339_in_s("2026-12-06T13:00:01+01:00", now=now) == 1.0
    assert parse_rfc3339_in_s("2026-12-06T11:59:00Z", now=now) == 0.0  # past: no wait
    assert parse_rfc3339_in_s("2026-12-06T12:00:30", now=now) is None  # no zone
    assert parse_rfc3339_in_s("tomorrow", now=now) is None


def test_openai_headers():
    headers = CIMultiDict(
        {
            "X-RateLimit-Limit-Requests": "60",
            "X-RateLimit-Remaining-Requests": "59",
            "X-RateLimit-Reset-Requests": "1s",
            "X-RateLimit-Limit-Tokens": "150000",
            "X-RateLimit-Remaining-Tokens": "149984",
            "X-RateLimit-Reset-Tokens": "6m0s",
        }
    )
    assert openai_limits(headers) == ObservedLimits(
        rpm=60,
        tpm=150_000,
        remaining_requests=59,
        remaining_tokens=149_984,
        reset_requests_s=1.0,
        reset_tokens_s=360.0,
    )


def test_anthropic_headers():
    now = datetime(2026, 12, 6, 12, 0, 0, tzinfo=UTC)
    headers = CIMultiDict(
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": "2026-12-06T12:00:02Z",
            "anthropic-ratelimit-tokens-limit": "40000",
            "anthropic-ratelimit-tokens-remaining": "38000",
            "anthropic-ratelimit-tokens-reset": "2026-12-06T12:00:03Z",
            "anthropic-ratelimit-input-tokens-limit": "30000",
        }
    )
    assert anthropic_limits(headers, now=now) == ObservedLimits(
        rpm=50,
        tpm=40_000,
        remaining_requests=0,
        remaining_tokens=38_000,
        reset_requests_s=2.0,
        reset_tokens_s=3.0,
    )


def test_anthropic_input_token_limit_stands_in_for_a_missing_tokens_limit():
    headers = {
        "anthropic-ratelimit-input-tokens-limit": "30000",
        "anthropic-ratelimit-input-tokens-remaining": "29000",
    }
    limits = anthropic_limits(headers)
    assert (limits.rpm, limits.tpm, limits.remaining_tokens) == (None, 30_000, 29_000)


def test_absent_or_garbled_headers_are_none():
    assert openai_limits({}).empty
    garbled = openai_limits(
        {
            "x-ratelimit-limit-requests": "lots",
            "x-ratelimit-remaining-requests": "-3",
            "x-ratelimit-reset-requests": "soon",
            "x-ratelimit-limit-tokens": "0",
        }
    )
    assert garbled == ObservedLimits()
