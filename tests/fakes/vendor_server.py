"""A real local HTTP server speaking the OpenAI and Anthropic wire formats, with scripted faults.

Why a server and not mocks: retries, timeouts, Retry-After parsing, connection pooling and error
mapping live in the vendor SDKs and in our providers *together*; only real HTTP exercises both.

Two routes, one per wire format:

- ``POST /v1/chat/completions`` — OpenAI Chat Completions (any OpenAI-compatible server looks
  like this); request id in the ``x-request-id`` header.
- ``POST /v1/messages`` — Anthropic Messages; request id in the ``request-id`` header.

A message's content may be a string or a list of parts (text and images, in each vendor's
shape); the parts are checked as the vendors check them and refused with the vendor's own 400
(``vendor_images.py``), and images are billed inside the prompt tokens of the usage.

Rate limits (``RateLimits``, per model as the vendors count them): requests and tokens per
minute, each a token bucket that holds one minute's budget and refills continuously (Anthropic
documents exactly this; OpenAI's limits behave alike over a minute). A request is counted when
it arrives: 1 request, and tokens = prompt characters / 4 (every message's text, plus
Anthropic's ``system``) + its images as the fake bills them + the output budget (``max_tokens``
/ ``max_completion_tokens``, 1024 when absent), which is how OpenAI counts a request before it
knows the output; a request for more tokens than a minute's budget is counted as a full minute.
Over a limit it is answered at once with 429 and ``retry-after`` (whole seconds until it would
fit) and takes nothing from the buckets (the real vendors may also count refused requests; the
fake does not). Every response for a limited model carries the vendor's headers, as they stood
when the request was admitted (a vendor counts it at its gateway): OpenAI
``x-ratelimit-limit-*``, ``x-ratelimit-remaining-*`` and ``x-ratelimit-reset-*`` (time until
full, as "6m0s"), for ``requests`` and ``tokens``; Anthropic
``anthropic-ratelimit-{requests,tokens}-limit``, ``-remaining`` and ``-reset`` (RFC 3339).
Anthropic's separate input/output token limits are not modelled: its ``tokens`` headers (the
most restrictive limit) describe the one bucket.
The server also records the most requests it ever held at once (``max_in_flight``).

Behaviour is scriptable: a reply function (request JSON → text), a FIFO of ``Fault``s applied to
the next requests, a fixed latency, seeded probabilistic faults (``FaultRates``) for fault
campaigns, and a gate that holds every response until the test opens it. Every request is logged
(``LoggedRequest``) with its body, a hash of (model, messages, params), the status returned and
whether the response was written in full or the client had already gone.

In-process use (tests)::

    with FakeVendorServer() as server:
        server.script(Fault.rate_limited(retry_after_s=2), Fault.server_error())
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="k", max_retries=0)

As a separate process (benchmarks; GET /_fake/stats and /_fake/log report what it served)::

    python -m tests.fakes.vendor_server --port 8765 --latency-ms 200 --rate-429 0.02 --seed 7
    python -m tests.fakes.vendor_server --latency-ms 200 --rpm 600 --tpm 2000000

(``/_fake/log`` rows carry each request's hash, status, outcome and the fault applied, which is
how bench/fault_campaign.py finds repeated calls.)

It is deliberately CPU-light (no access log, one JSON parse and one hash per request) because a
benchmark drives ~20,000 requests at 64 concurrency through it on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hashlib
import itertools
import json
import math
import random
import signal
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Self

from aiohttp import web

from tests.fakes import vendor_images

Api = Literal["openai", "anthropic"]
Outcome = Literal["pending", "completed", "aborted", "dropped"]


@dataclass(frozen=True)
class Reply:
    """What the fake model answers. ``text=None`` produces an empty reply (null content in the
    OpenAI format, no content blocks in the Anthropic one)."""

    text: str | tuple[str, ...] | None
    """A tuple becomes one Anthropic text block per part (joined for OpenAI)."""
    reasoning_tokens: int = 0
    finish_reason: str = "stop"
    """In OpenAI's vocabulary ("stop", "length", "content_filter"); mapped for Anthropic."""
    thinking: str | None = None
    """Anthropic only: a thinking block before the text blocks."""

    def joined_text(self) -> str | None:
        return "".join(self.text) if isinstance(self.text, tuple) else self.text


