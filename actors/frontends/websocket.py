"""The WebSocket frontend: one listener, one session per accepted connection.

The handshake is where a connection is refused, before any MCP message is read: a wrong path (404), a Host
not allowed (421), an Origin not allowed (403), a missing or bad bearer token (401), a client that has its
share of sessions (429), too many sessions (503); both with Retry-After. A connection is always busy, so
none is ended to make room; a client's share is counted by the same key as HTTP's (admission.client_key).
Whatever the WebSocket library raises on a peer's bytes ends that connection alone
(actors.frontends.listening).
"""

from __future__ import annotations

import itertools
import math
import time
from typing import ClassVar, Final

import attrs
import trio
from loguru import logger
from trio_websocket import ConnectionClosed, WebSocketRequest, wrap_server_stream

from actors.config import Config, WebSocketSettings
from actors.framing.websocket import CLOSE_GOING_AWAY, CLOSE_INTERNAL_ERROR, WebSocketTransport
from actors.frontends.auth import Principal, Refused
from actors.frontends.http.param_headers import request_headers
from actors.frontends.listener import Listener
from actors.frontends.listening import shown
from actors.frontends.metadata_door import Replayed, answer_metadata, metadata_request, read_head
from actors.frontends.proxy_protocol import Peer
from actors.frontends.routing import bound, route_at
from actors.policy import Caller, caller_of
from actors.protocol.codec import clip
from actors.protocol.on_behalf import OnBehalf, on_behalf
from actors.routes import RouteState
from actors.session.session import Session

SUBPROTOCOL: Final = "mcp"
HANDSHAKE_TIMEOUT_S: Final = 10.0


