"""The parallel test run's Redis databases (tests/parallel.py), on execnet's own specs as
pytest-xdist builds them."""

import execnet
import pytest

from tests.parallel import give_each_process_its_redis


def _specs(count: int) -> list:
    specs = []
    for number in range(count):
        spec = execnet.XSpec("execmodel=main_thread_only//popen")
        spec.id = f"gw{number}"
        specs.append(spec)
    return specs


@pytest.mark.parametrize(
    ("configured", "given"),
    [
        # Counting down from the configured database, one for each process.
        ("redis://127.0.0.1:6379/15", ["redis://127.0.0.1:6379/15", "redis://127.0.0.1:6379/14"]),
        # No database in the URL is database 0; below 0 the count wraps round to 15.
        (
            "redis://:secret@cache:6380",
            ["redis://:secret@cache:6380/0", "redis://:secret@cache:6380/15"],
        ),
    ],
)
def test_each_process_gets_a_database_of_its_own(configured, given):
    specs = _specs(len(given))
    give_each_process_its_redis(specs, configured)
    assert [spec.env["REDIS_URL"] for spec in specs] == given


def test_without_redis_nothing_is_set():
    specs = _specs(2)
    give_each_process_its_redis(specs, None)
    give_each_process_its_redis(specs, "")
    assert [spec.env for spec in specs] == [{}, {}]


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:6379/15?socket_timeout=1", "rediss://cache:6379/1", "unix:///r.sock"]
)
def test_a_url_it_cannot_rewrite_is_refused_by_name(url):
    with pytest.raises(pytest.UsageError, match="REDIS_URL=.*redis://host:port/db"):
        give_each_process_its_redis(_specs(2), url)


def test_more_processes_than_redis_has_databases_is_refused():
    with pytest.raises(pytest.UsageError, match="17 test processes.*at most 16"):
        give_each_process_its_redis(_specs(17), "redis://127.0.0.1:6379/15")
