"""The admin listener: hypercorn's per-connection server for the admin app, under our own accept loop.

Bound with the other listeners, before any backend starts (a port in use is one line and exit 2), so
/readyz answers 503 while backends are still starting. Each run accepts on the sockets it holds; a run that
fails is restarted by the admin's supervisor, on the same sockets.
"""

from __future__ import annotations

from typing import Final

import attrs
import hypercorn.config
import trio
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import wrap_app
from loguru import logger

from actors.admin.app import AdminApp
from actors.config.admin_schema import AdminSettings
from actors.frontends.http.listener import hypercorn_log
from actors.frontends.http.whole_body import whole_bodies
from actors.frontends.listening import Acceptor, bind, bound_port

GRACEFUL_S: Final = 1.0  # for hypercorn to finish its connections once the listener is cancelled
ROUTES: Final = "/ /healthz /readyz /metrics /status"
MAX_BODY_BYTES: Final = 64 * 1024  # a body sent to a GET-only listener, read and dropped before the answer


@attrs.define(eq=False)
class AdminListener:
    """Owns: its listening sockets (kept across runs, closed by `close`) and its URL.
    Receives: admin connections.
    Sends: each connection to hypercorn's server for the admin app, as a task of the run.
    Stops when: cancelled; its connections (event streams included) end with the run.
    Errors: ListenError from `bind` when the address cannot be had; a failing accept loop ends the run (its
        supervisor restarts it); a failing connection ends alone (the Acceptor contains it).
    """

    settings: AdminSettings
    app: AdminApp
    url: str = ""
    _sockets: list[trio.SocketListener] | None = None
    _server: hypercorn.config.Config = attrs.field(init=False)
    _context: WorkerContext = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._server = hypercorn.config.Config()
        self._server.accesslog = None
        self._server.errorlog = hypercorn_log()
        self._server.graceful_timeout = GRACEFUL_S
        self._server.include_server_header = False
        self._context = WorkerContext(None)

    async def bind(self) -> None:
        """Take the port (ListenError when it cannot)."""
        host = self.settings.host
        self._sockets = await bind(host, self.settings.port)
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{bound_port(self._sockets)}"
        self.app.model.url = self.url

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        if self._sockets is None or any(s.socket.fileno() < 0 for s in self._sockets):
            self.close()
            await self.bind()
        assert self._sockets is not None
        auth = "bearer token" if self.settings.token else "no token (loopback only)"
        logger.info("admin listener on {} ({}; {})", self.url, ROUTES, auth)
        async with trio.open_nursery() as connections:
            task_status.started()
            await Acceptor("admin", self._connection).run(self._sockets, connections)

    async def _connection(self, stream: trio.SocketStream) -> None:
        app = wrap_app(
            whole_bodies(self.app, lambda: MAX_BODY_BYTES), self._server.wsgi_max_body_size, "asgi"
        )
        await TCPServer(app, self._server, self._context, ConnectionState({}), stream)  # type: ignore[arg-type]

    def close(self) -> None:
        """Give the port back."""
        for socket in self._sockets or ():
            socket.socket.close()
