"""The Listener: what the frontends supervisor knows of a network listener, and the run they share.

A listener kind is a subclass in a module of its own: its config table and URL scheme, the settings it
reads from the config, what it does with one accepted connection, and its own housekeeping while it runs
(WebSocket pings, HTTP idle expiry). The gateway builds one per configured table and supervises its `run`.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

import attrs
import trio
from loguru import logger

from actors.catalog import CatalogView
from actors.config import Config, HttpSettings, WebSocketSettings
from actors.frontends.listening import Acceptor, Endpoint, peer_address, refuse_connection, shown
from actors.frontends.proxy_protocol import Peer, ProxyHeaderError, read_proxy_header
from actors.routes import Routes
from actors.runtime.supervisor import ChildEvent, discard_reports, supervise
from actors.runtime.watch import Watch
from actors.session.session import Session
from actors.session.settings import SessionSettings

if TYPE_CHECKING:
    from actors.identity.keys import IssuerKeys

SettingsT = TypeVar("SettingsT", WebSocketSettings, HttpSettings)


@attrs.define(eq=False)
class Listener(abc.ABC, Generic[SettingsT]):
    """Owns: its Endpoint (the sockets, kept across runs; the URL; the admission rules) and its sessions.
    Receives: connections, through an Acceptor per run.
    Sends: each connection to `_connection`, as a contained task in the frontends' nursery.
    Stops when: cancelled; `stop_sessions()` first has every session answer what it has in flight. The
        connections and sessions live in the frontends' nursery, not in a run: a run that fails is
        restarted by the frontends supervisor while they go on.
    Errors: a connection's or a session's failure is logged and ends that connection alone; an accept
        error other than running out of descriptors ends the run.
    """

    TABLE: ClassVar[str]  # its config table, and its name in the supervisor and the log
    SCHEME: ClassVar[str]  # of its URL

    settings: SettingsT
    catalog: Watch[CatalogView]
    session_settings: SessionSettings
    endpoint: Endpoint = attrs.field(init=False)
    routes: Routes | None = attrs.field(init=False, default=None)  # [[routes]]: set by `serve_routes`

    def __attrs_post_init__(self) -> None:
        self.endpoint = Endpoint.of(self.TABLE, self.SCHEME, self.settings)
        within = self.settings.initialize_timeout_s
        self.session_settings = attrs.evolve(self.session_settings, initialize_within_s=within)

    def reconfigure(self, settings: SettingsT, session_settings: SessionSettings) -> None:
        """A reload's settings, for the connections and sessions that come after (its address stays: moving
        it needs a restart). Sessions open now keep what they were built with."""
        self.settings = settings
        within = settings.initialize_timeout_s
        self.session_settings = attrs.evolve(session_settings, initialize_within_s=within)
        self.endpoint.admission.update(settings)
        self._reconfigured()

    def serve_routes(self, routes: Routes) -> None:
        """[[routes]]: their paths are served too, each session on its path's route."""
        self.routes = self.endpoint.admission.routes = routes
        self._reconfigured()

    def _reconfigured(self) -> None:
        """A kind that handed its settings to parts of its own gives them the new ones."""

    @classmethod
    @abc.abstractmethod
    def settings_in(cls, config: Config) -> SettingsT | None:
        """This kind's table in `config`, or None when the config has none (then it does not listen)."""

    @property
    def name(self) -> str:
        return self.TABLE

    @property
    def url(self) -> str:
        return self.endpoint.url

    def issuer_keys(self) -> tuple[IssuerKeys, ...]:
        """The key sets of the issuers whose tokens it accepts (for the admin listener's metrics)."""
        bearer = self.endpoint.admission.bearer
        return tuple(bearer.keys.values()) if bearer is not None else ()

    async def run(
        self, connections: trio.Nursery, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """One run of the listener as a supervised child: accept on the bound sockets (bound again only if
        a run before this one lost them); each connection is a contained task in `connections`, which
        outlives this run."""
        sockets = await self.endpoint.for_run()
        async with trio.open_nursery() as nursery:
            bearer = self.endpoint.admission.bearer
            if bearer is not None and (keepers := bearer.keepers()):
                events, reports = trio.open_memory_channel[ChildEvent](0)
                nursery.start_soon(discard_reports, reports)
                await nursery.start(supervise, keepers, events)
            nursery.start_soon(self._housekeeping, connections)
            nursery.start_soon(Acceptor(self.TABLE, self._accepted).run, sockets, connections)
            task_status.started(self.url)

    @abc.abstractmethod
    async def _housekeeping(self, connections: trio.Nursery) -> None:
        """This kind's own task for the length of a run; its first step runs before any connection's."""

    async def _accepted(self, stream: trio.SocketStream) -> None:
        """One accepted connection: whom it is from (the client a trusted proxy's PROXY header names, when
        that proxy must send one; else the peer), then `_connection`. A header that is missing or bad is
        answered 400 and the connection closed."""
        peer = peer_address(stream)
        if self.endpoint.admission.proxies.wants_proxy_header(peer[0]):
            try:
                peer = await read_proxy_header(stream) or peer
            except ProxyHeaderError as refused:
                logger.warning("refused a connection from {}: HTTP 400: {}", shown(peer), refused)
                await refuse_connection(stream, str(refused))
                return
        await self._connection(stream, peer)

    @abc.abstractmethod
    async def _connection(self, stream: trio.SocketStream, peer: Peer) -> None:
        """One accepted connection from `peer` (the client's address and port), until it ends; what it
        raises ends this connection alone."""

    @abc.abstractmethod
    def sessions(self) -> list[Session]:
        """The sessions open now."""

    @abc.abstractmethod
    def stop_sessions(self) -> None:
        """Have every session answer what it has in flight and close (the gateway is shutting down)."""

    @abc.abstractmethod
    async def wait_sessions_done(self) -> None:
        """Until every session stopped by `stop_sessions` has ended and its last words are written."""
