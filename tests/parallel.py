"""The test suite in several processes at once (pytest-xdist; ``make test``, Makefile).

Each process has its own test database: pytest-django names it ``test_<name>_gw<N>``. Each must
have its own Redis database too. Rows get the same ids in every process's database, so the keys
derived from them (rate limiters, leases, in-flight claims) would otherwise be shared between
two tests that know nothing of each other, and so would the Celery queues."""

import re

import pytest

# Redis's default number of databases (the `databases` setting).
REDIS_DATABASES = 16
_REDIS_URL = re.compile(r"(?P<server>redis://[^/?#]+)(?:/(?P<db>\d+))?")


def give_each_process_its_redis(specs, redis_url: str | None) -> None:
    """Give each process, before it starts, REDIS_URL's database N below the configured one
    (15 → 15, 14, …, wrapping at 0), N its number (gw<N>). It is set in the process's
    environment, so that the workers, servers and scripts a test starts inherit it, and
    nothing else has to know. Without REDIS_URL there is no Redis to share."""
    if not redis_url:
        return
    match = _REDIS_URL.fullmatch(redis_url)
    if match is None:
        raise pytest.UsageError(
            f"REDIS_URL={redis_url!r}: the parallel test run gives each process its own "
            "database, so it needs a redis://host:port/db URL with no options"
        )
    if len(specs) > REDIS_DATABASES:
        raise pytest.UsageError(
            f"{len(specs)} test processes, but Redis has {REDIS_DATABASES} databases to give "
            f"them: run at most {REDIS_DATABASES} (make test TEST_PROCESSES={REDIS_DATABASES})"
        )
    configured = int(match["db"] or 0)
    for spec in specs:
        number = int(spec.id.removeprefix("gw"))
        spec.env["REDIS_URL"] = f"{match['server']}/{(configured - number) % REDIS_DATABASES}"