ReplyFn = Callable[[dict[str, Any]], "str | Reply"]


def echo_reply(body: dict[str, Any]) -> str:
    """Deterministic default: echo the last message, so a test can tell requests apart."""
    messages = body.get("messages") or [{}]
    content = messages[-1].get("content", "")
    if isinstance(content, list):  # Anthropic content blocks
        content = " ".join(block.get("text", "") for block in content if isinstance(block, dict))
    return f"echo: {content}"


BENCH_QUOTE = "remember to pack the charger"


def bench_reply(body: dict[str, Any]) -> str:
    """For pipeline benchmarks: a model answers with a reply that contains BENCH_QUOTE; a judge
    (any model whose name contains "judge") answers a valid verdict quoting it, the verdict
    varying deterministically with the request so the statistics have something to show."""
    identity = json.dumps([body.get("model"), body.get("messages")]).encode()
    digest = hashlib.blake2b(identity, digest_size=4).hexdigest()
    if "judge" in str(body.get("model", "")):
        verdict = ("PASS", "PARTIAL", "FAIL")[int(digest, 16) % 3]
        return json.dumps(
            {"verdict": verdict, "rationale": "Benchmark verdict.", "evidence": BENCH_QUOTE}
        )
    return f"Reply {digest}: happy to help, and {BENCH_QUOTE} before you leave."


@dataclass(frozen=True)
class Fault:
    """One scripted misbehaviour, applied to one request. Build with the class methods."""

    kind: Literal["status", "slow", "malformed", "disconnect", "unsupported_image"]
    status: int = 200
    message: str = ""
    retry_after: str | None = None
    """Value of the ``Retry-After`` header (seconds), if any."""
    retry_after_ms: str | None = None
    """Value of the non-standard ``retry-after-ms`` header, if any."""
    delay_s: float = 0.0

    @classmethod
    def rate_limited(
        cls, *, retry_after_s: float | None = 1.0, retry_after_ms: int | None = None
    ) -> Fault:
        return cls(
            "status",
            status=429,
            message="Rate limit reached for requests. Please try again later.",
            retry_after=None if retry_after_s is None else f"{retry_after_s:g}",
            retry_after_ms=None if retry_after_ms is None else str(retry_after_ms),
        )

    @classmethod
    def server_error(cls, status: int = 500) -> Fault:
        return cls(
            "status", status=status, message="The server had an error processing your request."
        )

    @classmethod
    def bad_request(cls, message: str = "Invalid value for 'temperature'.") -> Fault:
        return cls("status", status=400, message=message)

    @classmethod
    def unauthorized(cls) -> Fault:
        """Like the real APIs, the message quotes the key the client presented — which is why
        providers must scrub keys from error messages."""
        return cls("status", status=401, message="Incorrect API key provided: {api_key}.")

    @classmethod
    def unsupported_image(cls) -> Fault:
        """HTTP 400 with the vendor's own error for an image the model cannot take (OpenAI: an
        image sent to a text-only model; Anthropic: an image it could not process), whatever
        the request carried. ``FakeVendorServer.text_only_models`` does the same for chosen
        models on requests that do carry an image."""
        return cls("unsupported_image", status=400)

    @classmethod
    def slow(cls, delay_s: float) -> Fault:
        """Answer normally, but only after ``delay_s`` (longer than the client's timeout)."""
        return cls("slow", delay_s=delay_s)

    @classmethod
    def malformed(cls) -> Fault:
        """HTTP 200 with a JSON content type and a truncated JSON body."""
        return cls("malformed")

    @classmethod
    def disconnect(cls) -> Fault:
        """Close the connection without answering (a connection error for the client)."""
        return cls("disconnect")


