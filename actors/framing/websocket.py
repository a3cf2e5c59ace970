"""A WebSocket connection as a Transport: one JSON-RPC message per text frame (subprotocol `mcp`).

Used by the WebSocket frontend for each client and, later, by WebSocket backends. Close codes follow RFC 6455:
1003 for a binary frame, 1009 (sent by trio-websocket) for a frame over the size limit, 1008 for a peer that
stops reading, 1001 when the gateway shuts down, 1011 for a peer that stops answering pings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import trio
from loguru import logger
from trio_websocket import ConnectionClosed, WebSocketConnection

CLOSE_NORMAL: Final = 1000
CLOSE_GOING_AWAY: Final = 1001
CLOSE_UNSUPPORTED_DATA: Final = 1003
CLOSE_POLICY_VIOLATION: Final = 1008
CLOSE_TOO_BIG: Final = 1009
CLOSE_INTERNAL_ERROR: Final = 1011
CLOSE_WAIT_S: Final = 2.0  # for the peer's half of the closing handshake; then the TCP stream is closed


class WebSocketTransport:
    """Frames in and out of one connection. `send` gives up on a peer that has not taken a frame within
    `send_timeout_s` (closing with 1008), so a client that stops reading stalls only its own session."""

    def __init__(
        self, connection: WebSocketConnection, send_timeout_s: float, stream: trio.abc.Stream | None = None
    ) -> None:
        self.connection = connection
        self.send_timeout_s = send_timeout_s
        self.stream = stream  # the TCP stream under it, to drop when a frame had to be cut
        self.close_code = CLOSE_NORMAL  # what aclose() sends; set to 1001 when the gateway is going away
        self.close_reason: str | None = None

    async def receive(self) -> bytes | None:
        while True:
            try:
                message = await self.connection.get_message()
            except ConnectionClosed as closed:
                reason = closed.reason
                if reason is not None and reason.code == CLOSE_TOO_BIG:
                    logger.warning("closed with 1009: a frame exceeded max_message_bytes")
                elif reason is not None:
                    logger.debug("connection closed: {} {}", reason.code, reason.reason or "")
                return None
            if isinstance(message, bytes):
                logger.warning("closing with 1003: the client sent a binary frame")
                await self.close(CLOSE_UNSUPPORTED_DATA, "MCP over WebSocket uses text frames")
                return None
            if message.strip():
                return message.encode()

    async def send(self, frame: bytes) -> None:
        """Write one message. A frame is never cut by the timeout (a cut frame makes the rest of the
        stream garbage, and the client would read 1007 instead of our close): a client that has taken
        nothing for send_timeout_s is closed with 1008 once the frame in flight is out, for which it has
        CLOSE_WAIT_S more; one that takes nothing at all then loses the TCP connection."""
        started = trio.current_time()
        with trio.move_on_after(self.send_timeout_s + CLOSE_WAIT_S) as limit:
            try:
                await self.connection.send_message(frame.decode())
            except ConnectionClosed as exc:
                raise trio.BrokenResourceError("the WebSocket is closed") from exc
        if limit.cancelled_caught:
            logger.warning("dropping the connection: the client read nothing for {}s", self.send_timeout_s)
            if self.stream is not None:  # no close frame can follow a cut one
                await trio.aclose_forcefully(self.stream)
            else:
                await self.close(CLOSE_POLICY_VIOLATION, "the peer is not reading its messages")
            raise trio.BrokenResourceError("the client is not reading")
        if trio.current_time() - started > self.send_timeout_s:
            logger.warning("closing with 1008: the client read nothing for {}s", self.send_timeout_s)
            await self.close(CLOSE_POLICY_VIOLATION, "the client is not reading its messages")
            raise trio.BrokenResourceError("the client is not reading")

    async def send_many(self, frames: Sequence[bytes]) -> None:
        for frame in frames:  # a WebSocket message per frame
            await self.send(frame)

    def send_nowait(self, frames: Sequence[bytes]) -> bool:
        return False  # a message goes out through trio-websocket's send, which waits

    async def close(self, code: int, reason: str | None = None) -> None:
        with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_WAIT_S):
            await self.connection.aclose(code, reason)

    async def aclose(self) -> None:
        await self.close(self.close_code, self.close_reason)
