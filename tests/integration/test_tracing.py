"""Traces end to end: the official SDK client over stdio sends a traceparent, the gateway (a real process)
exports its spans over OTLP/HTTP to a receiver started here, and the backend (the official Python SDK's
server, with OpenTelemetry on) exports its own to the same receiver. One trace, parent to child: the
client's span, the gateway's SERVER span, its CLIENT span to the backend, the backend's SERVER span."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final

import httpx2
import orjson
import pytest
import trio
from admin_support import sample
from mcp import MCPError
from mcp.types import ElicitResult
from otlp_receiver import ReceivedSpan, Receiver, otlp_receiver
from sdk_websocket import websocket_client
from support import (
    INITIALIZE,
    ROOT,
    backend_entry,
    fast_restarts,
    raw_gateway,
    running,
    sampler,
    sdk_client,
    with_http,
    with_websocket,
    write_config,
)
from tls_certs import make_pki

from actors.protocol.errors import BACKEND_UNAVAILABLE

TRACED_BACKEND: Final = ROOT / "tests" / "backends" / "traced_backend.py"
ROUNDS_BACKEND: Final = ROOT / "tests" / "backends" / "sdk_rounds.py"  # asks twice, by input_required
SERVER, CLIENT = 2, 3  # the proto's SpanKind values
ERROR: Final = 2  # the proto's StatusCode.STATUS_CODE_ERROR
TRACE_ID: Final = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN_ID: Final = "00f067aa0ba902b7"
GATEWAY: Final = "gateway-under-test"
BACKEND: Final = "traced-backend"
MODERN_META: Final = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def traced_config(tmp_path: Path, receiver: Receiver, **tracing: object) -> Path:
    backend = {
        "name": "sdk",
        "command": sys.executable,
        "args": [str(TRACED_BACKEND)],
        "env": {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url},
    }
    config = write_config(tmp_path / "gateway.toml", [backend])
    settings = {"endpoint": receiver.url, "service_name": GATEWAY, **tracing}
    lines = ["[tracing]", *(f'{key} = "{value}"' for key, value in settings.items())]
    config.write_text(config.read_text() + "\n".join(lines) + "\n")
    return config


async def wait_for(
    receiver: Receiver, *wanted: tuple[str, str, int]
) -> dict[tuple[str, str, int], ReceivedSpan]:
    """The first span of each (service, name, kind), once the receiver has them all."""

    def ready(got: Receiver) -> bool:
        return all(got.named(*key) for key in wanted)

    assert await trio.to_thread.run_sync(receiver.wait_for, ready), f"spans missing: {receiver.spans}"
    return {key: receiver.named(*key)[0] for key in wanted}


async def test_a_clients_traceparent_is_the_parent_of_the_gateways_spans_and_the_backend_joins_the_trace(
    tmp_path: Path,
) -> None:
    with otlp_receiver() as receiver:
        config = traced_config(tmp_path, receiver)
        traceparent = f"00-{TRACE_ID}-{CLIENT_SPAN_ID}-01"
        async with sdk_client(config, tmp_path / "gateway.log") as client:
            result = await client.call_tool("echo", {"text": "hi"}, meta={"traceparent": traceparent})
            assert result.content[0].text == "hi"  # type: ignore[union-attr]
        spans = await wait_for(
            receiver,
            (GATEWAY, "tools/call echo", SERVER),
            (GATEWAY, "tools/call echo", CLIENT),
            (BACKEND, "tools/call echo", SERVER),
        )
        server, hop, backend = spans.values()
        assert {server.trace_id, hop.trace_id, backend.trace_id} == {TRACE_ID}
        assert server.parent_id == CLIENT_SPAN_ID
        assert hop.parent_id == server.span_id
        assert backend.parent_id == hop.span_id  # the backend read the context the gateway wrote in _meta
        assert server.attributes["mcp.method.name"] == "tools/call"
        assert server.attributes["gen_ai.tool.name"] == "echo"
        assert server.attributes["gen_ai.operation.name"] == "execute_tool"
        assert server.attributes["network.transport"] == "pipe"
        assert server.attributes["mcp.protocol.version"] == "2025-11-25"
        assert server.attributes["jsonrpc.request.id"].isdigit()
        assert "error.type" not in server.attributes and server.status_code != ERROR
        assert hop.attributes["peer.service"] == "sdk"
        assert hop.attributes["gen_ai.tool.name"] == "echo"
        assert await trio.to_thread.run_sync(
            receiver.wait_for,
            lambda got: (
                {"mcp.server.operation.duration", "mcp.client.operation.duration"} <= set(got.metrics)
            ),
        ), receiver.metrics


async def test_a_backends_ask_is_a_span_in_the_calls_trace_and_the_client_gets_its_context(
    tmp_path: Path,
) -> None:
    with otlp_receiver() as receiver:
        config = traced_config(tmp_path, receiver)
        async with sdk_client(config, tmp_path / "gateway.log", sampling_callback=sampler("c")) as client:
            result = await client.call_tool("sample", {"text": "x"})
            assert result.content[0].text == "c answers x"  # type: ignore[union-attr]
        spans = await wait_for(
            receiver,
            (GATEWAY, "tools/call sample", SERVER),
            (GATEWAY, "tools/call sample", CLIENT),
            (BACKEND, "MCP send sampling/createMessage", CLIENT),  # the SDK names its own so
            (GATEWAY, "sampling/createMessage", CLIENT),
        )
        server, hop, backend_ask, relayed = spans.values()
        assert server.parent_id == ""  # the client sent no traceparent: the gateway's span starts the trace
        assert {hop.trace_id, backend_ask.trace_id, relayed.trace_id} == {server.trace_id}
        assert relayed.parent_id == backend_ask.span_id  # the backend's own context, carried in its _meta
        assert relayed.attributes["mcp.gateway.backend"] == "sdk"


async def test_a_tool_error_and_an_unknown_tool_are_error_spans_named_by_their_error_type(
    tmp_path: Path,
) -> None:
    with otlp_receiver() as receiver:
        config = traced_config(tmp_path, receiver)
        async with sdk_client(config, tmp_path / "gateway.log") as client:
            failed = await client.call_tool("fail", {"text": "x"})
            assert failed.is_error
            with pytest.raises(MCPError):  # no sampling callback: the backend's call fails (-32601)
                await client.call_tool("sample", {"text": "x"})
            with pytest.raises(MCPError):
                await client.call_tool("nope", {})
        spans = await wait_for(
            receiver,
            (GATEWAY, "tools/call fail", SERVER),
            (GATEWAY, "tools/call sample", SERVER),
            (GATEWAY, "tools/call nope", SERVER),
        )
        tool_error, backend_error, unknown = spans.values()
        assert tool_error.attributes["error.type"] == "tool_error" and tool_error.status_code == ERROR
        assert backend_error.attributes["error.type"] == "-32601" and backend_error.status_code == ERROR
        hop = receiver.named(GATEWAY, "tools/call sample", CLIENT)[0]
        assert (
            hop.attributes["error.type"] == "-32601"
            and hop.attributes["rpc.response.status_code"] == "-32601"
        )
        assert unknown.attributes["error.type"] == "-32602" and unknown.status_code == ERROR
        assert not receiver.named(GATEWAY, "tools/call nope", CLIENT)  # it never reached a backend


def network_config(tmp_path: Path, receiver: Receiver, *extra: str) -> Path:
    """The project's test backend behind a WebSocket listener, [tracing] to the receiver."""
    config = write_config(
        tmp_path / "network.toml", [backend_entry("alpha", "--only=echo,add,crash", restart=fast_restarts())]
    )
    config = with_websocket(config)
    tracing = f'[tracing]\nendpoint = "{receiver.url}"\nservice_name = "{GATEWAY}"\n'
    config.write_text(config.read_text() + tracing + "\n".join(extra))
    return config