@attrs.define(eq=False)
class WebSocketListener(Listener[WebSocketSettings]):
    """Owns: the listening socket and every WebSocket session it accepted.
    Receives: connections.
    Sends: nothing itself; each session talks to the catalog and the backends.
    Stops when: cancelled; `stop_sessions()` first answers what every session has in flight and closes
        each connection with 1001. Its connections live in the frontends' nursery, not in a run: a run
        that fails is restarted by the frontends supervisor while the sessions go on.
    Errors: a connection's or a session's failure is logged and ends that connection alone.
    """

    TABLE: ClassVar[str] = "websocket"
    SCHEME: ClassVar[str] = "ws"

    _sessions: dict[Session, WebSocketTransport] = attrs.field(factory=dict)
    _numbers: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))

    @classmethod
    def settings_in(cls, config: Config) -> WebSocketSettings | None:
        return config.websocket

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

    async def _connection(self, stream: trio.SocketStream, peer: Peer) -> None:
        """One TCP connection from `peer`: the WebSocket handshake within HANDSHAKE_TIMEOUT_S, then its
        session. The library's reader task runs in this connection's nursery, so what it raises ends this
        connection."""
        async with trio.open_nursery() as nursery:
            request = None
            with trio.move_on_after(HANDSHAKE_TIMEOUT_S):
                handshake = await self._metadata_or_handshake(stream, peer)
                if handshake is None:
                    return
                request = await wrap_server_stream(
                    nursery, handshake, max_message_size=self.settings.max_message_bytes
                )
            if request is not None:
                await self._handle(request, stream, peer)
            nursery.cancel_scope.cancel()

    async def _metadata_or_handshake(self, stream: trio.SocketStream, peer: Peer) -> trio.abc.Stream | None:
        """With issuers configured, a plain GET of the metadata is answered here (None); otherwise the stream
        for the WebSocket handshake."""
        bearer = self.endpoint.admission.bearer
        server = bearer.resource_server if bearer is not None else None
        if server is None:
            return stream
        head = await read_head(stream)
        asked = metadata_request(head)
        document = (
            bearer.document_at(asked[0], self.settings.path, self.endpoint.admission.routes)
            if asked is not None and bearer is not None
            else None
        )
        if asked is None or document is None:
            return Replayed(stream, head)
        try:
            self.endpoint.admission.check_host(asked[1])
        except Refused as refused:
            logger.warning("refused a metadata request from {}: {}", shown(peer), refused.reason)
            return None
        await answer_metadata(stream, document)
        return None

    async def _handle(self, request: WebSocketRequest, stream: trio.SocketStream, connected: Peer) -> None:
        headers, repeated = request_headers(request.headers)
        path = request.path.partition("?")[0]  # never the query string: it may carry a token
        admission = self.endpoint.admission
        peer, address = shown(connected), connected[0]
        try:
            address = admission.proxies.client_of(connected[0], request.headers)  # behind a trusted proxy
            if address != connected[0]:
                peer = f"{address} (via {peer})"
            if repeated is not None:
                raise Refused(400, f"the {clip(repeated)} header comes more than once; send it once")
            principal = await admission.check(path, _host_of(request), headers)
            client = admission.open_session(principal, address, len(self._sessions))
        except Refused as refused:
            status, reason = refused.status, refused.reason
            logger.warning("refused {} from {}: HTTP {}: {}", path, peer, status, reason)
            body = (refused.reason + "\n").encode()
            extra = [(b"content-type", b"text/plain; charset=utf-8"), *refused.headers]
            with trio.move_on_after(HANDSHAKE_TIMEOUT_S):
                await request.reject(refused.status, extra_headers=extra, body=body)
            return
        try:
            subprotocol = SUBPROTOCOL if SUBPROTOCOL in request.proposed_subprotocols else None
            try:
                connection = await request.accept(subprotocol=subprotocol)
            except ConnectionClosed:
                return
            session_id, send_timeout = f"ws-{next(self._numbers)}", self.settings.send_timeout_s
            subject = principal.subject if principal else None
            with logger.contextualize(session=session_id, **({"subject": subject} if subject else {})):
                logger.info("connected from {} (subprotocol {})", peer, subprotocol or "none")
                caller = caller_of(principal, address, "websocket")
                transport = WebSocketTransport(connection, send_timeout, stream)
                token = principal.token if principal is not None else None
                carried = on_behalf(token, headers, self.session_settings.forward_headers)
                await self._serve(
                    session_id, transport, principal, caller, carried, route_at(self.routes, path)
                )
        finally:
            admission.close_session(client)

    async def _serve(
        self,
        session_id: str,
        transport: WebSocketTransport,
        principal: Principal | None,
        caller: Caller,
        carried: OnBehalf | None = None,
        route: RouteState | None = None,
    ) -> None:
        bearer = self.endpoint.admission.bearer
        catalog, settings = bound(route, self.catalog, self.session_settings)
        # A WebSocket carries its token once, in the handshake: the session ends when the token does (its
        # calls in flight answered), and the client connects again with a fresh one.
        expires = bearer.expires_at(principal) if bearer is not None else None
        session = Session(
            id=session_id,
            transport=transport,
            catalog=catalog,
            settings=bearer.session_settings(principal, settings) if bearer is not None else settings,
            subject=principal.subject if principal else None,
            caller=caller,
            on_behalf=carried,  # its handshake's token and forwardable headers, for every call
            expires_at=math.inf if expires is None else trio.current_time() + (expires - time.time()),
        )
        self._sessions[session] = transport
        try:
            await session.run_temporary()
        finally:
            del self._sessions[session]

    async def _housekeeping(self, connections: trio.Nursery) -> None:
        """Keepalive, one task for every connection: a ping to each every interval; a peer that has not
        answered by the next one is gone. (A task per connection would cost each idle session its memory.)"""
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


def _host_of(request: WebSocketRequest) -> str | None:
    """The Host header: wsproto keeps it on the handshake event, apart from the other headers."""
    host = getattr(getattr(request, "_event", None), "host", None)
    return host if isinstance(host, str) else None
