"""The two eras: which requests are modern, the envelope each carries, the errors and statuses they earn."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.protocol import eras
from actors.protocol.eras import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    LOG_LEVEL_KEY,
    PROTOCOL_VERSION_KEY,
    ModernEnvelope,
    parse_envelope,
)
from actors.protocol.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from actors.protocol.messages import RpcError
from actors.protocol.versions import SUPPORTED_VERSIONS

CLIENT_INFO = {"name": "c", "version": "1"}


def meta(**changes: Any) -> dict[str, Any]:
    """A valid envelope's `_meta`, with keys replaced (a value of ... drops the key)."""
    base: dict[str, Any] = {
        PROTOCOL_VERSION_KEY: "2026-07-28",
        CLIENT_CAPABILITIES_KEY: {"sampling": {}, "elicitation": {"form": {}, "url": {}}},
        CLIENT_INFO_KEY: CLIENT_INFO,
        LOG_LEVEL_KEY: "info",
    }
    base.update(changes)
    return {key: value for key, value in base.items() if value is not ...}


def envelope_problem(params: object) -> str:
    """The key a -32602 envelope error names."""
    error = parse_envelope(params)
    assert isinstance(error, RpcError) and error.code == INVALID_PARAMS, error
    assert error.data["envelope"]["key"] in error.message
    return str(error.data["envelope"]["key"])


def test_versions_sort_into_eras_as_iso_dates() -> None:
    assert eras.is_modern("2026-07-28") and eras.is_modern("2027-01-01")
    assert not any(eras.is_modern(version) for version in SUPPORTED_VERSIONS)
    assert not eras.is_modern(None) and not eras.is_modern(20260728)
    assert set(eras.MODERN_VERSIONS).isdisjoint(SUPPORTED_VERSIONS)


def test_the_protocol_version_key_alone_marks_a_request_modern() -> None:
    assert eras.is_modern_request({"_meta": {PROTOCOL_VERSION_KEY: "2026-07-28"}})
    assert eras.is_modern_request({"_meta": {PROTOCOL_VERSION_KEY: None}})  # a malformed claim is a claim
    assert not eras.is_modern_request({"_meta": meta(**{PROTOCOL_VERSION_KEY: ...})})
    assert not eras.is_modern_request({"_meta": [PROTOCOL_VERSION_KEY]})
    assert not eras.is_modern_request(None) and not eras.is_modern_request([{"_meta": {}}])


def test_a_full_envelope_parses_and_goes_back_to_the_same_meta() -> None:
    envelope = parse_envelope({"_meta": meta(), "name": "t"})
    assert envelope == ModernEnvelope(
        "2026-07-28", {"sampling": {}, "elicitation": {"form": {}, "url": {}}}, CLIENT_INFO, "info"
    )
    assert isinstance(envelope, ModernEnvelope) and envelope.to_meta() == meta()


def test_client_info_and_log_level_are_optional_and_unknown_capabilities_pass() -> None:
    capabilities = {"tasks": 5, "extensions": {"x/y": {"a": 1}}, "roots": {"listChanged": True}}
    params = {
        "_meta": meta(**{CLIENT_INFO_KEY: ..., LOG_LEVEL_KEY: ..., CLIENT_CAPABILITIES_KEY: capabilities})
    }
    envelope = parse_envelope(params)
    assert envelope == ModernEnvelope("2026-07-28", capabilities)
    assert isinstance(envelope, ModernEnvelope)
    assert envelope.to_meta() == {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: capabilities}


