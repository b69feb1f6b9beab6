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


def test_each_process_gets_its_own_database_counting_down_from_the_configured_one():
    specs = _specs(3)
    give_each_process_its_redis(specs, "redis://127.0.0.1:6379/15")
    assert [spec.env["REDIS_URL"] for spec in specs] == [
        "redis://127.0.0.1:6379/15",
        "redis://127.0.0.1:6379/14",
        "redis://127.0.0.1:6379/13",
    ]


def test_the_count_wraps_below_zero_and_a_url_without_a_database_means_database_0():
    specs = _specs(2)
    give_each_process_its_redis(specs, "redis://:secret@cache:6380")
    assert [spec.env["REDIS_URL"] for spec in specs] == [
        "redis://:secret@cache:6380/0",
        "redis://:secret@cache:6380/15",
    ]


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
