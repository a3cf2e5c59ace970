"""The order of the HTTP sessions at rest: least recently active first, over all and per client."""

from __future__ import annotations

from actors.frontends.http.resting import Resting


def test_the_least_recently_active_comes_first_over_all_and_per_client() -> None:
    resting = Resting[str]()
    for key, client in (("a", "x"), ("b", "y"), ("c", "x")):
        resting.add(key, client, key.upper())
    resting.discard("a", "x")  # a request for "a" came in
    resting.add("a", "x", "A")  # and ended: "a" is now the most recently active
    assert list(resting.oldest()) == [("b", "B"), ("c", "C"), ("a", "A")]
    assert list(resting.oldest("x")) == [("c", "C"), ("a", "A")]
    assert list(resting.oldest("nobody")) == []


def test_a_client_with_nothing_at_rest_leaves_no_entry_behind() -> None:
    resting = Resting[str]()
    resting.add("a", "x", "A")
    resting.discard("a", "x")
    resting.discard("a", "x")  # twice: no error
    assert len(resting) == 0 and resting._by_client == {}