async def test_a_websocket_request_names_its_transport_and_what_the_gateway_decided_is_on_its_span(
    tmp_path: Path,
) -> None:
    policy = '[policy]\ndefault = "allow"\n[[policy.rules]]\nname = "no adding"\neffect = "deny"\n'
    policy += "when = 'mcp.tool.name == \"add\"'\n"
    limits = "[limits]\ncalls_per_s = 0.01\nburst = 1\n"
    with otlp_receiver() as receiver:
        async with running(network_config(tmp_path, receiver, policy, limits)) as gateway:
            assert gateway.websocket_url is not None
            async with websocket_client(gateway.websocket_url) as client:
                assert (await client.call_tool("echo", {"text": "a"})).content[0].text == "a"  # type: ignore[union-attr]
                limited = await client.call_tool("echo", {"text": "b"})  # past the burst of 1
                assert limited.is_error
                with pytest.raises(MCPError):
                    await client.call_tool("add", {"a": 1, "b": 2})  # denied: unknown to this caller
        spans = await wait_for(
            receiver, (GATEWAY, "tools/call echo", SERVER), (GATEWAY, "tools/call add", SERVER)
        )
        first, second = sorted(
            receiver.named(GATEWAY, "tools/call echo", SERVER),
            key=lambda span: span.attributes["jsonrpc.request.id"],
        )
        assert first.attributes["network.transport"] == "tcp"
        assert first.attributes["network.protocol.name"] == "websocket"
        assert first.attributes["client.address"] == "127.0.0.1"
        assert first.events == ()
        assert [name for name, _ in second.events] == ["mcp.gateway.rate_limited"]
        assert second.attributes["error.type"] == "tool_error"
        denied = spans[(GATEWAY, "tools/call add", SERVER)]
        assert denied.events == (
            ("mcp.gateway.policy_denied", {"rule": "no adding", "reason": denied.events[0][1]["reason"]}),
        )
        assert denied.attributes["error.type"] == "-32602"