@pytest.mark.parametrize(
    ("params", "key"),
    [
        (None, "params"),
        ([], "params"),
        ({}, "_meta"),
        ({"_meta": None}, "_meta"),
        ({"_meta": "x"}, "_meta"),
        ({"_meta": meta(**{PROTOCOL_VERSION_KEY: ...})}, PROTOCOL_VERSION_KEY),
        ({"_meta": meta(**{CLIENT_CAPABILITIES_KEY: ...})}, CLIENT_CAPABILITIES_KEY),
        ({"_meta": meta(**{PROTOCOL_VERSION_KEY: 20260728})}, PROTOCOL_VERSION_KEY),
        ({"_meta": meta(**{PROTOCOL_VERSION_KEY: None})}, PROTOCOL_VERSION_KEY),
        ({"_meta": meta(**{PROTOCOL_VERSION_KEY: "2" * 10_000})}, PROTOCOL_VERSION_KEY),
        ({"_meta": meta(**{CLIENT_CAPABILITIES_KEY: []})}, CLIENT_CAPABILITIES_KEY),
        (
            {"_meta": meta(**{CLIENT_CAPABILITIES_KEY: {"sampling": True}})},
            f"{CLIENT_CAPABILITIES_KEY}.sampling",
        ),
        (
            {"_meta": meta(**{CLIENT_CAPABILITIES_KEY: {"elicitation": {"url": 1}}})},
            f"{CLIENT_CAPABILITIES_KEY}.elicitation",
        ),
        (
            {"_meta": meta(**{CLIENT_CAPABILITIES_KEY: {"experimental": {"\x00" * 500: "x"}}})},
            f"{CLIENT_CAPABILITIES_KEY}.experimental",
        ),
        ({"_meta": meta(**{CLIENT_INFO_KEY: None})}, CLIENT_INFO_KEY),
        ({"_meta": meta(**{CLIENT_INFO_KEY: "c"})}, CLIENT_INFO_KEY),
        ({"_meta": meta(**{CLIENT_INFO_KEY: {"name": "c"}})}, CLIENT_INFO_KEY),
        ({"_meta": meta(**{CLIENT_INFO_KEY: {"name": "c", "version": 1}})}, CLIENT_INFO_KEY),
        ({"_meta": meta(**{LOG_LEVEL_KEY: "loud"})}, LOG_LEVEL_KEY),
        ({"_meta": meta(**{LOG_LEVEL_KEY: None})}, LOG_LEVEL_KEY),
        ({"_meta": meta(**{LOG_LEVEL_KEY: ["info"]})}, LOG_LEVEL_KEY),
    ],
)
def test_a_missing_or_malformed_key_is_named_in_a_32602(params: object, key: str) -> None:
    assert envelope_problem(params) == key


def test_missing_keys_come_first_then_the_version_then_the_rest() -> None:
    assert envelope_problem({"_meta": {CLIENT_CAPABILITIES_KEY: 5}}) == PROTOCOL_VERSION_KEY
    assert envelope_problem({"_meta": {PROTOCOL_VERSION_KEY: "1999-01-01"}}) == CLIENT_CAPABILITIES_KEY
    bad_rest = {"_meta": meta(**{PROTOCOL_VERSION_KEY: "1999-01-01", CLIENT_CAPABILITIES_KEY: []})}
    assert parse_envelope(bad_rest) == eras.unsupported_version_error("1999-01-01")


@pytest.mark.parametrize("version", ["v999.0.0", "2025-11-25", "2099-01-01", "2026-07-28\x00\n", ""])
def test_an_unsupported_version_earns_32022_echoing_it(version: str) -> None:
    error = parse_envelope({"_meta": meta(**{PROTOCOL_VERSION_KEY: version})})
    assert error == RpcError(
        UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
        {"supported": ["2026-07-28"], "requested": version},
    )


def test_a_request_that_named_no_version_gets_32022_without_requested() -> None:
    assert eras.unsupported_version_error(None).data == {"supported": ["2026-07-28"]}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
envelope_values = {
    PROTOCOL_VERSION_KEY: st.sampled_from(["2026-07-28", "2025-11-25"]) | json_values,
    CLIENT_CAPABILITIES_KEY: st.dictionaries(
        st.sampled_from(["sampling", "elicitation", "roots", "experimental", "extensions", "x"]),
        json_values,
        max_size=4,
    )
    | json_values,
    CLIENT_INFO_KEY: st.just(CLIENT_INFO) | json_values,
    LOG_LEVEL_KEY: st.sampled_from(["info", "debug"]) | json_values,
}
hostile_params = json_values | st.fixed_dictionaries(
    {},
    optional={"_meta": st.fixed_dictionaries({}, optional=envelope_values) | json_values, "x": json_values},
)


