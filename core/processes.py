"""Command lines of the project's own processes, for the code that starts them (the devserver,
the benchmarks, the tests that need a real worker)."""

from __future__ import annotations

import sys


def celery_worker_argv(*options: str) -> list[str]:
    """A Celery worker of this project, run by this interpreter, with ``options`` appended."""
    return [sys.executable, "-m", "celery", "-A", "proactweb", "worker", *options]
