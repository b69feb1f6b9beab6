"""Retries for transient vendor failures, and the mapping of SDK exceptions to ``ProviderError``.

Both SDKs are built with ``max_retries=0`` and retried here instead, so that every vendor gets one
policy, attempts are counted and reported, the rate limiter is consulted before *every* attempt,
and tests can inject ``sleep`` and ``rng``.

Policy: exponential backoff with full jitter after attempt n (``core.backoff``), but never
less than the server's ``retry-after-ms`` / ``Retry-After``. Retried: 408, 429, 5xx, connection
errors, timeouts, and ``ProviderError(retryable=True)`` raised by the attempt itself (e.g. a
truncated body). Every other 4xx fails at once. Anything that is not a vendor failure (a bug)
propagates unchanged — retrying a bug only hides it.

Messages name the vendor, the status and the server's own message; API keys are scrubbed from
them (real APIs quote the key they rejected), and the SDK exception is not chained, because its
text and request headers can carry the key into a logged traceback.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from benchmark.providers.base import ProviderError
from core.backoff import backoff_s

if TYPE_CHECKING:
    import anthropic
    import openai

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class _SDKErrors:
    status: tuple[type[openai.APIStatusError], type[anthropic.APIStatusError]]
    timeout: tuple[type[openai.APITimeoutError], type[anthropic.APITimeoutError]]
    connection: tuple[type[openai.APIConnectionError], type[anthropic.APIConnectionError]]
    validation: tuple[
        type[openai.APIResponseValidationError], type[anthropic.APIResponseValidationError]
    ]


@functools.cache
def _sdk_errors() -> _SDKErrors:
    """The SDKs' exception classes, imported on the first failure to classify rather than with
    this module: the SDKs are 3,700 modules and about 2 s of CPU, which every process that sets
    Django up (the registry imports this package) paid at start-up, whether it ever called a
    vendor or not. A call through an SDK has imported it already."""
    import anthropic
    import openai

    return _SDKErrors(
        status=(openai.APIStatusError, anthropic.APIStatusError),
        timeout=(openai.APITimeoutError, anthropic.APITimeoutError),
        connection=(openai.APIConnectionError, anthropic.APIConnectionError),
        validation=(openai.APIResponseValidationError, anthropic.APIResponseValidationError),
    )


# Key-shaped strings (OpenAI "sk-…", "sk-proj-…", Anthropic "sk-ant-…"), even partly masked.
_KEY_PATTERN = re.compile(r"\bsk-[A-Za-z0-9_\-*.]{6,}")
_MAX_SERVER_MESSAGE = 500


@dataclass(frozen=True)
class Failure:
    """One failed attempt, classified."""

    message: str
    status: int | None
    retryable: bool
    retry_after_s: float | None = None


def is_retryable_status(status: int) -> bool:
    """429 and 5xx are the vendors' "try again later"; 408 is a timeout reported as a status."""
    return status in (408, 429) or status >= 500


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return _KEY_PATTERN.sub("[redacted]", text)


def classify(exc: BaseException, *, vendor: str) -> Failure | None:
    """What a failed attempt means, or None if ``exc`` is not a vendor failure (a bug)."""
    if isinstance(exc, ProviderError):
        return Failure(str(exc), exc.status, exc.retryable)
    errors = _sdk_errors()
    if isinstance(exc, errors.status):
        status = exc.status_code
        detail = _server_message(exc)
        request_id = exc.request_id
        message = f"{vendor} returned HTTP {status}" + (f": {detail}" if detail else "")
        if request_id:
            message += f" (request id {request_id})"
        return Failure(
            message,
            status,
            is_retryable_status(status),
            retry_after_s=parse_retry_after(exc.response.headers),
        )
    if isinstance(exc, errors.timeout):  # before errors.connection: a subclass of it
        refused = _connect_failure(exc)
        if refused is not None:
            # The SDKs' aiohttp transport reports a refused connection as a connect timeout.
            return Failure(
                f"{vendor} could not be reached ({type(refused).__name__}: {refused})", None, True
            )
        return Failure(f"{vendor} did not answer before the timeout", None, True)
    if isinstance(exc, errors.connection):
        cause = exc.__cause__
        reason = f" ({type(cause).__name__}: {cause})" if cause else ""
        return Failure(f"{vendor} could not be reached{reason}", None, True)
    if isinstance(exc, errors.validation):
        return Failure(f"{vendor} sent a response that does not fit its API schema", 200, True)
    return None


def _connect_failure(exc: BaseException) -> OSError | None:
    """The socket error under ``exc`` (refused, reset, unreachable), if it is not a timeout."""
    seen: set[int] = set()
    cause = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and not isinstance(cause, TimeoutError):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


