"""One event loop per worker process, in a thread of its own, where every provider call of the
evaluation engine is made.

Why: a worker waits on hundreds of HTTP calls at once. As coroutines on one loop (the vendor
SDKs' async clients) that costs a fraction of the CPU of one thread per call, and the database
work stays in the ordinary synchronous Django code of the thread that submitted the calls.

``submit(coroutine)`` hands a coroutine to the loop from any thread. ``calls_slot()`` is the
process-wide cap on calls in flight (``settings.EVAL_MAX_CALLS_IN_FLIGHT``), whichever batch
they belong to. After a fork (Celery's prefork pool) the child starts a loop of its own.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_state: dict[str, Any] = {"pid": None, "loop": None, "slots": None}
_closers: list[tuple[int, Callable[[], Awaitable[Any]]]] = []
CLOSE_TIMEOUT_S = 5.0


def _loop() -> asyncio.AbstractEventLoop:
    with _lock:
        if _state["pid"] != os.getpid():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="proactbench-calls", daemon=True
            )
            thread.start()
            _state.update(pid=os.getpid(), loop=loop, slots=None)
        return _state["loop"]


def submit(coroutine: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
    return asyncio.run_coroutine_threadsafe(coroutine, _loop())


def calls_slot() -> asyncio.Semaphore:
    """The process's cap on calls in flight. Only use it on the loop (inside a submitted
    coroutine): the semaphore belongs to it."""
    if _state["slots"] is None:
        _state["slots"] = asyncio.Semaphore(settings.EVAL_MAX_CALLS_IN_FLIGHT)
    return _state["slots"]


def on_exit(closer: Callable[[], Awaitable[Any]]) -> None:
    """Run ``closer()`` on the loop when the process exits (e.g. an async client's ``close``,
    so its connections are closed rather than reported as leaked)."""
    _closers.append((os.getpid(), closer))


@atexit.register
def _close_all() -> None:
    mine = [closer for pid, closer in _closers if pid == os.getpid()]
    if _state["pid"] != os.getpid() or not mine:
        return

    async def close() -> None:
        await asyncio.gather(*(closer() for closer in mine), return_exceptions=True)

    try:
        asyncio.run_coroutine_threadsafe(close(), _state["loop"]).result(timeout=CLOSE_TIMEOUT_S)
    except Exception as exc:  # exiting anyway; say so and go
        logger.info("could not close the provider clients at exit: %s", exc)
