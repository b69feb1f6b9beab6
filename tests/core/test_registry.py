"""core.registry: entries by key, once each, checked before they are added; a test's entries
go away with its block, even when the block fails."""

import pytest

from core.registry import Registry


class Missing(LookupError):
    pass


def _registry() -> Registry[tuple[str, int]]:
    def check(entry):
        if entry[1] < 0:
            raise ValueError("negative")

    return Registry("gadget", key=lambda e: e[0], check=check, unknown=Missing)


def test_entries_come_back_by_key_in_registration_order():
    gadgets = _registry()
    gadgets.register(("b", 2))
    gadgets.register(("a", 1))
    assert gadgets.get("a") == ("a", 1) and gadgets.find("zz") is None
    assert gadgets.all() == (("b", 2), ("a", 1))


def test_a_key_twice_or_a_bad_entry_is_refused_and_nothing_changes():
    gadgets = _registry()
    gadgets.register(("a", 1))
    with pytest.raises(ValueError, match="gadget 'a' is already registered"):
        gadgets.register(("a", 5))
    with pytest.raises(ValueError, match="negative"):
        gadgets.register(("c", -1))
    assert gadgets.all() == (("a", 1),)


def test_an_unknown_key_raises_the_registrys_error_naming_the_known_ones():
    gadgets = _registry()
    gadgets.register(("a", 1))
    with pytest.raises(Missing, match=r"unknown gadget 'x' \(one of a\)"):
        gadgets.get("x")


def test_registered_entries_leave_with_the_block_even_when_it_fails():
    gadgets = _registry()
    with pytest.raises(RuntimeError), gadgets.registered(("t", 1), ("u", 2)) as first:
        assert first == ("t", 1) and gadgets.find("u") == ("u", 2)
        raise RuntimeError
    assert gadgets.all() == ()
