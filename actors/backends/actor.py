"""The backend actor: one backend MCP server, one run per start.

Each run spawns the server, performs the client side of initialize, lists its tools (following nextCursor),
reports BackendReady to the catalog and then forwards Calls from its inbox until the run ends. The
supervisor restarts it by policy; nothing here retries.
"""

from __future__ import annotations

import math
import shlex
from typing import Any, Final

import attrs
import trio
from loguru import logger

from actors.backends.connection import BackendLink, BackendRequestError, answer, unavailable
from actors.backends.door import BackendDoor
from actors.backends.handshake import handshake
from actors.backends.health import watch_health
from actors.backends.http import HttpBackendTransport
from actors.backends.input import log_params, updated_params
from actors.backends.listing import CHANGES, LISTS, list_all
from actors.backends.process import ProcessTransport, backend_environment
from actors.backends.websocket import WebSocketBackendTransport
from actors.catalog import CatalogEvent
from actors.catalog.clients import ClientDirectory
from actors.catalog.subscriptions import Subscriptions
from actors.config import BackendConfig, resolve_command
from actors.framing.transport import BackendTransport
from actors.protocol import codec
from actors.protocol.codec import clip, shown
from actors.protocol.envelopes import (
    BackendCommand,
    BackendEvent,
    Call,
    Cancel,
    ListChanged,
    Notify,
    Reply,
)
from actors.protocol.errors import BackendExitedError, BackendHungError, BackendStartError
from actors.protocol.messages import Notification
from actors.runtime.broadcast import Broadcast
from actors.runtime.log import RateLimiter

INBOX_SIZE: Final = 64  # calls queued per backend before callers wait for it to write them
BATCH_MAX: Final = 64  # queued commands written to the backend together
SERVER_LOG_RATE: Final = 50.0  # a server's log messages copied to the gateway's log per second
SERVER_LOG_CHARS: Final = 1000  # of one message's data
EXIT_INFO_WAIT_S: Final = 1.0  # after a crash, how long to wait for the exit code and last stderr lines
LOG_LEVELS: Final = {"debug": "DEBUG", "info": "INFO", "notice": "INFO", "warning": "WARNING"}


