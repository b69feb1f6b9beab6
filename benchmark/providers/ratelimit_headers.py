"""The vendors' rate-limit response headers, read into one shape (``ObservedLimits``).

Why: an endpoint with no limits configured learns them from these headers, which both vendors
send on every response, 429s included (ratelimit.py stores what is learnt in the shared
limiter, so every worker obeys it).

- OpenAI: ``x-ratelimit-limit-requests`` / ``-tokens`` (per minute), ``x-ratelimit-remaining-*``
  and ``x-ratelimit-reset-*``, the time until the budget is full again as a Go duration
  ("1s", "6m0s", "1m30s", "120ms").
- Anthropic: ``anthropic-ratelimit-requests-limit`` / ``-remaining`` / ``-reset`` (an RFC 3339
  time), and the same for ``tokens`` (the most restrictive of its token limits). An account with
  separate input and output limits also sends ``input-tokens-*`` and ``output-tokens-*``; when
  ``tokens-*`` is absent the input limit is used, which over-counts (our token estimate includes
  the output budget), i.e. errs on the safe side.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|h|m|s)")
_UNIT_S = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


@dataclass(frozen=True)
class ObservedLimits:
    """What one response said; any part the server did not send is ``None``."""

    rpm: int | None = None
    tpm: int | None = None
    remaining_requests: int | None = None
    remaining_tokens: int | None = None
    reset_requests_s: float | None = None
    """Seconds until the request budget is full again."""
    reset_tokens_s: float | None = None

    @property
    def empty(self) -> bool:
        return self.rpm is None and self.tpm is None


def parse_go_duration(value: str) -> float | None:
    """Seconds in a Go duration such as "6m0s", "1m30s", "120ms", "1.5s"; None if it is not one."""
    text = value.strip()
    if not text:
        return None
    if text == "0":
        return 0.0
    position, total = 0, 0.0
    for match in _GO_DURATION.finditer(text):
        if match.start() != position:
            return None
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        position = match.end()
    return total if position == len(text) else None


def parse_rfc3339_in_s(value: str, *, now: datetime | None = None) -> float | None:
    """Seconds from ``now`` until the RFC 3339 time ``value`` (never negative); None if it is
    not one."""
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _int(headers: Mapping[str, str], name: str) -> int | None:
    value = headers.get(name)
    if value is None:
        return None
    try:
        number = int(float(value))
    except ValueError:
        return None
    return number if number >= 0 else None


def _positive(number: int | None) -> int | None:
    return number if number else None


def _reset(value: str | None, parse) -> float | None:
    return None if value is None else parse(value)


def openai_limits(headers: Mapping[str, str]) -> ObservedLimits:
    return ObservedLimits(
        rpm=_positive(_int(headers, "x-ratelimit-limit-requests")),
        tpm=_positive(_int(headers, "x-ratelimit-limit-tokens")),
        remaining_requests=_int(headers, "x-ratelimit-remaining-requests"),
        remaining_tokens=_int(headers, "x-ratelimit-remaining-tokens"),
        reset_requests_s=_reset(headers.get("x-ratelimit-reset-requests"), parse_go_duration),
        reset_tokens_s=_reset(headers.get("x-ratelimit-reset-tokens"), parse_go_duration),
    )


def anthropic_limits(headers: Mapping[str, str], *, now: datetime | None = None) -> ObservedLimits:
    tokens = "tokens" if headers.get("anthropic-ratelimit-tokens-limit") else "input-tokens"

    def rfc3339(value: str) -> float | None:
        return parse_rfc3339_in_s(value, now=now)

    return ObservedLimits(
        rpm=_positive(_int(headers, "anthropic-ratelimit-requests-limit")),
        tpm=_positive(_int(headers, f"anthropic-ratelimit-{tokens}-limit")),
        remaining_requests=_int(headers, "anthropic-ratelimit-requests-remaining"),
        remaining_tokens=_int(headers, f"anthropic-ratelimit-{tokens}-remaining"),
        reset_requests_s=_reset(headers.get("anthropic-ratelimit-requests-reset"), rfc3339),
        reset_tokens_s=_reset(headers.get(f"anthropic-ratelimit-{tokens}-reset"), rfc3339),
    )
