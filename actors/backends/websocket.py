"""A backend MCP server reached over WebSocket (`url = "ws://..."` in [[backends]]).

A lost connection is a crash: the backend actor's run ends and its supervisor reconnects with backoff, as it
restarts a process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import trio
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    HandshakeError,
    WebSocketConnection,
    connect_websocket_url,
)

from actors.backends.errors import BackendRejectedError, BackendStartError
from actors.framing.websocket import CLOSE_GOING_AWAY, WebSocketTransport

CONNECT_TIMEOUT_S: Final = 10.0
SEND_TIMEOUT_S: Final = 30.0  # a backend that takes no frame for this long is treated as gone


async def _connected(
    url: str,
    extra: list[tuple[bytes, bytes]],
    max_bytes: int,
    *,
    task_status: trio.TaskStatus[WebSocketConnection] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The connection, its reader task in a nursery of its own for as long as it lives: a server's refusal
    of the handshake, which trio-websocket raises in that task rather than in the connect, is the connect's
    BackendRejectedError (its status: 401 for a credential the server does not take)."""
    try:
        async with trio.open_nursery() as reader:
            connection = await connect_websocket_url(
                reader, url, subprotocols=["mcp"], extra_headers=extra, max_message_size=max_bytes
            )
            task_status.started(connection)
    except* ConnectionRejected as refused:
        status = refused.exceptions[0].status_code  # type: ignore[attr-defined]  # one handshake, one refusal
        reason = f"cannot connect to {url}: it refused the handshake with HTTP {status}"
        raise BackendRejectedError(reason, status) from None


class WebSocketBackendTransport(WebSocketTransport):
    def __init__(self, transport: WebSocketTransport, url: str) -> None:
        super().__init__(transport.connection, transport.send_timeout_s)
        self.url = url
        self.ended = trio.Event()

    @classmethod
    async def connect(
        cls, nursery: trio.Nursery, url: str, headers: Mapping[str, str], max_bytes: int
    ) -> WebSocketBackendTransport:
        """Connect, asking for subprotocol `mcp`; the connection's reader task lives in `nursery`."""
        extra = [(name.encode(), value.encode()) for name, value in headers.items()]
        try:
            with trio.fail_after(CONNECT_TIMEOUT_S):
                connection = await nursery.start(_connected, url, extra, max_bytes)
        except trio.TooSlowError:
            reason = f"cannot connect to {url}: no handshake within {CONNECT_TIMEOUT_S}s"
            raise BackendStartError(reason) from None
        except (OSError, HandshakeError, ConnectionClosed) as exc:
            raise BackendStartError(f"cannot connect to {url}: {exc or type(exc).__name__}") from None
        return cls(WebSocketTransport(connection, SEND_TIMEOUT_S), url)

    @property
    def label(self) -> str:
        return f"connection to {self.url}"

    @property
    def ended_cleanly(self) -> bool:
        return False

    async def receive(self) -> bytes | None:
        frame = await super().receive()
        if frame is None:
            self.ended.set()
        return frame

    async def drain(self) -> None:
        await trio.sleep_forever()  # nothing beside the frames

    async def stop(self, *, close_wait_s: float, term_wait_s: float) -> None:
        await self.close(CLOSE_GOING_AWAY, "the gateway is stopping this backend")
        self.ended.set()

    def describe_end(self) -> str:
        closed = self.connection.closed
        if closed is None:
            return f"{self.label} is still open"
        reason = f": {closed.reason}" if closed.reason else ""
        return f"{self.label} closed with {closed.code} ({closed.name}){reason}"
