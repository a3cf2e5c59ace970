"""Listening sockets for the network frontends: bind once, accept, and contain every connection.

A connection is a temporary child of its listener: whatever its handling raises (a library tripping over a
peer's bytes included) ends that connection alone, is logged once (rate-limited: an attacker cannot flood
the log) and its socket is closed. The accept loop is the listener's own; when it fails, the frontends
supervisor restarts the listener on the sockets it already holds, and the connections it accepted go on.
"""

from __future__ import annotations

import errno
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from typing import Final

import attrs
import trio
from loguru import logger

from actors.config import HttpSettings, WebSocketSettings
from actors.frontends.admission import LOOPBACK_NAMES, Admission
from actors.frontends.client_address import spelled
from actors.protocol.errors import GatewayStartError
from actors.runtime.log import RateLimiter
from actors.runtime.supervisor import describe

# Out of file descriptors or memory: accepting again at once would spin; the connections that exist go on.
RESOURCE_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
ACCEPT_RETRY_S: Final = 0.1
REFUSE_S: Final = 5.0  # to write a refusal to a connection refused before its HTTP is read
FAILURE_LOG_RATE: Final = 5.0  # connection failures logged per second, per listener; the rest are counted

Handler = Callable[[trio.SocketStream], Awaitable[None]]


class ListenError(GatewayStartError):
    """A listener cannot bind its address: the gateway does not start (exit 2), before any backend does."""


async def bind(host: str, port: int) -> list[trio.SocketListener]:
    """The listening sockets for host:port, or ListenError in one line (`address in use`, ...)."""
    try:
        return await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        reasons = {errno.EADDRINUSE: "address in use", errno.EACCES: "permission denied"}
        reason = reasons.get(exc.errno or 0) or exc.strerror or str(exc)
        shown = f"[{host}]" if ":" in host else host
        raise ListenError(f"cannot listen on {shown}:{port}: {reason}") from None


def bound_port(listeners: Sequence[trio.SocketListener]) -> int:
    return int(listeners[0].socket.getsockname()[1])


@attrs.define(eq=False)
class Endpoint:
    """Where a listener listens. Owns: its sockets (kept across the listener's runs), its URL, and its
    admission rules (which need the port it got)."""

    table: str  # its config table, "websocket" or "http", for the log
    scheme: str
    settings: WebSocketSettings | HttpSettings
    admission: Admission
    url: str = ""
    sockets: list[trio.SocketListener] | None = None

    @classmethod
    def of(cls, table: str, scheme: str, settings: WebSocketSettings | HttpSettings) -> Endpoint:
        return cls(table, scheme, settings, Admission.of(settings))

    async def bind(self) -> None:
        """Take the port (ListenError when it cannot)."""
        host = self.settings.host
        self.sockets = await bind(host, self.settings.port)
        self.admission.port = bound_port(self.sockets)
        shown = f"[{host}]" if ":" in host else host
        self.url = f"{self.scheme}://{shown}:{self.admission.port}{self.settings.path}"
        if self.admission.bearer is not None:
            self.admission.bearer.bound(self.url)

    async def for_run(self) -> list[trio.SocketListener]:
        """The sockets for one run of the listener: bound again, whole, if a run before lost one."""
        if self.sockets is None or any(s.socket.fileno() < 0 for s in self.sockets):
            self.close()
            await self.bind()
        assert self.sockets is not None
        if not self.settings.checks_tokens and self.settings.host not in LOOPBACK_NAMES:
            logger.warning("listening on {} WITHOUT auth: add [{}.auth]", self.settings.host, self.table)
        logger.info("listening on {}", self.url)
        return self.sockets

    def close(self) -> None:
        """Give the port back (the gateway is done with this listener)."""
        for socket in self.sockets or ():
            socket.socket.close()


def peer_of(stream: trio.SocketStream) -> str:
    return shown(peer_address(stream))


def peer_address(stream: trio.SocketStream) -> tuple[str, int]:
    """The connection's peer: its address (in its one spelling) and port; ("?", 0) once it is gone."""
    try:
        address = stream.socket.getpeername()
    except OSError:
        return "?", 0
    return spelled(str(address[0])), int(address[1])


def shown(peer: tuple[str, int]) -> str:
    """`1.2.3.4:80`, `[::1]:80`: an address and port as the log writes them."""
    host, port = peer
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Acceptor:
    """Owns: nothing but a log budget; the sockets belong to the listener, the connections to `connections`.
    Receives: connections on each socket.
    Sends: each connection to `handle`, as a contained task in `connections`.
    Stops when: cancelled (the sockets stay open, for the listener's next run).
    Errors: running out of file descriptors is logged once a second while it lasts, not per attempt; any
        other accept error ends the run (the listener's supervisor restarts it)."""

    def __init__(self, what: str, handle: Handler) -> None:
        self._what = what
        self._handle = handle
        self._failures = RateLimiter(FAILURE_LOG_RATE)
        self._exhausted = RateLimiter(1.0, burst=1.0)

    async def run(self, listeners: Sequence[trio.SocketListener], connections: trio.Nursery) -> None:
        async with trio.open_nursery() as accepting:
            for listener in listeners:
                accepting.start_soon(self._accept, listener, connections)

    async def _accept(self, listener: trio.SocketListener, connections: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in RESOURCE_ERRNOS:
                    raise
                self._exhausted.log("ERROR", "{}: cannot accept connections: {}", self._what, exc.strerror)
                await trio.sleep(ACCEPT_RETRY_S)
                continue
            connections.start_soon(self._contain, stream, name=f"{self._what} connection")

    async def _contain(self, stream: trio.SocketStream) -> None:
        peer = peer_of(stream)  # now: the handler may have closed the socket by the time it fails
        try:
            await self._handle(stream)
        except* Exception as failed:  # the one boundary of a connection; Cancelled passes
            self._failed(peer, failed)
        finally:
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)

    def _failed(self, peer: str, error: BaseException) -> None:
        self._failures.log(
            "WARNING", "{}: connection from {} failed and was closed: {}", self._what, peer, describe(error)
        )
        logger.opt(exception=error).debug("{}: the failed connection's traceback", self._what)


async def refuse_connection(stream: trio.SocketStream, reason: str) -> None:
    """Answer a connection that may not go on before any HTTP is read: 400 with `reason`, then it closes
    (the caller's Acceptor closes it). Bounded: a peer that reads nothing does not hold it."""
    body = f"{reason}\n".encode()
    head = "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
    answer = f"{head}content-length: {len(body)}\r\n\r\n".encode() + body
    with trio.move_on_after(REFUSE_S), suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_all(answer)
