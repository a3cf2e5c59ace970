"""A backend's era from its answer to server/discover (the spec's dual-era client, brief §1.10), the _meta a
modern backend's requests carry, and the HTTP headers of a request to a modern backend (brief §1.11)."""

from __future__ import annotations

import base64

import pytest

from actors.backends.era import gateway_envelope, read_discover, read_refusal, stamped
from actors.backends.errors import BackendStartError
from actors.backends.http_headers import declared_param_headers, header_value, modern_headers
from actors.config import BackendEra
from actors.protocol.eras import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    PROTOCOL_VERSION_KEY,
    ModernEnvelope,
)
from actors.protocol.messages import RpcError

DISCOVERED = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {"listChanged": True}}}


def test_a_discover_result_sharing_a_modern_version_is_modern() -> None:
    verdict = read_discover(DISCOVERED)
    assert (verdict.era, verdict.version, verdict.discovered) == (BackendEra.MODERN, "2026-07-28", DISCOVERED)
    assert verdict.describe() == "speaks 2026-07-28 (server/discover answered)"


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        ({"supportedVersions": ["2027-01-01"], "capabilities": {}}, "named no version the gateway speaks"),
        ({"capabilities": {}}, "answered without supportedVersions"),
        ({"supportedVersions": "2026-07-28"}, "answered without supportedVersions"),
        ({"supportedVersions": ["2026-07-28"], "capabilities": []}, "named no version"),
        ("not an object", "answered 'not an object'"),
    ],
)
def test_anything_else_discover_answers_is_legacy(result: object, reason: str) -> None:
    verdict = read_discover(result)
    assert verdict.era is BackendEra.LEGACY and reason in verdict.reason


@pytest.mark.parametrize("code", [-32601, -32602, -32600, -32000, -32001, -32020, -32021])
def test_any_other_error_is_legacy_whatever_its_code(code: int) -> None:
    verdict = read_refusal(RpcError(code, "no"), "2026-07-28", again=False)
    assert verdict == read_refusal(RpcError(code, "no"), "2026-07-28", again=True)
    assert verdict.describe() == f"legacy: server/discover got {code} (no)"  # type: ignore[union-attr]


def test_unsupported_version_is_probed_once_more_at_a_shared_version_else_it_fails() -> None:
    def refusal(*supported: str) -> RpcError:
        return RpcError(-32022, "Unsupported protocol version", {"supported": list(supported)})

    assert read_refusal(refusal("2026-07-28", "2027-01-01"), "2027-06-01", again=False) == "2026-07-28"
    with pytest.raises(BackendStartError, match="refused; the backend speaks 2026-07-28"):
        read_refusal(refusal("2026-07-28"), "2027-06-01", again=True)  # a second -32022
    with pytest.raises(BackendStartError, match="the backend speaks 2027-01-01"):
        read_refusal(refusal("2027-01-01"), "2026-07-28", again=False)  # modern, none shared: no fallback
    only_legacy = read_refusal(refusal("2025-11-25"), "2026-07-28", again=False)
    assert only_legacy.era is BackendEra.LEGACY and "only legacy versions" in only_legacy.reason  # type: ignore[union-attr]
    unreadable = read_refusal(RpcError(-32022, "x", {"supported": [1]}), "2026-07-28", again=False)
    assert unreadable.era is BackendEra.LEGACY  # type: ignore[union-attr]


def test_the_envelope_is_merged_into_meta_keeping_the_rest() -> None:
    gateway = gateway_envelope("gw")
    assert gateway.to_meta() == {
        PROTOCOL_VERSION_KEY: "2026-07-28",
        CLIENT_CAPABILITIES_KEY: {},
        CLIENT_INFO_KEY: {"name": "gw", "version": gateway.client_info["version"]},  # type: ignore[index]
    }
    client = ModernEnvelope("2026-07-28", {"sampling": {}}, None, "info")
    params = {"name": "t", "_meta": {"progressToken": 4, "traceparent": "00-x"}}
    merged = stamped(params, client)
    assert merged["_meta"] == {"progressToken": 4, "traceparent": "00-x", **client.to_meta()}
    assert params["_meta"] == {"progressToken": 4, "traceparent": "00-x"}  # copied, not edited
    assert stamped(None, client) == {"_meta": client.to_meta()}


def test_http_headers_of_a_modern_request() -> None:
    declared = declared_param_headers(
        [
            {
                "name": "regional",
                "inputSchema": {"properties": {"region": {"x-mcp-header": "Region"}, "n": {}}},
            },
            {"name": "bad", "inputSchema": {"properties": {"a": {"x-mcp-header": "a b"}}}},
            {
                "name": "twice",
                "inputSchema": {"properties": {"a": {"x-mcp-header": "X"}, "b": {"x-mcp-header": "x"}}},
            },
        ]
    )
    assert declared == {"regional": {"region": "Region"}, "twice": {"a": "X"}}
    meta = {PROTOCOL_VERSION_KEY: "2026-07-28"}
    call = {
        "method": "tools/call",
        "params": {"name": "regional", "arguments": {"region": "eu"}, "_meta": meta},
    }
    assert modern_headers(call, declared) == {
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "regional",
        "mcp-param-Region": "eu",
    }
    read = {"method": "resources/read", "params": {"uri": "file:///a b", "_meta": meta}}
    assert modern_headers(read, {})["mcp-name"] == "file:///a b"
    listed = modern_headers({"method": "tools/list", "params": {"_meta": meta}}, declared)
    assert "mcp-name" not in listed and listed["mcp-method"] == "tools/list"


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        ("plain", "plain"),
        ("Zürich", "=?base64?" + base64.b64encode("Zürich".encode()).decode() + "?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("=?base64?SGk=?=", "=?base64?PT9iYXNlNjQ/U0drPT89?="),  # a plain value that looks like the sentinel
        ("line\nbreak", "=?base64?bGluZQpicmVhaw==?="),
    ],
)
def test_header_values_are_plain_ascii_or_the_base64_sentinel(value: str, sent: str) -> None:
    assert header_value(value) == sent


def test_param_values_by_type() -> None:
    declared = {"t": {"a": "A", "b": "B", "c": "C", "d": "D", "e": "E"}}
    arguments = {"a": 42, "b": True, "c": None, "d": 1.5, "e": "x"}
    meta = {PROTOCOL_VERSION_KEY: "2026-07-28"}
    headers = modern_headers(
        {"method": "tools/call", "params": {"name": "t", "arguments": arguments, "_meta": meta}}, declared
    )
    assert {key: value for key, value in headers.items() if key.startswith("mcp-param-")} == {
        "mcp-param-A": "42",
        "mcp-param-B": "true",
        "mcp-param-E": "x",
    }