@dataclass(frozen=True)
class FaultRates:
    """Probabilistic faults for fault campaigns, drawn from ``random.Random(seed)`` so a campaign
    is repeatable. Scripted faults take precedence.

    The first three are HTTP faults (one draw per request). The last two spoil what a *judge*
    (a model whose name contains "judge") answers with HTTP 200, for replies that are JSON
    objects with an ``evidence`` key (``bench_reply``): the JSON cut short, or an evidence quote
    that does not occur in the reply being judged."""

    rate_429: float = 0.0
    rate_500: float = 0.0
    rate_timeout: float = 0.0
    timeout_delay_s: float = 30.0
    retry_after_s: float = 1.0
    rate_malformed_judge: float = 0.0
    rate_absent_evidence: float = 0.0
    seed: int = 0


ABSENT_QUOTE = "a sentence the reply never contained"

DEFAULT_OUTPUT_TOKENS = 1024
"""Output budget counted for a request that names none (as the client's estimate does)."""


@dataclass(frozen=True)
class RateLimits:
    """Per-model limits the server enforces (see the module docstring); ``None`` is unlimited.
    ``models``: the model names they apply to (``None``: every model), e.g. to leave a judge
    unlimited while the models under test are limited."""

    rpm: int | None = None
    tpm: int | None = None
    models: frozenset[str] | None = None
    start_empty: bool = False
    """Buckets empty when the server starts, as if another client had just spent the minute's
    budget (refilling from then on): a benchmark then sees the sustained rate at once instead
    of a minute's burst first (bench/hosts.py)."""

    def applies_to(self, model: str) -> bool:
        return bool(self.rpm or self.tpm) and (self.models is None or model in self.models)


class _Bucket:
    """One model's request and token buckets; used on the server's loop thread only."""

    def __init__(self, limits: RateLimits, now: float, *, emptied_at: float) -> None:
        self.rpm, self.tpm = limits.rpm, limits.tpm
        if limits.start_empty:
            # Empty at ``emptied_at`` (the server's start), not at the model's first request:
            # a client that emptied its own bucket after the server started is never ahead.
            self.requests = self.tokens = 0.0
            self.updated = emptied_at
            self.refill(now)
        else:
            self.requests = float(self.rpm or 0)
            self.tokens = float(self.tpm or 0)
            self.updated = now

    def refill(self, now: float) -> None:
        elapsed = max(0.0, now - self.updated)
        self.updated = now
        if self.rpm:
            self.requests = min(self.rpm, self.requests + elapsed * self.rpm / 60)
        if self.tpm:
            self.tokens = min(self.tpm, self.tokens + elapsed * self.tpm / 60)

    def take(self, tokens: int, now: float) -> float:
        """Take 1 request and ``tokens`` (returns 0.0), or nothing and the seconds to wait."""
        self.refill(now)
        wait_s = 0.0
        if self.rpm and self.requests < 1:
            wait_s = (1 - self.requests) * 60 / self.rpm
        if self.tpm:
            tokens = min(tokens, self.tpm)
            if self.tokens < tokens:
                wait_s = max(wait_s, (tokens - self.tokens) * 60 / self.tpm)
        if wait_s > 0:
            return wait_s
        if self.rpm:
            self.requests -= 1
        if self.tpm:
            self.tokens -= tokens
        return 0.0

    def headers(self, api: Api) -> dict[str, str]:
        headers: dict[str, str] = {}
        for kind, limit, level in (
            ("requests", self.rpm, self.requests),
            ("tokens", self.tpm, self.tokens),
        ):
            if not limit:
                continue
            until_full_s = (limit - level) * 60 / limit
            if api == "openai":
                headers[f"x-ratelimit-limit-{kind}"] = str(limit)
                headers[f"x-ratelimit-remaining-{kind}"] = str(max(0, math.floor(level)))
                headers[f"x-ratelimit-reset-{kind}"] = go_duration(until_full_s)
            else:
                full_at = datetime.now(UTC) + timedelta(seconds=until_full_s)
                headers[f"anthropic-ratelimit-{kind}-limit"] = str(limit)
                headers[f"anthropic-ratelimit-{kind}-remaining"] = str(max(0, math.floor(level)))
                headers[f"anthropic-ratelimit-{kind}-reset"] = full_at.isoformat(
                    timespec="seconds"
                ).replace("+00:00", "Z")
        return headers


