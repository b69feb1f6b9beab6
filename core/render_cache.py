"""Rendered Markdown shared by every web process (issue #20, part 5).

A reply or a turn never changes once written, yet each web process rendered it again: gunicorn
runs several workers, each with its own ``lru_cache`` (core/markdown.py), and the annotators of
one item reach them at random. A model reply of a few thousand characters takes ~3 ms to render
(bench/README.md), more than everything else a workspace request does in Python; reading its
rendering back from Redis takes ~0.1 ms.

So a text of at least ``SHARED_FROM_CHARS`` characters is looked up in the ``rendered`` cache
(settings ``CACHES``: Redis at ``RENDER_CACHE_URL``, by default ``REDIS_URL``; nothing is shared
without one) before it is rendered, and its rendering stored there after. Shorter texts render
faster than a round trip.

Invariants:

- **Never stale.** The key is the text's SHA-256 under the renderer's fingerprint
  (``RENDERER``): the source of core/markdown.py and the versions of markdown-it-py and nh3.
  Any change to how texts are rendered or sanitised makes new keys, so a page never shows a
  rendering an older renderer wrote; old entries expire (``RENDER_CACHE_SECONDS``).
- **Blind.** The key is the content alone: nothing of an item, a model, a condition or an
  annotator; and none of it reaches a page.
- **Optional.** Redis down, slow or full costs rendering, never a page: an error is logged once,
  then the cache is left alone for ``RETRY_AFTER_S`` seconds (a page of twenty texts must not
  wait twenty timeouts).

Whatever writes to that Redis is trusted as the broker is: what it stores is shown as HTML.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

from django.core.cache import caches

logger = logging.getLogger(__name__)

ALIAS = "rendered"
# Below this many characters a text renders (~0.6 µs a character) about as fast as a Redis
# round trip reads it back (~0.1 ms), and a miss would cost the round trip and a write as well.
SHARED_FROM_CHARS = 1_000
# After an error, the cache is not tried again for this long.
RETRY_AFTER_S = 30.0


def _fingerprint() -> str:
    renderer = Path(__file__).with_name("markdown.py").read_bytes()
    libraries = f"markdown-it-py {version('markdown-it-py')} nh3 {version('nh3')}"
    return hashlib.sha256(renderer + libraries.encode()).hexdigest()[:16]


RENDERER = _fingerprint()

_lock = threading.Lock()
_resting_until = 0.0  # monotonic time before which the cache is not tried (after an error)


def key(text: str) -> str:
    return f"md:{RENDERER}:{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()}"


def rendered(text: str, render: Callable[[str], str]) -> str:
    """``render(text)``, read from the shared cache when another process has already stored
    it, else rendered here and stored."""
    if len(text) < SHARED_FROM_CHARS or _resting():
        return render(text)
    cache = caches[ALIAS]
    name = key(text)
    try:
        html = cache.get(name)
    except Exception as error:  # noqa: BLE001 - any failure of the cache: render instead
        _rest(error)
        return render(text)
    if isinstance(html, str):
        return html
    html = render(text)
    try:
        cache.set(name, html)
    except Exception as error:  # noqa: BLE001 - the rendering is still good
        _rest(error)
    return html


def _resting() -> bool:
    return _resting_until > time.monotonic()


def _rest(error: Exception) -> None:
    global _resting_until
    with _lock:
        if _resting():
            return
        _resting_until = time.monotonic() + RETRY_AFTER_S
    logger.warning(
        "The shared cache of rendered texts failed (%s: %s); texts are rendered in this "
        "process for the next %.0f s.",
        type(error).__name__,
        error,
        RETRY_AFTER_S,
    )


def reset() -> None:
    """Try the cache again at once (tests; after the cache's settings change)."""
    global _resting_until
    _resting_until = 0.0