def parse_retry_after(headers: Any) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms`` (OpenAI, Anthropic), else
    ``Retry-After`` as seconds or as an HTTP date (RFC 9110 §10.2.3)."""
    if headers is None:
        return None
    try:
        return max(0.0, float(headers.get("retry-after-ms")) / 1000)
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts, how long between them; shared by the blocking and the async loop."""

    max_attempts: int = 5
    base_s: float = 0.5
    cap_s: float = 30.0
    rng: Callable[[], float] = random.random
    vendor: str = "provider"
    secrets: tuple[str, ...] = ()
    max_retry_after_s: float = 300.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def wait_after(self, exc: Exception, attempt: int) -> float | None:
        """Seconds to wait before the next attempt after ``exc`` ended attempt ``attempt``.
        Raises ``ProviderError`` when there is no next attempt; returns None when ``exc`` is not
        a vendor failure (a bug: the caller re-raises it)."""
        failure = classify(exc, vendor=self.vendor)
        if failure is None:
            return None
        message = redact(failure.message, self.secrets)
        wait_s = max(
            backoff_s(attempt, base_s=self.base_s, cap_s=self.cap_s, rng=self.rng),
            failure.retry_after_s or 0.0,
        )
        waiting_too_long = (failure.retry_after_s or 0.0) > self.max_retry_after_s
        if not failure.retryable or attempt == self.max_attempts or waiting_too_long:
            tries = "1 attempt" if attempt == 1 else f"{attempt} attempts"
            if waiting_too_long:
                message += f"; it asked to retry after {failure.retry_after_s:.0f} s"
            raise ProviderError(
                f"{message} [{tries}]",
                status=failure.status,
                retryable=failure.retryable,
                attempts=attempt,
            ) from None
        logger.info(
            "attempt %d/%d failed, retrying in %.2f s: %s",
            attempt,
            self.max_attempts,
            wait_s,
            message,
        )
        return wait_s


def call_with_retries(
    fn: Callable[[int], T],
    *,
    max_attempts: int = 5,
    base_s: float = 0.5,
    cap_s: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
    rng: Callable[[], float] = random.random,
    vendor: str = "provider",
    secrets: Iterable[str] = (),
    max_retry_after_s: float = 300.0,
) -> T:
    """``fn(attempt)`` (attempt counts from 1) until it succeeds, fails for good, or
    ``max_attempts`` are spent. Raises ``ProviderError`` with ``attempts`` set.

    A server that asks for a wait longer than ``max_retry_after_s`` is not waited for: the error
    is raised at once, still ``retryable``, so the caller can reschedule the whole unit instead of
    holding a worker thread for minutes."""
    policy = RetryPolicy(
        max_attempts=max_attempts,
        base_s=base_s,
        cap_s=cap_s,
        rng=rng,
        vendor=vendor,
        secrets=tuple(secrets),
        max_retry_after_s=max_retry_after_s,
    )
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn(attempt)
        except Exception as exc:
            wait_s = policy.wait_after(exc, attempt)
            if wait_s is None:
                raise
        sleep(wait_s)


async def acall_with_retries(
    fn: Callable[[int], Awaitable[T]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """The async twin of ``call_with_retries``: the same policy, waits that do not block the
    event loop."""
    attempt = 0
    while True:
        attempt += 1
        try:
            return await fn(attempt)
        except Exception as exc:
            wait_s = policy.wait_after(exc, attempt)
            if wait_s is None:
                raise
        await sleep(wait_s)


def malformed_body_error(vendor: str) -> ProviderError:
    """A 200 whose JSON body does not parse: almost always a truncated transfer, so retryable."""
    return ProviderError(f"{vendor} sent a malformed JSON body", status=200, retryable=True)


def _server_message(exc: Any) -> str:
    """The server's own error message: Anthropic's ``error.message``, OpenAI's ``error.message``
    (the SDK unwraps ``error``), else the raw body (e.g. a proxy's HTML page), shortened."""
    message = getattr(exc, "api_message", None)
    body = exc.body
    if not message and isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else None
    if not message and isinstance(body, str):
        message = body
    message = " ".join(str(message or "").split())
    if len(message) > _MAX_SERVER_MESSAGE:
        message = message[:_MAX_SERVER_MESSAGE] + "…"
    return message


def reject_reserved(params: Iterable[str], reserved: frozenset[str]) -> None:
    """Parameters the provider sets itself cannot come from an endpoint's or request's params."""
    clash = reserved.intersection(params)
    if clash:
        raise ProviderError(
            f"parameter(s) {', '.join(sorted(clash))} cannot be set in params",
            retryable=False,
            attempts=0,  # nothing was sent
        )


def timed_call_with_retries(
    send: Callable[[], Any],
    to_result: Callable[[Any, float, int], Any],
    *,
    limiter: Any,
    estimated_tokens: int,
    sleep: Callable[[float], None],
    max_attempts: int,
    vendor: str,
    secrets: Iterable[str],
) -> Any:
    """The attempt loop both SDK providers share: take a limiter slot for every attempt, time
    the successful one alone (no backoff, no limiter wait), retry transient failures."""

    def attempt(number: int) -> Any:
        with limiter.acquire(estimated_tokens, sleep=sleep):
            started = time.monotonic()
            try:
                response = send()
            except json.JSONDecodeError:
                raise malformed_body_error(vendor) from None
            latency_s = time.monotonic() - started
        return to_result(response, latency_s, number)

    return call_with_retries(
        attempt, max_attempts=max_attempts, sleep=sleep, vendor=vendor, secrets=secrets
    )


async def atimed_call_with_retries(
    send: Callable[[], Awaitable[Any]],
    to_result: Callable[[Any, float, int], Any],
    *,
    limiter: Any,
    estimated_tokens: int,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    max_attempts: int,
    vendor: str,
    secrets: Iterable[str],
) -> Any:
    """``timed_call_with_retries`` on an event loop: the limiter is awaited, not slept on."""

    async def attempt(number: int) -> Any:
        lease = await limiter.aacquire(estimated_tokens)
        with lease:
            started = time.monotonic()
            try:
                response = await send()
            except json.JSONDecodeError:
                raise malformed_body_error(vendor) from None
            latency_s = time.monotonic() - started
        return to_result(response, latency_s, number)

    policy = RetryPolicy(max_attempts=max_attempts, vendor=vendor, secrets=tuple(secrets))
    return await acall_with_retries(attempt, policy, sleep=sleep)
