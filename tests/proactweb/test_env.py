"""One rule for reading a setting from the environment (proactweb/env.py), shared by the
Django settings and gunicorn.conf.py."""

from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from proactweb.env import env_bool, env_int, env_list, env_path, env_str


@pytest.mark.parametrize(
    ("read", "default"),
    [
        (env_str, "d"),
        (env_path, Path("d")),
        (env_bool, True),
        (env_int, 4),
        (env_list, ["d"]),
    ],
)
def test_an_empty_variable_is_unset(monkeypatch, read, default):
    monkeypatch.setenv("PB_TEST_SETTING", "")
    assert read("PB_TEST_SETTING", default) == default
    monkeypatch.delenv("PB_TEST_SETTING")
    assert read("PB_TEST_SETTING", default) == default


def test_values_are_read_as_their_kind(monkeypatch):
    for value, expected in [("1", True), ("yes", True), (" Off ", False), ("false", False)]:
        monkeypatch.setenv("PB_TEST_SETTING", value)
        assert env_bool("PB_TEST_SETTING", not expected) is expected
    monkeypatch.setenv("PB_TEST_SETTING", "12")
    assert env_int("PB_TEST_SETTING", 0, minimum=1) == 12
    monkeypatch.setenv("PB_TEST_SETTING", "a, b,,c ")
    assert env_list("PB_TEST_SETTING", []) == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("read", "value", "message"),
    [
        (lambda: env_bool("PB_TEST_SETTING", False), "maybe", "is not a boolean"),
        (lambda: env_int("PB_TEST_SETTING", 1), "1.5", "is not an integer."),
        (lambda: env_int("PB_TEST_SETTING", 1, minimum=1), "0", "is below its minimum, 1."),
        (lambda: env_int("PB_TEST_SETTING", 1, minimum=1), "-3", "is below its minimum, 1."),
    ],
    ids=["bool", "int", "int-zero", "int-negative"],
)
def test_a_malformed_value_is_refused_by_name_and_value(monkeypatch, read, value, message):
    monkeypatch.setenv("PB_TEST_SETTING", value)
    with pytest.raises(ImproperlyConfigured) as refused:
        read()
    assert str(refused.value).startswith(f"PB_TEST_SETTING={value!r} ")
    assert message in str(refused.value)
