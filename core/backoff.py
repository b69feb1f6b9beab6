"""The one backoff policy: exponential with full jitter ("Exponential Backoff And Jitter",
AWS Architecture Blog, 2015). Provider calls, evaluation batches and curation tasks all wait
this way, each with its own base and cap; many clients that failed together then spread their
retries over the whole window instead of coming back together."""

import random
from collections.abc import Callable


def backoff_s(
    attempt: int, *, base_s: float, cap_s: float, rng: Callable[[], float] = random.random
) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1 for the first): uniformly random up
    to ``min(cap_s, base_s * 2 ** (attempt - 1))``."""
    return rng() * min(cap_s, base_s * 2 ** (attempt - 1))
