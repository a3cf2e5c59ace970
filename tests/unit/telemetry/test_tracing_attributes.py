"""What a span says, by the MCP semantic conventions, whatever a peer sent: names, attributes, error.type,
and the trace context read from and written into `_meta`."""

from __future__ import annotations

from typing import Any

import pytest

from actors.protocol.messages import ErrorResponse, Response, RpcError
from actors.telemetry.tracing_attributes import (
    MAX_VALUE_CHARS,
    error_type,
    peer_attributes,
    protocol_version,
    request_attributes,
    span_name,
    split_address,
    target_of,
)
from actors.telemetry.tracing_context import carried, parse_traceparent, with_context

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_span_is_named_by_method_and_tool_or_prompt_never_by_a_resource_uri() -> None:
    assert span_name("tools/call", target_of("tools/call", {"name": "add"})) == "tools/call add"
    assert span_name("prompts/get", target_of("prompts/get", {"name": "greet"})) == "prompts/get greet"
    assert (
        span_name("resources/read", target_of("resources/read", {"uri": "file:///secret"}))
        == "resources/read"
    )


@pytest.mark.parametrize("params", [None, [], {"name": 7}, {"name": None}, {"name": {"x": 1}}, "text"])
def test_a_name_that_is_not_a_string_names_nothing(params: Any) -> None:
    assert target_of("tools/call", params) is None
    assert "gen_ai.tool.name" not in request_attributes("tools/call", target_of("tools/call", params), 1)


def test_a_huge_tool_name_is_cut_and_the_attributes_follow_the_conventions() -> None:
    attributes = request_attributes("tools/call", target_of("tools/call", {"name": "x" * 100_000}), 42)
    assert len(attributes["gen_ai.tool.name"]) == MAX_VALUE_CHARS
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["jsonrpc.request.id"] == "42"
    assert attributes["mcp.method.name"] == "tools/call"
    assert request_attributes("prompts/get", "p", "a")["gen_ai.prompt.name"] == "p"


def test_the_protocol_version_is_a_modern_requests_own_else_the_sessions() -> None:
    modern = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    assert protocol_version("tools/call", modern, "2025-11-25") == "2026-07-28"
    assert protocol_version("tools/call", {}, "2025-11-25") == "2025-11-25"
    assert protocol_version("initialize", {"protocolVersion": "2025-06-18"}, None) == "2025-06-18"
    assert protocol_version("initialize", {"protocolVersion": 5}, None) is None


def test_the_peer_says_its_transport_address_and_session_id() -> None:
    assert peer_attributes("stdio", "stdio", "stdio", False) == {"network.transport": "pipe"}
    websocket = peer_attributes("websocket", "127.0.0.1:5000", "ws-1", False)
    assert websocket == {
        "network.transport": "tcp",
        "network.protocol.name": "websocket",
        "client.address": "127.0.0.1",
        "client.port": 5000,
    }
    http = peer_attributes("http", "::1", "abc", True)
    assert http["client.address"] == "::1" and http["mcp.session.id"] == "abc" and "client.port" not in http
    assert split_address("[::1]:8080") == ("::1", 8080)


def test_error_type_is_the_json_rpc_code_or_tool_error() -> None:
    assert error_type(ErrorResponse(1, RpcError(-32602, "bad"))) == "-32602"
    assert error_type(Response(1, {"content": [], "isError": True})) == "tool_error"
    assert error_type(Response(1, {"content": [], "isError": "yes"})) is None
    assert error_type(Response(1, {})) is None


@pytest.mark.parametrize(
    "meta",
    [
        {"traceparent": "garbage"},
        {"traceparent": 7},
        {"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"},
        {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01"},
        {"traceparent": TRACEPARENT.upper()},
        {"traceparent": TRACEPARENT[:-1] + "\n"},
        {"traceparent": TRACEPARENT + "-extra"},  # version 00 has no more fields
        {"traceparent": "ff" + TRACEPARENT[2:]},
        {"traceparent": TRACEPARENT.replace("-", "_")},
        "not an object",
    ],
)
def test_a_malformed_traceparent_is_no_parent_and_is_replaced_in_the_forwarded_request(meta: Any) -> None:
    params = {"name": "add", "_meta": meta}
    assert carried(params) is None
    context = (0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, 1, "")
    forwarded = with_context(params, context)
    assert forwarded["_meta"]["traceparent"] == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert params["_meta"] is meta  # the client's params are never edited


def test_a_later_traceparent_version_is_read_as_version_00_says() -> None:
    assert parse_traceparent("01" + TRACEPARENT[2:] + "-more") == (
        0x4BF92F3577B34DA6A3CE929D0E0E4736,
        0x00F067AA0BA902B7,
        1,
    )


def test_a_clients_traceparent_and_tracestate_are_read_and_travel_on() -> None:
    params = {"_meta": {"traceparent": TRACEPARENT, "tracestate": "vendor=1", "progressToken": 3}}
    trace_id, parent_id, flags, state = carried(params)  # type: ignore[misc]
    assert (f"{trace_id:032x}", f"{parent_id:016x}", flags, state) == (
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "00f067aa0ba902b7",
        1,
        "vendor=1",
    )
    forwarded = with_context(params, (trace_id, 0x1234, flags, state))
    assert forwarded["_meta"]["tracestate"] == "vendor=1" and forwarded["_meta"]["progressToken"] == 3
    hostile = {"_meta": {"traceparent": TRACEPARENT, "tracestate": "a=1\r\nX-Evil: 2"}}
    assert carried(hostile)[3] == ""  # type: ignore[index]  # a tracestate with control characters is dropped
    assert carried({"_meta": {"traceparent": TRACEPARENT, "tracestate": "a" * 600}})[3] == ""  # type: ignore[index]


@pytest.mark.parametrize(
    "state",
    [
        "a=caf\u00e9",  # W3C: printable ASCII only
        "no-equals",
        "Upper=1",
        "a=1,a=2",  # a key twice
        "a=",
        "a=b=c",  # "=" inside a value
        ",".join(f"k{n}=v" for n in range(33)),  # past 32 list-members
        " , ",
    ],
)
def test_a_tracestate_that_is_not_w3c_is_neither_kept_nor_passed_on(state: str) -> None:
    params = {"_meta": {"traceparent": TRACEPARENT, "tracestate": state}}
    context = carried(params)
    assert context is not None and context[3] == ""
    assert "tracestate" not in with_context(params, context)["_meta"]


@pytest.mark.parametrize(
    "state", ["congo=t61rcWkgMzE, rojo=00f067aa0ba902b7", "tenant@vendor=x y", "a=1,,b=2", "a/b_c*d-e=!"]
)
def test_a_w3c_tracestate_travels_on_as_it_was_written(state: str) -> None:
    params = {"_meta": {"traceparent": TRACEPARENT, "tracestate": state}}
    context = carried(params)
    assert context is not None and context[3] == state
    assert with_context(params, context)["_meta"]["tracestate"] == state
