"""The WebSocket frontend: one listener, one session per accepted connection.

The handshake is where a connection is refused, before any MCP message is read: a wrong path (404), an
Origin not allowed (403), a missing or bad bearer token (401), too many sessions (503).
"""

from __future__ import annotations

import itertools
from typing import Final
from urllib.parse import urlsplit

import attrs
import trio
from loguru import logger
from trio_websocket import ConnectionClosed, WebSocketConnection, WebSocketRequest, serve_websocket

from actors.auth import Refused, check_bearer
from actors.catalog import CatalogView
from actors.config import WebSocketSettings
from actors.dispatch import SessionSettings
from actors.session import Session
from actors.transports.websocket import CLOSE_GOING_AWAY, CLOSE_INTERNAL_ERROR, WebSocketTransport
from actors.watch import Watch

SUBPROTOCOL: Final = "mcp"
HANDSHAKE_TIMEOUT_S: Final = 10.0


@attrs.define(eq=False)
class WebSocketListener:
    """Owns: the listening socket and every WebSocket session it accepted.
    Receives: connections.
    Sends: nothing itself; each session talks to the catalog and the backends.
    Stops when: cancelled; `stop_sessions()` first answers what every session has in flight and closes
        each connection with 1001.
    Errors: a session's crash is logged and ends that session alone.
    """

    settings: WebSocketSettings
    catalog: Watch[CatalogView]
    session_settings: SessionSettings
    _sessions: dict[Session, WebSocketTransport] = attrs.field(factory=dict)
    _numbers: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    url: str = ""

    async def run(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as handlers:
            server = await handlers.start(
                lambda task_status: serve_websocket(
                    self._handle,
                    self.settings.host,
                    self.settings.port,
                    None,
                    handler_nursery=handlers,
                    max_message_size=self.settings.max_message_bytes,
                    connect_timeout=HANDSHAKE_TIMEOUT_S,
                    disconnect_timeout=HANDSHAKE_TIMEOUT_S,
                    task_status=task_status,
                )
            )
            host = self.settings.host if ":" not in self.settings.host else f"[{self.settings.host}]"
            self.url = f"ws://{host}:{server.port}{self.settings.path}"
            if self.settings.auth is None and self.settings.host not in ("127.0.0.1", "localhost", "::1"):
                logger.warning("listening on {} WITHOUT auth: add [websocket.auth]", self.settings.host)
            logger.info("listening on {}", self.url)
            handlers.start_soon(self._keep_alive)
            task_status.started(self.url)

    def sessions(self) -> list[Session]:
        return list(self._sessions)

    def stop_sessions(self) -> None:
        """Answer everything in flight, then close each connection with 1001."""
        for session, transport in self._sessions.items():
            transport.close_code, transport.close_reason = CLOSE_GOING_AWAY, "the gateway is shutting down"
            session.stop()

    async def wait_sessions_done(self) -> None:
        for session in list(self._sessions):
            await session.done.wait()

    async def _handle(self, request: WebSocketRequest) -> None:
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in request.headers}
        peer = _peer(request)
        try:
            subject = self._admit(request, headers)
        except Refused as refused:
            status, reason = refused.status, refused.reason
            logger.warning("refused {} from {}: HTTP {}: {}", request.path, peer, status, reason)
            body = (refused.reason + "\n").encode()
            extra = [(b"content-type", b"text/plain; charset=utf-8"), *refused.headers]
            await request.reject(refused.status, extra_headers=extra, body=body)
            return
        subprotocol = SUBPROTOCOL if SUBPROTOCOL in request.proposed_subprotocols else None
        try:
            connection = await request.accept(subprotocol=subprotocol)
        except ConnectionClosed:
            return
        session_id = f"ws-{next(self._numbers)}"
        with logger.contextualize(session=session_id, **({"subject": subject} if subject else {})):
            logger.info("connected from {} (subprotocol {})", peer, subprotocol or "none")
            await self._serve(session_id, connection, subject)

    def _admit(self, request: WebSocketRequest, headers: dict[str, str]) -> str | None:
        """The token's subject when auth is on; Refused for a connection that may not go on."""
        settings = self.settings
        path = urlsplit(request.path).path
        if path != settings.path:
            raise Refused(404, f"no MCP endpoint at {path}; try {settings.path}")
        origin = headers.get("origin")
        if origin is not None and origin not in settings.allowed_origins:
            raise Refused(403, f"origin {origin} is not allowed")
        subject = check_bearer(headers, settings.auth) if settings.auth is not None else None
        if len(self._sessions) >= settings.max_sessions:
            raise Refused(503, f"the gateway is at its limit of {settings.max_sessions} sessions")
        return subject

    async def _serve(self, session_id: str, connection: WebSocketConnection, subject: str | None) -> None:
        transport = WebSocketTransport(connection, self.settings.send_timeout_s)
        session = Session(session_id, transport, self.catalog, self.session_settings, subject=subject)
        self._sessions[session] = transport
        try:
            await session.run_temporary()
        finally:
            del self._sessions[session]

    async def _keep_alive(self) -> None:
        """One task for every connection: a ping to each every interval; a peer that has not answered by
        the next one is gone. (A task per connection would cost each idle session its memory.)"""
        interval = self.settings.ping_interval_s
        async with trio.open_nursery() as pings:
            while True:
                await trio.sleep(interval)
                for session, transport in list(self._sessions.items()):
                    pings.start_soon(self._ping, session.id, transport, interval)

    async def _ping(self, session_id: str, transport: WebSocketTransport, interval: float) -> None:
        with trio.move_on_after(interval) as timer:
            try:
                await transport.connection.ping()
            except ConnectionClosed:
                return
        if timer.cancelled_caught:
            with logger.contextualize(session=session_id):
                logger.warning("closing with 1011: no pong for {}s", interval)
            await transport.close(CLOSE_INTERNAL_ERROR, "keepalive ping timeout")  # ends the session


def _peer(request: WebSocketRequest) -> str:
    remote = request.remote
    return f"{remote.address}:{remote.port}" if hasattr(remote, "address") else str(remote)
