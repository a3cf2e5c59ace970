"""Results as modern clients get them: resultType, caching hints, the server's identity; and the hints
merged over the backends a list comes from."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.protocol.eras import CACHEABLE_METHODS, SERVER_INFO_KEY, SUBSCRIPTION_ID_KEY
from actors.protocol.modern_results import (
    MAX_TTL_MS,
    cache_hint_of,
    legacy_result,
    merge_cache_hints,
    modern_result,
)

SERVER = {"name": "gateway", "version": "1.0"}


def test_a_cacheable_result_gets_result_type_hints_and_server_info_in_a_copy() -> None:
    result = {"tools": [{"name": "t"}], "_meta": {"x/y": 1}, "ttlMs": 99, "cacheScope": "public"}
    before = copy.deepcopy(result)
    encoded = modern_result("tools/list", result, ttl_ms=5, cache_scope="private", server_info=SERVER)
    assert encoded == {
        "tools": [{"name": "t"}],
        "resultType": "complete",
        "ttlMs": 5,
        "cacheScope": "private",
        "_meta": {"x/y": 1, SERVER_INFO_KEY: SERVER},
    }
    assert result == before


@pytest.mark.parametrize("method", sorted(CACHEABLE_METHODS))
def test_every_cacheable_method_gets_the_hints_by_default_zero_and_private(method: str) -> None:
    encoded = modern_result(method, {}, server_info=None)
    assert encoded == {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"}


def test_other_methods_get_no_hints() -> None:
    for method in ("tools/call", "prompts/get", "completion/complete", "subscriptions/listen"):
        assert modern_result(method, {"content": []}, ttl_ms=9, server_info=SERVER) == {
            "content": [],
            "resultType": "complete",
            "_meta": {SERVER_INFO_KEY: SERVER},
        }


def test_an_input_required_result_stays_so_and_is_never_cacheable() -> None:
    result = {"resultType": "input_required", "inputRequests": {"a": {"method": "roots/list"}}}
    encoded = modern_result("resources/read", result, ttl_ms=9, cache_scope="public", server_info=None)
    assert encoded == result and encoded is not result


@pytest.mark.parametrize("result", [None, [1], "text", 5, {"resultType": "other"}, {"resultType": None}])
def test_a_result_that_is_not_an_object_or_claims_another_type_goes_out_complete(result: object) -> None:
    assert modern_result("tools/call", result, server_info=None) == {"resultType": "complete"}


def test_a_meta_that_is_not_an_object_is_replaced_and_the_server_named_last_wins() -> None:
    assert modern_result("tools/call", {"_meta": 5}, server_info=SERVER)["_meta"] == {SERVER_INFO_KEY: SERVER}
    theirs = {"_meta": {SERVER_INFO_KEY: {"name": "backend", "version": "0"}}}
    assert modern_result("tools/call", theirs, server_info=SERVER)["_meta"] == {SERVER_INFO_KEY: SERVER}


@pytest.mark.parametrize(
    ("result", "hint"),
    [
        ({"ttlMs": 1000, "cacheScope": "public"}, (1000, "public")),
        ({"ttlMs": 0, "cacheScope": "private"}, (0, "private")),
        ({"ttlMs": MAX_TTL_MS}, (MAX_TTL_MS, None)),
        ({"ttlMs": MAX_TTL_MS + 1, "cacheScope": "shared"}, (None, None)),
        ({"ttlMs": -1, "cacheScope": "PUBLIC"}, (None, None)),
        ({"ttlMs": True, "cacheScope": None}, (None, None)),
        ({"ttlMs": 1.5, "cacheScope": ["public"]}, (None, None)),
        ({}, (None, None)),
        ([], (None, None)),
    ],
)
def test_cache_hint_of_reads_only_valid_hints(result: object, hint: tuple[object, object]) -> None:
    assert cache_hint_of(result) == hint


@pytest.mark.parametrize(
    ("hints", "per_caller_policy", "merged"),
    [
        ([(1000, "public"), (500, "public")], False, (500, "public")),
        ([(1000, "public"), (500, "public")], True, (500, "private")),
        ([(1000, "public"), (None, None)], False, (0, "private")),
        ([(1000, "public"), (2000, "private")], False, (1000, "private")),
        ([(1000, "public"), (-5, "public")], False, (0, "public")),
        ([(7, "public")], False, (7, "public")),
        ([], False, (0, "private")),
    ],
)
def test_merged_hints_take_the_smallest_ttl_and_public_only_when_all_agree(
    hints: list[tuple[int | None, str | None]], per_caller_policy: bool, merged: tuple[int, str]
) -> None:
    assert merge_cache_hints(iter(hints), per_caller_policy) == merged


hints = st.lists(
    st.tuples(
        st.none() | st.integers(-10, MAX_TTL_MS + 10), st.none() | st.sampled_from(["public", "private", "x"])
    )
)


@settings(deadline=None)
@given(hints, st.booleans())
def test_merged_hints_are_never_laxer_than_any_contributor(
    contributions: list[tuple[int | None, str | None]], per_caller_policy: bool
) -> None:
    ttl_ms, scope = merge_cache_hints(contributions, per_caller_policy)
    assert 0 <= ttl_ms <= MAX_TTL_MS
    assert all(ttl_ms <= hint_ttl for hint_ttl, _ in contributions if hint_ttl is not None and hint_ttl >= 0)
    if scope == "public":
        assert contributions and not per_caller_policy and all(s == "public" for _, s in contributions)
    else:
        assert scope == "private"


def test_a_legacy_client_gets_results_without_the_modern_eras_fields_and_everything_else_kept() -> None:
    server_info = {"name": "b", "version": "1"}
    modern = {
        "contents": [{"uri": "x:/a", "text": "t"}],
        "resultType": "complete",
        "ttlMs": 5,
        "cacheScope": "public",
        "_meta": {SERVER_INFO_KEY: server_info, SUBSCRIPTION_ID_KEY: 3, "traceparent": "t", "com.x/k": 1},
    }
    assert legacy_result(modern) == {
        "contents": [{"uri": "x:/a", "text": "t"}],
        "_meta": {"traceparent": "t", "com.x/k": 1},
    }
    assert modern["ttlMs"] == 5  # copied, never edited
    assert legacy_result({"content": [], "resultType": "complete", "_meta": {SERVER_INFO_KEY: {}}}) == {
        "content": []
    }
    legacy = {"content": [], "_meta": {"com.x/k": 1}}
    assert legacy_result(legacy) is legacy  # a legacy peer's result: nothing to strip, not even copied
    asking = {"resultType": "input_required", "inputRequests": {}, "requestState": "s", "_meta": {}}
    assert legacy_result(asking) is asking  # for the shim, which lives the round out with the client
    for odd in (None, [], "x", {"_meta": "not an object"}, {"resultType": 7}):
        assert legacy_result(odd) == odd