async def test_the_mcp_duration_histograms_are_on_metrics_beside_the_gateways_own(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        async with running(network_config(tmp_path, receiver, "[admin]\nport = 0\n")) as gateway:
            assert gateway.websocket_url is not None and gateway.admin is not None
            async with websocket_client(gateway.websocket_url) as client:
                assert (await client.call_tool("echo", {"text": "a"})).content[0].text == "a"  # type: ignore[union-attr]
                with pytest.raises(MCPError):
                    await client.call_tool("nope", {})
            await wait_for(  # exported: so counted (a span is counted as it ends, then sent)
                receiver, (GATEWAY, "tools/call echo", CLIENT), (GATEWAY, "tools/call nope", SERVER)
            )
            async with httpx2.AsyncClient() as http:
                metrics = (await http.get(gateway.admin.listener.url + "/metrics")).text
    server, client_hops = "mcp_server_operation_duration_seconds", "mcp_client_operation_duration_seconds"
    assert sample(metrics, f"{server}_count", mcp_method_name="tools/call", error_type="") == 1
    assert sample(metrics, f"{server}_count", mcp_method_name="tools/call", error_type="-32602") == 1
    assert sample(metrics, f"{client_hops}_count", mcp_method_name="tools/call", error_type="") == 1
    assert sample(metrics, "mcp_gateway_calls_total", tool="echo") == 1  # beside the gateway's own


async def test_the_standard_variables_alone_send_gzip_spans_to_an_https_collector_over_mtls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pki = make_pki(tmp_path)
    config = with_websocket(write_config(tmp_path / "plain.toml", [backend_entry("alpha", "--only=echo")]))
    with otlp_receiver(pki.server_context(require_client=True)) as receiver:
        for name, value in {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,  # no [tracing] table: the variables turn it on
            "OTEL_SERVICE_NAME": GATEWAY,
            "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
            "OTEL_EXPORTER_OTLP_CERTIFICATE": str(pki.ca),
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": str(pki.client_certificate),
            "OTEL_EXPORTER_OTLP_CLIENT_KEY": str(pki.client_key),
        }.items():
            monkeypatch.setenv(name, value)
        async with running(config) as gateway:
            assert gateway.websocket_url is not None
            async with websocket_client(gateway.websocket_url) as client:
                assert (await client.call_tool("echo", {"text": "a"})).content[0].text == "a"  # type: ignore[union-attr]
            await wait_for(
                receiver, (GATEWAY, "tools/call echo", SERVER), (GATEWAY, "tools/call echo", CLIENT)
            )
    assert receiver.posts and {post.encoding for post in receiver.posts} == {"gzip"}


async def test_a_call_whose_backend_dies_ends_its_hop_with_the_backend_down_event(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        async with running(network_config(tmp_path, receiver)) as gateway:
            assert gateway.websocket_url is not None
            async with websocket_client(gateway.websocket_url) as client:
                with pytest.raises(MCPError):
                    await client.call_tool("crash", {})
        spans = await wait_for(
            receiver, (GATEWAY, "tools/call crash", CLIENT), (GATEWAY, "tools/call crash", SERVER)
        )
        hop, server = spans.values()
        assert [name for name, _ in hop.events] == ["mcp.gateway.backend_down"]
        assert hop.attributes["error.type"] == server.attributes["error.type"] == str(BACKEND_UNAVAILABLE)


async def test_a_modern_requests_span_names_its_protocol_version(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        config = traced_config(tmp_path, receiver)
        async with sdk_client(config, tmp_path / "gateway.log", mode="2026-07-28") as client:
            assert (await client.call_tool("echo", {"text": "m"})).content[0].text == "m"  # type: ignore[union-attr]
        spans = await wait_for(
            receiver, (GATEWAY, "tools/call echo", SERVER), (BACKEND, "tools/call echo", SERVER)
        )
        server, backend = spans.values()
        assert server.attributes["mcp.protocol.version"] == "2026-07-28"
        assert backend.trace_id == server.trace_id


async def test_an_http_requests_own_trace_context_is_the_parent_or_a_link_beside_the_meta_one(
    tmp_path: Path,
) -> None:
    header_trace, header_span = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    with otlp_receiver() as receiver:
        config = with_http(network_config(tmp_path, receiver))
        async with running(config) as gateway, httpx2.AsyncClient() as http:
            assert gateway.http_url is not None
            for number, meta in ((1, {"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN_ID}-01"}), (2, {})):
                body = {
                    "jsonrpc": "2.0",
                    "id": number,
                    "method": "tools/call",
                    "params": {
                        "name": "echo",
                        "arguments": {"text": str(number)},
                        "_meta": {**MODERN_META, **meta},
                    },
                }
                headers = {
                    "accept": "application/json, text/event-stream",
                    "content-type": "application/json",
                    "mcp-protocol-version": "2026-07-28",
                    "mcp-method": "tools/call",
                    "mcp-name": "echo",
                    "traceparent": f"00-{header_trace}-{header_span}-01",
                }
                answer = await http.post(gateway.http_url, content=orjson.dumps(body), headers=headers)
                assert answer.json()["result"]["content"][0]["text"] == str(number)
        await wait_for(receiver, (GATEWAY, "tools/call echo", SERVER))
        assert await trio.to_thread.run_sync(
            receiver.wait_for, lambda got: len(got.named(GATEWAY, "tools/call echo", SERVER)) == 2
        )
        spans = {
            span.attributes["jsonrpc.request.id"]: span
            for span in receiver.named(GATEWAY, "tools/call echo", SERVER)
        }
        both, header_only = spans["1"], spans["2"]
        assert (both.trace_id, both.parent_id) == (TRACE_ID, CLIENT_SPAN_ID)  # _meta's context is the parent
        assert both.links == ((header_trace, header_span),)  # the POST's own, linked
        assert (header_only.trace_id, header_only.parent_id) == (header_trace, header_span)
        assert header_only.links == ()
        assert both.attributes["network.protocol.name"] == "http"


async def test_a_streamable_http_sessions_request_names_its_session_by_label_and_follows_its_posts_context(
    tmp_path: Path,
) -> None:
    header_trace, header_span = "1af7651916cd43dd8448eb211c80319c", "c7ad6b7169203331"
    json_headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    with otlp_receiver() as receiver:
        async with (
            running(with_http(network_config(tmp_path, receiver))) as gateway,
            httpx2.AsyncClient() as http,
        ):
            assert gateway.http_url is not None
            opened = await http.post(gateway.http_url, content=orjson.dumps(INITIALIZE), headers=json_headers)
            session = opened.headers["mcp-session-id"]
            headers = {**json_headers, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
            ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await http.post(gateway.http_url, content=orjson.dumps(ready), headers=headers)
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "s"}},
            }
            traced = {**headers, "traceparent": f"00-{header_trace}-{header_span}-01"}
            answer = await http.post(gateway.http_url, content=orjson.dumps(call), headers=traced)
            assert answer.json()["result"]["content"][0]["text"] == "s"
        spans = await wait_for(receiver, (GATEWAY, "tools/call echo", SERVER))
        server = spans[(GATEWAY, "tools/call echo", SERVER)]
        assert (server.trace_id, server.parent_id) == (header_trace, header_span)
        # the session by its label: the Mcp-Session-Id itself opens the session, so it is never exported
        assert server.attributes["mcp.session.id"].startswith("http-")
        assert session not in str(receiver.spans)


async def test_a_bridged_ask_of_a_legacy_backend_is_a_span_and_each_round_of_the_call_a_request_span(
    tmp_path: Path,
) -> None:
    with otlp_receiver() as receiver:
        config = traced_config(tmp_path, receiver)
        config.write_text(config.read_text().replace('name = "sdk"', 'name = "sdk"\nera = "legacy"'))
        options = {"mode": "2026-07-28", "sampling_callback": sampler("c")}
        async with sdk_client(config, tmp_path / "gateway.log", **options) as client:
            result = await client.call_tool("sample", {"text": "x"})  # input_required, then the retry
            assert result.content[0].text == "c answers x"  # type: ignore[union-attr]
        spans = await wait_for(
            receiver,
            (GATEWAY, "tools/call sample", CLIENT),
            (BACKEND, "MCP send sampling/createMessage", CLIENT),
            (GATEWAY, "sampling/createMessage", CLIENT),
        )
        hop, backend_ask, relayed = spans.values()
        assert relayed.parent_id == backend_ask.span_id and relayed.trace_id == hop.trace_id
        assert "error.type" not in relayed.attributes  # answered by the client's retry
        assert await trio.to_thread.run_sync(  # the call and its retry, each a request of the client
            receiver.wait_for, lambda got: len(got.named(GATEWAY, "tools/call sample", SERVER)) == 2
        )
        assert len(receiver.named(GATEWAY, "tools/call sample", CLIENT)) == 1  # one call at the backend


async def test_each_round_of_a_modern_backends_input_required_call_is_a_hop_of_the_legacy_clients_request(
    tmp_path: Path,
) -> None:
    async def elicit(context: Any, params: Any) -> Any:
        return ElicitResult(action="accept", content={"name": "Ada"})

    with otlp_receiver() as receiver:
        backend = {"name": "r", "command": sys.executable, "args": [str(ROUNDS_BACKEND)], "era": "modern"}
        config = write_config(tmp_path / "rounds.toml", [backend])
        config.write_text(
            config.read_text() + f'[tracing]\nendpoint = "{receiver.url}"\nservice_name = "{GATEWAY}"\n'
        )
        async with sdk_client(config, tmp_path / "gateway.log", elicitation_callback=elicit) as client:
            result = await client.call_tool("three_rounds", {"text": "t"})
            assert not result.is_error
        spans = await wait_for(receiver, (GATEWAY, "tools/call three_rounds", SERVER))
        server = spans[(GATEWAY, "tools/call three_rounds", SERVER)]
        assert await trio.to_thread.run_sync(
            receiver.wait_for,
            lambda got: (
                len(got.named(GATEWAY, "tools/call three_rounds", CLIENT)) == 3
                and len(got.named(GATEWAY, "elicitation/create", CLIENT)) == 2
            ),
        ), receiver.spans
        hops = receiver.named(GATEWAY, "tools/call three_rounds", CLIENT)
        assert {hop.parent_id for hop in hops} == {server.span_id}  # three rounds, one request
        assert len({hop.span_id for hop in hops}) == 3
        asks = receiver.named(GATEWAY, "elicitation/create", CLIENT)  # the shim's real requests to the client
        assert {ask.trace_id for ask in asks} == {server.trace_id}


async def test_a_request_refused_before_it_is_taken_in_is_a_span_that_says_why(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        config = write_config(tmp_path / "raw.toml", [backend_entry("alpha", "--only=echo,sleep")])
        config.write_text(
            config.read_text() + f'[tracing]\nendpoint = "{receiver.url}"\nservice_name = "{GATEWAY}"\n'
        )
        async with raw_gateway(config, tmp_path / "gateway.log") as client:
            await client.initialize()
            await client.call(5, "sleep", seconds=600)  # in flight until the client cancels it
            await client.call(5, "echo", text="again")  # the same id while the first is in flight
            refused = await client.answer_to(5)
            assert refused["error"]["code"] == -32600
            await client.notify("notifications/cancelled", {"requestId": 5, "reason": "done"})
            await client.close_stdin()
            assert await client.wait_exit() == 0
        spans = await wait_for(
            receiver, (GATEWAY, "tools/call echo", SERVER), (GATEWAY, "tools/call sleep", SERVER)
        )
        duplicate, first = spans.values()
        assert duplicate.attributes["error.type"] == "-32600" and duplicate.status_code == ERROR
        assert (
            first.attributes["error.type"] == "cancelled"
        )  # the client gave it up: no answer, a span all the same