def go_duration(seconds: float) -> str:
    """OpenAI's reset format (a Go duration): "120ms", "1.5s", "6m0s", "1h2m3s"."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    minutes, rest = divmod(seconds, 60)
    hours, minutes = divmod(int(minutes), 60)
    text = f"{round(rest, 3):g}s"
    if minutes or hours:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return text


def counted_tokens(api: Api, body: Any) -> int:
    """Tokens a request is counted for (the module docstring): prompt characters / 4 plus the
    output budget."""
    if not isinstance(body, dict):
        return DEFAULT_OUTPUT_TOKENS
    characters = _characters(body.get("messages"))
    if api == "anthropic":
        characters += _characters(body.get("system") or "")
    budget = body.get("max_completion_tokens") or body.get("max_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        budget = DEFAULT_OUTPUT_TOKENS
    return characters // 4 + _image_tokens(body) + budget


def _characters(value: Any) -> int:
    """Characters of text in messages: string contents and text blocks."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_characters(v) for k, v in value.items() if k in ("content", "text"))
    if isinstance(value, list):
        return sum(_characters(v) for v in value)
    return 0


@dataclass
class LoggedRequest:
    seq: int
    api: Api
    body: Any
    """The parsed JSON body, or None if it was not JSON."""
    headers: dict[str, str]
    request_hash: str
    status: int | None = None
    received_s: float = dataclasses.field(default_factory=time.monotonic)
    """When it arrived (the server's monotonic clock)."""
    completed_s: float | None = None
    """When its response was written in full (outcome "completed")."""
    fault: str = ""
    """The fault applied, if any: 429, 500, timeout, malformed, disconnect, malformed_judge,
    absent_evidence."""
    outcome: Outcome = "pending"
    """"completed": written in full; "aborted": the client was gone (e.g. after its timeout);
    "dropped": the server closed the connection on purpose (``Fault.disconnect``)."""


