"""A WebSocket transport for the official MCP Python SDK client, so tests can drive several real SDK
clients against one gateway at once (the SDK ships stdio and HTTP transports, not this one).

One JSON-RPC message per text frame, subprotocol "mcp", as the gateway's WebSocket frontend speaks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import trio
from mcp import Client
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage
from support import LEGACY_ERA
from trio_websocket import ConnectionClosed, open_websocket_url

MAX_MESSAGE_BYTES = 16 * 1024 * 1024


@asynccontextmanager
async def websocket_transport(url: str, **options: Any) -> AsyncIterator[TransportStreams]:
    options.setdefault("subprotocols", ["mcp"])
    reader_in, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, writer_out = anyio.create_memory_object_stream[SessionMessage](0)
    async with open_websocket_url(url, max_message_size=MAX_MESSAGE_BYTES, **options) as connection:

        async def receive_frames() -> None:
            async with reader_in:
                try:
                    while True:
                        frame = await connection.get_message()
                        try:
                            message = types.jsonrpc_message_adapter.validate_json(frame, by_name=False)
                        except ValueError as exc:
                            await reader_in.send(exc)
                            continue
                        await reader_in.send(SessionMessage(message))
                except (ConnectionClosed, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass

        async def send_frames() -> None:
            async with writer_out:
                async for session_message in writer_out:
                    frame = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    try:
                        await connection.send_message(frame)
                    except ConnectionClosed:
                        return

        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive_frames)
            nursery.start_soon(send_frames)
            try:
                yield read_stream, write_stream
            finally:
                nursery.cancel_scope.cancel()


@asynccontextmanager
async def websocket_client(
    url: str, headers: list[tuple[str, str]] | None = None, *, mode: str = LEGACY_ERA, **options: Any
) -> AsyncIterator[Client]:
    """An SDK Client over a WebSocket; `options` go to Client (callbacks, message_handler, ...). `mode` pins
    the initialize handshake unless a test asks for another era on purpose (see support.sdk_client)."""
    transport = websocket_transport(url, extra_headers=headers or [])
    async with Client(transport, mode=mode, **options) as client:  # type: ignore[arg-type]
        yield client