one_hostile_key = st.builds(
    lambda key, value: {"_meta": meta(**{key: value})},
    st.sampled_from(list(envelope_values)),
    json_values | st.just(...) | st.text(st.characters(max_codepoint=31)) | st.just("9" * 100_000),
)


@settings(max_examples=400, deadline=None)
@given(hostile_params | one_hostile_key)
def test_any_json_value_parses_or_earns_a_clear_error(params: object) -> None:
    before = copy.deepcopy(params)
    result = parse_envelope(params)
    if isinstance(result, ModernEnvelope):
        assert result.version in eras.MODERN_VERSIONS and isinstance(result.client_capabilities, dict)
        assert parse_envelope({"_meta": result.to_meta()}) == result
    else:
        assert result.code in (INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION)
        assert len(result.message) < 300 and result.message.isprintable()
    assert repr(params) == repr(before)  # never edited


def test_without_envelope_keeps_progress_and_trace_keys_and_copies() -> None:
    params = {"name": "t", "_meta": {**meta(), "progressToken": 3, "traceparent": "00-a-b-01", "x/y": 1}}
    before = copy.deepcopy(params)
    assert eras.without_envelope(params) == {
        "name": "t",
        "_meta": {"progressToken": 3, "traceparent": "00-a-b-01", "x/y": 1},
    }
    assert params == before
    assert eras.without_envelope({"name": "t", "_meta": meta()}) == {"name": "t"}


def test_without_envelope_leaves_params_without_one_as_they_are() -> None:
    plain = {"name": "t", "_meta": {"progressToken": 1}}
    assert eras.without_envelope(plain) is plain
    assert eras.without_envelope(None) is None
    assert eras.without_envelope({"_meta": 5}) == {"_meta": 5}


def test_error_builders_give_the_shapes_peers_check() -> None:
    required = {"sampling": {}, "elicitation": {"url": {}}}
    error = eras.missing_capability_error(required)
    assert error.code == MISSING_REQUIRED_CLIENT_CAPABILITY and error.data == {
        "requiredCapabilities": required
    }
    assert "elicitation, sampling" in error.message
    mismatch = eras.header_mismatch_error("Mcp-Method", "TOOLS/LIST", "tools/list")
    assert mismatch.code == HEADER_MISMATCH
    assert mismatch.data == {
        "header": "Mcp-Method",
        "mismatch": {"header": "TOOLS/LIST", "body": "tools/list"},
    }
    assert eras.resource_not_found_error("file:///x") == RpcError(
        INVALID_PARAMS, "Resource not found", {"uri": "file:///x"}
    )


@pytest.mark.parametrize(
    ("code", "at_edge", "status"),
    [
        (-32601, True, 404),
        (-32602, True, 400),
        (-32600, True, 400),
        (-32700, True, 400),
        (HEADER_MISMATCH, True, 400),
        (UNSUPPORTED_PROTOCOL_VERSION, True, 400),
        (MISSING_REQUIRED_CLIENT_CAPABILITY, True, 400),
        (MISSING_REQUIRED_CLIENT_CAPABILITY, False, 400),
        (INVALID_PARAMS, False, 200),
        (HEADER_MISMATCH, False, 200),
        (UNSUPPORTED_PROTOCOL_VERSION, False, 200),
        (-32601, False, 200),
        (-32000, False, 200),
    ],
)
def test_http_status_depends_on_code_and_origin(code: int, at_edge: bool, status: int) -> None:
    assert eras.http_status(code, at_edge=at_edge) == status


def test_method_sets_agree_with_each_other() -> None:
    assert eras.REMOVED_METHODS.isdisjoint(eras.MODERN_CLIENT_METHODS)
    assert eras.CACHEABLE_METHODS <= eras.MODERN_CLIENT_METHODS
    assert eras.MRTR_METHODS <= eras.MODERN_CLIENT_METHODS
    assert {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"} <= (
        eras.REMOVED_METHODS
    )
    assert eras.REMOVED_NOTIFICATIONS.isdisjoint(eras.MODERN_CLIENT_NOTIFICATIONS)