def request_hash(body: Any) -> str:
    """Hash of (model, messages, params) where params is every other top-level key — the same
    call sent twice hashes the same, whichever client sent it."""
    if not isinstance(body, dict):
        return hashlib.sha256(repr(body).encode()).hexdigest()
    params = {k: v for k, v in body.items() if k not in ("model", "messages")}
    identity = {"model": body.get("model"), "messages": body.get("messages"), "params": params}
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _words(value: Any) -> int:
    """Whitespace word count of every string inside ``value``: a cheap stand-in for tokens."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, dict):
        return sum(_words(v) for k, v in value.items() if k in ("content", "text"))
    if isinstance(value, list):
        return sum(_words(v) for v in value)
    return 0


def _image_tokens(body: dict[str, Any]) -> int:
    """What the fake bills for the request's images: like the vendors, inside the prompt's
    input tokens."""
    return vendor_images.FAKE_IMAGE_TOKENS * vendor_images.image_count(body)


_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_OPENAI_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    429: ("requests", "rate_limit_exceeded"),
}
_ANTHROPIC_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"}


class FakeVendorServer:
    """See the module docstring. Thread-safe: tests read the log and open the gate from their
    own threads while the server's event loop runs in a background thread."""

    def __init__(
        self,
        *,
        reply: ReplyFn = echo_reply,
        latency_s: float = 0.0,
        fault_rates: FaultRates | None = None,
        rate_limits: RateLimits | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.reply = reply
        self.rate_limits = rate_limits or RateLimits()
        self._buckets: dict[tuple[Api, str], _Bucket] = {}
        self._started = time.monotonic()
        self.in_flight = 0
        self.max_in_flight = 0
        """The most requests held at once (arrived, response not yet written)."""
        self.latency_s = latency_s
        self.fault_rates = fault_rates or FaultRates()
        self.text_only_models: set[str] = set()
        """Models that refuse any image with their vendor's error (vendor_images.py)."""
        self._rng = random.Random(self.fault_rates.seed)
        self._host, self._requested_port = host, port
        self.port = 0
        self._faults: deque[Fault] = deque()
        self._log: list[LoggedRequest] = []
        self._log_changed = threading.Condition()
        self._seq = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._gate: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None

    # --- Lifecycle ------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """What to pass as ``base_url`` to ``openai.OpenAI`` (it appends /chat/completions)."""
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """What to pass as ``base_url`` to ``anthropic.Anthropic`` (it appends /v1/messages)."""
        return self.base_url

    def start(self) -> Self:
        self._started = time.monotonic()
        self._ready.clear()
        self._startup_error = None
        self._thread = threading.Thread(target=self._run_loop, name="fake-vendor", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("FakeVendorServer did not start within 10 s")
        if self._startup_error is not None:
            raise RuntimeError("FakeVendorServer failed to start") from self._startup_error
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        # Release held responses first, so shutdown does not wait on a closed gate.
        loop.call_soon_threadsafe(self._set_gate, True)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run_loop(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            loop.run_until_complete(self._start_site())
        except BaseException as exc:  # reported to start() in the caller's thread
            self._startup_error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            assert self._runner is not None
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

    async def _start_site(self) -> None:
        self._gate = asyncio.Event()
        self._gate.set()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handle_openai)
        app.router.add_post("/v1/messages", self._handle_anthropic)
        app.router.add_get("/_fake/stats", self._handle_stats)
        app.router.add_get("/_fake/log", self._handle_log)
        # No access log and a short shutdown: both matter at benchmark volume and in test teardown.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._requested_port))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock, backlog=1024).start()

    # --- Scripting --------------------------------------------------------------------------------

    def script(self, *faults: Fault) -> None:
        """Queue faults for the next ``len(faults)`` requests, in order (either API)."""
        with self._log_changed:
            self._faults.extend(faults)

    def close_gate(self) -> None:
        """Hold every response (already received or not) until ``open_gate``."""
        self._call_in_loop(self._set_gate, False)

    def open_gate(self) -> None:
        self._call_in_loop(self._set_gate, True)

    def _call_in_loop(self, fn: Callable[..., None], *args: Any) -> None:
        if self._loop is None:
            raise RuntimeError("the server is not running")
        done = threading.Event()

        def call() -> None:
            fn(*args)
            done.set()

        self._loop.call_soon_threadsafe(call)
        done.wait(5)

    def _set_gate(self, is_open: bool) -> None:
        if self._gate is not None:
            self._gate.set() if is_open else self._gate.clear()

    def _next_fault(self) -> Fault | None:
        with self._log_changed:
            if self._faults:
                return self._faults.popleft()
        rates = self.fault_rates
        if not (rates.rate_429 or rates.rate_500 or rates.rate_timeout):
            return None
        draw = self._rng.random()  # only ever called on the loop thread
        if draw < rates.rate_429:
            return Fault.rate_limited(retry_after_s=rates.retry_after_s)
        if draw < rates.rate_429 + rates.rate_500:
            return Fault.server_error()
        if draw < rates.rate_429 + rates.rate_500 + rates.rate_timeout:
            return Fault.slow(rates.timeout_delay_s)
        return None

    def _spoil_judgment(self, reply: Reply, entry: LoggedRequest) -> Reply:
        rates = self.fault_rates
        if not (rates.rate_malformed_judge or rates.rate_absent_evidence):
            return reply
        draw = self._rng.random()  # on the loop thread, like _next_fault
        text = reply.joined_text() or ""
        if draw < rates.rate_malformed_judge:
            entry.fault = "malformed_judge"
            return dataclasses.replace(reply, text=text[: max(1, len(text) // 2)])
        if draw < rates.rate_malformed_judge + rates.rate_absent_evidence:
            try:
                verdict = json.loads(text)
            except ValueError:
                return reply
            if isinstance(verdict, dict) and "evidence" in verdict:
                entry.fault = "absent_evidence"
                return dataclasses.replace(
                    reply, text=json.dumps({**verdict, "evidence": ABSENT_QUOTE})
                )
        return reply

    # --- The log ----------------------------------------------------------------------------------

    def requests(self) -> list[LoggedRequest]:
        """A snapshot (copies) of every request received so far, in arrival order."""
        with self._log_changed:
            return [dataclasses.replace(entry) for entry in self._log]

    def wait_for(
        self, predicate: Callable[[list[LoggedRequest]], bool], *, timeout_s: float = 5.0
    ) -> list[LoggedRequest]:
        """Block until ``predicate(log)`` holds (e.g. N requests are held at the gate)."""
        deadline = time.monotonic() + timeout_s
        with self._log_changed:
            while not predicate(self._log):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"the server log did not reach the state in {timeout_s} s")
                self._log_changed.wait(remaining)
            return [dataclasses.replace(entry) for entry in self._log]

    def _record(self, entry: LoggedRequest, **changes: Any) -> None:
        with self._log_changed:
            for name, value in changes.items():
                setattr(entry, name, value)
            self._log_changed.notify_all()

    # --- Handlers ---------------------------------------------------------------------------------

    async def _handle_openai(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "openai")

    async def _handle_anthropic(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "anthropic")

    async def _handle(self, request: web.Request, api: Api) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        entry = LoggedRequest(
            seq=next(self._seq),
            api=api,
            body=body,
            headers={k.lower(): v for k, v in request.headers.items()},
            request_hash=request_hash(body),
        )
        with self._log_changed:
            self._log.append(entry)
            self._log_changed.notify_all()
        self.in_flight += 1  # the loop thread only
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._respond(request, api, entry, body)
        finally:
            self.in_flight -= 1
            if entry.outcome == "pending":  # cancelled (server shutdown) before answering
                self._record(entry, outcome="aborted")

    def _admit(self, api: Api, body: Any) -> tuple[_Bucket | None, float]:
        """The request's bucket (None: its model is not limited) and 0.0 if it is admitted
        (and counted), else the seconds until it would fit."""
        model = str(body.get("model", "")) if isinstance(body, dict) else ""
        if not self.rate_limits.applies_to(model):
            return None, 0.0
        now = time.monotonic()
        bucket = self._buckets.get((api, model))
        if bucket is None:
            bucket = self._buckets[(api, model)] = _Bucket(
                self.rate_limits, now, emptied_at=self._started
            )
        return bucket, bucket.take(counted_tokens(api, body), now)

    async def _respond(
        self, request: web.Request, api: Api, entry: LoggedRequest, body: Any
    ) -> web.StreamResponse:
        bucket, wait_s = self._admit(api, body)
        # The rate-limit headers as the request was admitted: a vendor counts it at its gateway.
        limit_headers = bucket.headers(api) if bucket is not None else {}
        if bucket is not None and wait_s > 0:
            # Refused at once, as the vendors do, before any model time is spent.
            entry.fault = "rate_limit"
            headers = dict(limit_headers)
            headers["retry-after"] = str(max(1, math.ceil(wait_s)))
            headers["x-request-id" if api == "openai" else "request-id"] = f"req_{entry.seq}"
            message = "Rate limit reached for requests. Please try again later."
            return await self._write(request, entry, 429, headers, _error_body(api, 429, message))
        fault = self._next_fault()
        if fault is not None:
            entry.fault = _fault_name(fault)
        delay = self.latency_s + (fault.delay_s if fault else 0.0)
        if delay > 0:
            await asyncio.sleep(delay)
        assert self._gate is not None
        await self._gate.wait()

        headers: dict[str, str] = dict(limit_headers)
        if fault is not None and fault.kind == "disconnect":
            if request.transport is not None:
                request.transport.close()
            self._record(entry, outcome="dropped")
            return web.Response(status=500)  # never reaches the client: the socket is closed
        if fault is not None and fault.kind == "malformed":
            status, payload = 200, b'{"id": "broken", "choices": [{"index": 0, "mess'
        elif fault is not None and fault.kind == "status":
            status = fault.status
            message = fault.message.replace("{api_key}", _presented_key(request))
            payload = _error_body(api, status, message)
            if fault.retry_after is not None:
                headers["retry-after"] = fault.retry_after
            if fault.retry_after_ms is not None:
                headers["retry-after-ms"] = fault.retry_after_ms
        elif fault is not None and fault.kind == "unsupported_image":
            status = 400
            payload = (
                _error_body(api, 400, vendor_images.OPENAI_TEXT_ONLY_MODEL)
                if api == "openai"
                else _error_body(api, 400, vendor_images.ANTHROPIC_COULD_NOT_PROCESS)
            )
        elif not isinstance(body, dict):
            status, payload = 400, _error_body(api, 400, "We could not parse the JSON body.")
        elif problem := vendor_images.content_problem(
            api, body, text_only=body.get("model") in self.text_only_models
        ):
            status = 400
            payload = _error_body(api, 400, problem.message, param=problem.param, code=problem.code)
        else:
            reply = self.reply(body)
            if isinstance(reply, str):
                reply = Reply(reply)
            if "judge" in str(body.get("model", "")):
                reply = self._spoil_judgment(reply, entry)
            status = 200
            build = _openai_reply if api == "openai" else _anthropic_reply
            payload = build(body, reply, entry.seq)
        headers["x-request-id" if api == "openai" else "request-id"] = f"req_{entry.seq}"
        return await self._write(request, entry, status, headers, payload)

    async def _write(
        self,
        request: web.Request,
        entry: LoggedRequest,
        status: int,
        headers: dict[str, str],
        payload: bytes,
    ) -> web.StreamResponse:
        """Write the response ourselves so we know whether it reached a live connection."""
        response = web.StreamResponse(status=status, headers=headers)
        response.content_type = "application/json"
        response.content_length = len(payload)
        # The status is logged before writing: a client may read the log as soon as it has the
        # response, before the outcome below is known (use ``wait_for`` to see outcomes).
        self._record(entry, status=status)
        transport = request.transport
        if transport is None or transport.is_closing():
            self._record(entry, outcome="aborted")
            return response
        try:
            await response.prepare(request)
            await response.write(payload)
            await response.write_eof()
        except ConnectionError:
            self._record(entry, outcome="aborted")
        else:
            self._record(entry, outcome="completed", completed_s=time.monotonic())
        return response

    async def _handle_stats(self, request: web.Request) -> web.Response:
        log = self.requests()
        hashes = Counter(entry.request_hash for entry in log)
        stats = {
            "requests": len(log),
            "by_status": dict(Counter(str(entry.status) for entry in log)),
            "by_outcome": dict(Counter(entry.outcome for entry in log)),
            "distinct_hashes": len(hashes),
            "by_fault": dict(Counter(entry.fault for entry in log if entry.fault)),
            "rate_limited": sum(entry.fault == "rate_limit" for entry in log),
            "max_in_flight": self.max_in_flight,
            "rate_limits": {"rpm": self.rate_limits.rpm, "tpm": self.rate_limits.tpm},
        }
        return web.json_response(stats)

    async def _handle_log(self, request: web.Request) -> web.Response:
        rows = [
            {
                "seq": e.seq,
                "api": e.api,
                "model": e.body.get("model") if isinstance(e.body, dict) else None,
                "request_hash": e.request_hash,
                "status": e.status,
                "outcome": e.outcome,
                "fault": e.fault,
                "received_s": e.received_s,
                "completed_s": e.completed_s,
            }
            for e in self.requests()
        ]
        return web.json_response(rows)


def _fault_name(fault: Fault) -> str:
    if fault.kind == "status":
        return str(fault.status)
    return "timeout" if fault.kind == "slow" else fault.kind


def _presented_key(request: web.Request) -> str:
    bearer = request.headers.get("authorization", "")
    return request.headers.get("x-api-key") or bearer.removeprefix("Bearer ").strip()


def _error_body(
    api: Api, status: int, message: str, *, param: str | None = None, code: str | None = None
) -> bytes:
    if api == "anthropic":
        error_type = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return json.dumps(
            {"type": "error", "error": {"type": error_type, "message": message}}
        ).encode()
    error_type, default_code = _OPENAI_ERROR_TYPES.get(status, ("server_error", None))
    return json.dumps(
        {
            "error": {
                "message": message,
                "type": error_type,
                "param": param,
                "code": code or default_code,
            }
        }
    ).encode()


def _openai_reply(body: dict[str, Any], reply: Reply, seq: int) -> bytes:
    text = reply.joined_text()
    prompt_tokens = _words(body.get("messages")) + _image_tokens(body)
    completion_tokens = _words(text or "") + reply.reasoning_tokens
    return json.dumps(
        {
            "id": f"chatcmpl-fake{seq}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
            },
        }
    ).encode()


def _anthropic_reply(body: dict[str, Any], reply: Reply, seq: int) -> bytes:
    parts = (reply.text,) if isinstance(reply.text, str) else reply.text or ()
    content: list[dict[str, str]] = [{"type": "text", "text": part} for part in parts]
    if reply.thinking is not None:
        thinking = {"type": "thinking", "thinking": reply.thinking, "signature": "fake"}
        content.insert(0, thinking)
    return json.dumps(
        {
            "id": f"msg_fake{seq}",
            "type": "message",
            "role": "assistant",
            "content": content,
            "model": body.get("model", ""),
            "stop_reason": _ANTHROPIC_STOP_REASONS.get(reply.finish_reason, "end_turn"),
            "stop_sequence": None,
            "usage": {
                "input_tokens": _words(body.get("messages"))
                + _words(body.get("system") or "")
                + _image_tokens(body),
                "output_tokens": _words(list(parts)) + reply.reasoning_tokens,
            },
        }
    ).encode()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake OpenAI/Anthropic server for benchmarks.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--rate-429", type=float, default=0.0)
    parser.add_argument("--rate-500", type=float, default=0.0)
    parser.add_argument("--rate-timeout", type=float, default=0.0)
    parser.add_argument("--timeout-delay-ms", type=float, default=30_000.0)
    parser.add_argument("--retry-after-s", type=float, default=1.0)
    parser.add_argument("--rate-malformed-judge", type=float, default=0.0)
    parser.add_argument("--rate-absent-evidence", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rpm", type=int, default=None, help="requests/min enforced per model")
    parser.add_argument("--tpm", type=int, default=None, help="tokens/min enforced per model")
    parser.add_argument(
        "--limit-models",
        default=None,
        help="comma-separated models the limits apply to (default: every model)",
    )
    parser.add_argument(
        "--start-empty",
        action="store_true",
        help="the limits' buckets start empty (no minute's burst first), refilling from the start",
    )
    parser.add_argument(
        "--reply",
        choices=["echo", "bench"],
        default="echo",
        help="echo the last message, or bench: replies a judge can quote (pipeline benchmarks)",
    )
    args = parser.parse_args(argv)
    rates = FaultRates(
        rate_429=args.rate_429,
        rate_500=args.rate_500,
        rate_timeout=args.rate_timeout,
        timeout_delay_s=args.timeout_delay_ms / 1000,
        retry_after_s=args.retry_after_s,
        rate_malformed_judge=args.rate_malformed_judge,
        rate_absent_evidence=args.rate_absent_evidence,
        seed=args.seed,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server = FakeVendorServer(
        reply=bench_reply if args.reply == "bench" else echo_reply,
        latency_s=args.latency_ms / 1000,
        fault_rates=rates,
        rate_limits=RateLimits(
            rpm=args.rpm,
            tpm=args.tpm,
            models=frozenset(args.limit_models.split(",")) if args.limit_models else None,
            start_empty=args.start_empty,
        ),
        host=args.host,
        port=args.port,
    )
    with server:
        # The line a benchmark harness waits for before sending traffic.
        print(f"FakeVendorServer listening on {server.base_url}", flush=True)
        while not stop.wait(0.5):
            pass
    with contextlib.suppress(BrokenPipeError):
        print(f"FakeVendorServer served {len(server.requests())} requests", flush=True)


if __name__ == "__main__":
    main()
