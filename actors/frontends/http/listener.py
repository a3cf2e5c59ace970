"""The Streamable HTTP listener: hypercorn's Trio worker serving our ASGI app, one server per connection.

We run hypercorn's per-connection TCPServer under our own accept loop (actors.frontends.listening), so a
connection that fails ends alone and the listener is supervised like the WebSocket one. hypercorn's own
log lines go to loguru.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, ClassVar, Final

import attrs
import hypercorn.config
import trio
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import wrap_app
from loguru import logger

from actors.config import Config, HttpSettings
from actors.frontends.http.app import HttpApp
from actors.frontends.http.edge import per_connection
from actors.frontends.http.fleet_messages import told_here
from actors.frontends.http.modern import ModernPosts
from actors.frontends.http.sessions import HttpSessions
from actors.frontends.listener import Listener
from actors.frontends.proxy_protocol import Peer
from actors.session.session import Session

if TYPE_CHECKING:
    from actors.fleet.relay import FleetRelay
    from actors.fleet.sessions import FleetSessions
    from actors.fleet.states import FleetStates

GRACEFUL_S: Final = 1.0  # for hypercorn to finish its connections once the listener is cancelled


@attrs.define(eq=False)
class HttpListener(Listener[HttpSettings]):
    """Owns: the listening socket (through hypercorn) and every HTTP session (in `_sessions`).
    Receives: HTTP requests.
    Sends: each message to its session; each session's messages on its SSE streams or as JSON.
    Stops when: cancelled; `stop_sessions()` first answers what every session has in flight.
    Errors: a session's crash is logged and ends that session alone; its id then gets 404.
    """

    TABLE: ClassVar[str] = "http"
    SCHEME: ClassVar[str] = "http"

    _sessions: HttpSessions = attrs.field(init=False)
    app: HttpApp = attrs.field(init=False)
    _server: hypercorn.config.Config = attrs.field(init=False)
    _context: WorkerContext = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        admission = self.endpoint.admission
        self._sessions = HttpSessions(
            settings=self.settings,
            catalog=self.catalog,
            session_settings=self.session_settings,
            admission=admission,
        )
        modern = ModernPosts(sessions=self._sessions)
        self.app = HttpApp(
            settings=self.settings, admission=admission, sessions=self._sessions, modern=modern
        )
        self._server = _server_config()
        self._context = WorkerContext(None)

    @classmethod
    def settings_in(cls, config: Config) -> HttpSettings | None:
        return config.http

    def _reconfigured(self) -> None:
        self.app.settings = self._sessions.settings = self.settings
        self._sessions.reconfigure(self.session_settings)

    def join_fleet(self, fleet: FleetSessions, relay: FleetRelay, states: FleetStates) -> None:
        """[fleet]: session ids sealed with the fleet's keys, sessions of other replicas taken up here, a
        session's events relayed to the replica its GET stream is open on, modern retries of calls parked
        on another replica forwarded there."""
        self._sessions.fleet, self._sessions.relay, self._sessions.fleet_states = fleet, relay, states
        fleet.end_local = self._sessions.ended_elsewhere
        fleet.tell_local = partial(told_here, self._sessions)

    def sessions(self) -> list[Session]:
        return self._sessions.sessions()

    def stop_sessions(self) -> None:
        self._sessions.stop_all()

    async def wait_sessions_done(self) -> None:
        """Until every session has ended and every response (an SSE stream's last chunk too) is written."""
        await self._sessions.wait_all_done()
        await self.app.wait_no_requests()

    async def _housekeeping(self, connections: trio.Nursery) -> None:
        """Sessions and their streams' tasks run in `connections`; idle sessions are ended."""
        self._sessions.serve_in(connections)
        await self._sessions.expire_idle()

    async def _connection(self, stream: trio.SocketStream, peer: Peer) -> None:
        """hypercorn's server for one connection; what it raises on a peer's bytes ends this one alone."""
        max_bytes = lambda: self.settings.max_message_bytes  # noqa: E731 (a reload's value counts)
        edge = per_connection(self.app, stream, peer, self.endpoint.admission, max_bytes)
        app = wrap_app(edge, self._server.wsgi_max_body_size, "asgi")
        await TCPServer(app, self._server, self._context, ConnectionState({}), stream)  # type: ignore[arg-type]


def _server_config() -> hypercorn.config.Config:
    config = hypercorn.config.Config()
    config.accesslog = None
    config.errorlog = hypercorn_log()
    config.graceful_timeout = GRACEFUL_S
    config.include_server_header = False
    return config


def hypercorn_log() -> logging.Logger:
    """hypercorn logs with the standard library; its lines go to loguru like every other."""
    log = logging.getLogger("mcp_gateway.hypercorn")
    log.propagate = False
    log.setLevel(logging.INFO)
    if not log.handlers:
        log.addHandler(_ToLoguru())
    return log


class _ToLoguru(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        logger.opt(depth=6).log(record.levelname, "http server: {}", record.getMessage())
