"""The test helpers' SDK clients (support.sdk_client, sdk_websocket.websocket_client) open with `initialize`.

The SDK's Client defaults to mode="auto", which probes with server/discover and goes modern when the peer
answers it. The helpers pin the legacy era, so the tests built on them keep testing the initialize handshake
once the gateway serves discover. Here each helper's real Client talks to a scripted peer over memory
streams (no gateway, no process): the peer answers `initialize` and refuses anything else with -32601, the
way a legacy server does, and the first request it saw must be `initialize`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.client.client
import mcp_types as types
import pytest
import sdk_websocket
import trio
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage
from sdk_websocket import websocket_client
from support import sdk_client

INITIALIZE_RESULT: dict[str, Any] = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {"listChanged": True}},
    "serverInfo": {"name": "scripted-legacy-peer", "version": "0"},
}


def reply_to(request: Any) -> SessionMessage:
    """A legacy server's answer: a result for initialize, -32601 for anything else (server/discover too)."""
    answer: dict[str, Any] = {"jsonrpc": "2.0", "id": request.id}
    if request.method == "initialize":
        answer["result"] = INITIALIZE_RESULT
    else:
        answer["error"] = {"code": -32601, "message": f"Method not found: {request.method}"}
    return SessionMessage(types.jsonrpc_message_adapter.validate_python(answer))


@asynccontextmanager
async def scripted_legacy_peer(seen: list[str]) -> AsyncIterator[TransportStreams]:
    """A transport whose far end records the method of every client message and answers requests."""
    to_client, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    write_stream, from_client = anyio.create_memory_object_stream[SessionMessage](8)

    async def serve() -> None:
        async for message in from_client:
            method = getattr(message.message, "method", None)
            if method is None:
                continue
            seen.append(method)
            if getattr(message.message, "id", None) is not None:
                await to_client.send(reply_to(message.message))

    async with trio.open_nursery() as nursery, to_client, from_client:
        nursery.start_soon(serve)
        yield read_stream, write_stream
        nursery.cancel_scope.cancel()


async def test_sdk_client_sends_initialize_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    monkeypatch.setattr(mcp.client.client, "stdio_client", lambda params: scripted_legacy_peer(seen))
    with trio.fail_after(10):
        async with sdk_client(tmp_path / "g.toml", tmp_path / "g.log") as client:
            assert client.protocol_version == "2025-11-25"
    assert seen[:2] == ["initialize", "notifications/initialized"], seen


async def test_websocket_client_sends_initialize_first(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    monkeypatch.setattr(sdk_websocket, "websocket_transport", lambda url, **_: scripted_legacy_peer(seen))
    with trio.fail_after(10):
        async with websocket_client("ws://127.0.0.1:9/mcp") as client:
            assert client.protocol_version == "2025-11-25"
    assert seen[:2] == ["initialize", "notifications/initialized"], seen