@attrs.define(kw_only=True)
class Backend:
    """One supervised backend.

    Owns: the child process and its link (in-flight table) for the current run; the run's inbox.
    Receives: Call and Cancel on the inbox published in BackendReady.
    Sends: BackendReady and ListChanged to the catalog; each Call's Reply to its reply_to.
    Stops when: cancelled (gateway shutdown) or when the server's process exits with code 0 (normal exit).
    Errors: BackendStartError (cannot spawn, handshake fails or times out), BackendExitedError (the process
        died or its stream closed). Either way every call in flight or queued gets an error naming it.
    """

    config: BackendConfig
    catalog: trio.MemorySendChannel[CatalogEvent]
    gateway_name: str
    startup_timeout_s: float
    shutdown_s: float
    max_message_bytes: int
    request_timeout_s: float = math.inf  # a client's call unanswered that long gets REQUEST_TIMEOUT
    events: Broadcast[BackendEvent] | None = None  # log messages and resource updates, to the sessions
    clients: ClientDirectory | None = None  # sessions its requests for a client may go to
    subscriptions: Subscriptions | None = None  # URIs sessions want updates of, renewed at each start
    withheld_env: frozenset[str] = frozenset()  # never inherited: the listeners' secrets (jwt_secret_env)
    roots: str | tuple[str, ...] = "client"  # Config.roots_of: "none", "client" or the operator's URIs
    _warned_env: bool = attrs.field(init=False, default=False)
    _changed: dict[str, trio.Event] = attrs.field(init=False, factory=dict)  # kind -> list_changed seen
    _kinds: list[str] = attrs.field(init=False, factory=list)  # the lists this run's server has
    _link: BackendLink | None = attrs.field(init=False, default=None)  # this run's
    _server_logs: RateLimiter | None = attrs.field(init=False, default=None)  # this run's, for its logs

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with logger.contextualize(backend=self.config.name):
            async with trio.open_nursery() as connection:  # a WebSocket's reader task lives here
                await self._run(connection, task_status)
                connection.cancel_scope.cancel()

    async def _run(self, connection: trio.Nursery, task_status: trio.TaskStatus[None]) -> None:
        calls, inbox = trio.open_memory_channel[BackendCommand](INBOX_SIZE)
        transport = await self._open(connection)
        link = BackendLink(
            name=self.config.name,
            transport=transport,
            on_notification=self._on_notification,
            cancel_scope=trio.CancelScope(),
            request_timeout_s=self.request_timeout_s,
            clients=self.clients,
            roots=self.roots,
        )
        addressee = self.clients.only() if self.clients is not None else None
        self._changed = {kind: trio.Event() for kind in LISTS}
        self._link, self._server_logs = link, RateLimiter(SERVER_LOG_RATE)
        started, error = False, None
        try:
            with link.cancel_scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(transport.drain)
                    nursery.start_soon(link.read, nursery)
                    nursery.start_soon(link.sweep)
                    ready, self._kinds = await handshake(self, link, calls)
                    ready = attrs.evolve(ready, call_now=BackendDoor(link, inbox).call_now)
                    for kind in self._kinds:
                        nursery.start_soon(self._relist_on_change, link, kind)
                    if self.roots == "client" and self.clients is not None:
                        nursery.start_soon(self._follow_clients, link, addressee)
                    if self.config.health.interval_s > 0:
                        nursery.start_soon(watch_health, link, self.config.health)
                    await self.catalog.send(ready)
                    task_status.started()
                    started = True
                    await self._serve(link, inbox)
        except Exception as exc:  # explained below, once the process has been stopped
            error = exc
        finally:
            reason = link.lost.without_stderr if link.lost else "the gateway is stopping it"
            _fail_queued(self.config.name, inbox, reason)
            link.fail_all(reason)
            # A hung server will not notice its stdin closing: straight to SIGTERM.
            polite_s = 0.0 if isinstance(link.lost, BackendHungError) else self.shutdown_s * 0.4
            await transport.stop(close_wait_s=polite_s, term_wait_s=self.shutdown_s * 0.3)
        await self._end_of_run(link, transport, started, error)

    async def _open(self, connection: trio.Nursery) -> BackendTransport:
        url = self.config.url
        if url is not None:
            kind = (
                HttpBackendTransport if url.startswith(("http://", "https://")) else WebSocketBackendTransport
            )
            backend = await kind.connect(connection, url, self.config.headers, self.max_message_bytes)
            logger.info("connecting to {}", url)
            return backend
        return await self._spawn()

    async def _spawn(self) -> ProcessTransport:
        command = resolve_command(self.config)
        if command is None:
            raise BackendStartError(
                f"command {self.config.command!r} not found (cwd {str(self.config.cwd)!r})"
            )
        argv = [command, *self.config.args]
        withheld = [name for name in self.config.inherit_env if name in self.withheld_env]
        if withheld and not self._warned_env:
            self._warned_env = True
            logger.warning(
                "inherit_env names {} which a listener reads its token secret from; not passed on",
                ", ".join(withheld),
            )
        env = backend_environment(self.config.env, self.config.inherit_env, self.withheld_env)
        transport = await ProcessTransport.spawn(
            argv, cwd=self.config.cwd, env=env, max_bytes=self.max_message_bytes
        )
        logger.info("started process {}: {}", transport.pid, shlex.join(argv))
        return transport

    async def _end_of_run(
        self, link: BackendLink, transport: BackendTransport, started: bool, error: Exception | None
    ) -> None:
        """Explain how the run ended, once the exit code and the last stderr lines are in. When the process
        died, its exit is the explanation, whatever the request that noticed it saw."""
        with trio.move_on_after(EXIT_INFO_WAIT_S):
            await transport.ended.wait()
        if isinstance(link.lost, BackendExitedError):
            ended = transport.describe_end()
            stderr = transport.last_stderr() if isinstance(transport, ProcessTransport) else ""
            if started and transport.ended_cleanly:
                logger.info("{}", BackendExitedError(ended, stderr))
                return
            if started:
                raise BackendExitedError(ended, stderr)
            raise BackendStartError(f"exited during start-up: {ended}", stderr)
        if error is not None:
            raise error
        if link.lost is not None:
            raise link.lost

    def _on_notification(self, notification: Notification) -> None:
        """A notification the link does not handle itself. Only a well-formed, rebuilt one reaches sessions;
        a malformed one is dropped and logged (rate-limited by the link)."""
        method, params = notification.method, notification.params
        if method in CHANGES:
            for kind in CHANGES[method]:
                self._changed[kind].set()
            return
        if method == "notifications/message":
            clean = log_params(params, self.config.name)
            if clean is not None:
                self._log_server_message(clean, params)  # type: ignore[arg-type]
                self._tell_the_one_call(Notification(method, clean))
        elif method == "notifications/resources/updated":
            clean = updated_params(params)
        else:
            logger.debug("ignored notification {}", shown(method))
            return
        if clean is None:
            assert self._link is not None
            self._link.drop(f"dropped a malformed {method}: {shown(params)}")
        else:
            self._publish(Notification(method, clean))

    def _tell_the_one_call(self, notification: Notification) -> None:
        """A log line says no call's id: it reaches a modern call's client only while that call is the one
        in flight here (legacy sessions hear it from the events, by their own level)."""
        assert self._link is not None
        if len(self._link.inflight) == 1:
            (call,) = self._link.inflight.values()
            if call.log_to is not None:
                call.log_to(notification)

    def _log_server_message(self, clean: dict[str, Any], params: dict[str, Any]) -> None:
        """The gateway's own log gets the server's log messages too, rate-limited and cut short."""
        assert self._server_logs is not None
        name = params.get("logger")
        source = clip(name) if isinstance(name, str) else "-"
        data = clip(str(clean["data"]), SERVER_LOG_CHARS)
        self._server_logs.log(LOG_LEVELS.get(clean["level"], "WARNING"), "server log ({}): {}", source, data)

    def _publish(self, notification: Notification) -> None:
        if self.events is not None:
            self.events.publish(BackendEvent(self.config.name, notification))

    async def _relist_on_change(self, link: BackendLink, kind: str) -> None:
        while True:
            await self._changed[kind].wait()
            self._changed[kind] = trio.Event()  # changes announced from here on trigger another listing
            try:
                items = await list_all(link, kind)
            except (BackendStartError, BackendExitedError, BackendRequestError) as exc:
                logger.warning("{} after list_changed failed, keeping the old list: {}", LISTS[kind][0], exc)
                continue
            await self.catalog.send(ListChanged(self.config.name, kind, items))

    async def _serve(self, link: BackendLink, inbox: trio.MemoryReceiveChannel[BackendCommand]) -> None:
        async for first in inbox:
            commands = [first]
            while len(commands) < BATCH_MAX:  # what else is queued goes in the same write
                try:
                    commands.append(inbox.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            frames = []
            for command in commands:
                if isinstance(command, Call):
                    frames.append(link.frame_for(command))
                elif isinstance(command, Cancel):
                    frame = link.cancel_frame(command)
                    if frame is not None:
                        frames.append(frame)
                elif self._passes(command):
                    frames.append(codec.encode(command.notification))
            if frames:
                await link.send_frames(frames)

    def _passes(self, command: Notify) -> bool:
        """A session's notification for backends. Roots changes reach only a backend whose roots are the
        client's, and only from the one session connected (whose roots it may ask for)."""
        if command.notification.method != "notifications/roots/list_changed":
            return True
        if self.roots != "client":
            return False
        if self.clients is None:
            return True
        return command.asks_to is not None and command.asks_to is self.clients.only()

    async def _follow_clients(self, link: BackendLink, addressee: object) -> None:
        """A backend whose roots are the client's, and which asked for them, is told they changed whenever
        the session that may answer changes (another one alone, or none): so a session that has gone does
        not leave its roots behind for the next."""
        assert self.clients is not None
        while True:
            now = self.clients.only()
            if now is not addressee:
                addressee = now
                if link.client_requests.asked_roots:
                    await link.send(Notification("notifications/roots/list_changed"))
            await self.clients.wait_changed()


def _fail_queued(name: str, inbox: trio.MemoryReceiveChannel[BackendCommand], reason: str) -> None:
    """Answer every call still queued in the inbox, then close it; later senders get BrokenResourceError."""
    error = unavailable(name, reason)
    with inbox:
        while True:
            try:
                command = inbox.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                return
            if isinstance(command, Call):
                answer(command, Reply(error=error))
