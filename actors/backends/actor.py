"""The backend actor: one backend MCP server, one run per start.

Each run spawns the server (or connects to it), finds its era (probe.py: server/discover under era "auto"),
performs the client side of initialize or, for a 2026-07-28 server, discover alone (discovery.py), lists
its tools (following nextCursor), reports BackendReady to the catalog and then forwards Calls from its inbox
until the run ends. The supervisor restarts it by policy; nothing here retries, except the one start again of
a process that exited on the era probe, which is legacy and which the supervisor never sees.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Final

import attrs
import trio
from loguru import logger

from actors.backends.connection import BackendLink, BackendRequestError
from actors.backends.credentials import Credentials
from actors.backends.discovery import start_modern
from actors.backends.door import BackendDoor
from actors.backends.era import DISCOVER, EraVerdict, gateway_envelope
from actors.backends.errors import BackendExitedError, BackendHungError, BackendStartError
from actors.backends.handshake import handshake
from actors.backends.health import watch_health
from actors.backends.http_headers import declared_param_headers
from actors.backends.input import log_params, updated_params
from actors.backends.lane import LegacyLane
from actors.backends.list_news import ListNews
from actors.backends.listing import CHANGES, LISTS, list_all
from actors.backends.modern import ModernRun, refused_version
from actors.backends.opening import explain_end, fail_queued, link_over, open_transport, start_link_tasks
from actors.backends.over_http import is_http
from actors.backends.probe import EraState
from actors.backends.roots import follow_clients, passes_roots_change
from actors.backends.run_end import RunEnd
from actors.catalog import CatalogEvent
from actors.catalog.clients import ClientDirectory
from actors.catalog.subscriptions import Subscriptions
from actors.config import BackendConfig
from actors.config.sandbox_schema import SandboxSettings
from actors.protocol import codec
from actors.protocol.codec import clip, shown
from actors.protocol.envelopes import (
    BackendCommand,
    BackendEvent,
    BackendReady,
    Call,
    Cancel,
    ListChanged,
)
from actors.protocol.eras import MODERN_VERSIONS
from actors.protocol.messages import Notification
from actors.runtime.broadcast import Broadcast
from actors.runtime.log import RateLimiter
from actors.runtime.shutdown import Budget, Shutdown
from actors.telemetry.meters import BackendMeter

INBOX_SIZE: Final = 64  # calls queued per backend before callers wait for it to write them
BATCH_MAX: Final = 64  # queued commands written to the backend together
SERVER_LOG_RATE: Final = 50.0  # a server's log messages copied to the gateway's log per second
SERVER_LOG_CHARS: Final = 1000  # of one message's data
LOG_LEVELS: Final = {"debug": "DEBUG", "info": "INFO", "notice": "INFO", "warning": "WARNING"}


@attrs.define(kw_only=True)
class Backend:
    """One supervised backend.

    Owns: the child process and its link (in-flight table) for the current run; the run's inbox; its era
        across runs (EraState); a modern run's listen (ModernRun) and legacy lane (LegacyLane).
    Receives: Call, Cancel and Notify on the inbox published in BackendReady.
    Sends: BackendReady and ListChanged to the catalog; each Call's Reply to its reply_to (a modern
        backend's resources/subscribe and unsubscribe are answered by its listen, which they change).
    Stops when: cancelled (gateway shutdown) or when the server's process exits with code 0 (normal exit).
    Errors: BackendStartError (cannot spawn, probe or handshake fails or times out), BackendExitedError (the
        process died or its stream closed), BackendEraError (-32022 to a call: its era is probed again at
        the restart). Either way every call in flight or queued gets an error naming it.
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
    meter: BackendMeter = attrs.field(factory=lambda: BackendMeter("-"))  # its starts, calls and bytes
    expose_stderr: bool = False  # [gateway] expose_backend_stderr: calls it fails as it dies are told too
    list_news: ListNews | None = None  # its server's list changes to the fleet, and the fleet's to it
    # a remote backend's credential and forwarded headers (credentials.py), with its token broker, if any:
    # the broker runs with each run, its tokens kept across runs
    credentials: Credentials | None = None
    shutdown: Shutdown = attrs.field(
        factory=Shutdown
    )  # the gateway's: its budget and urgency stop the process
    warned_env: bool = attrs.field(init=False, default=False)  # about withheld inherit_env names, once
    sandbox: SandboxSettings | None = None  # a stdio backend's (Config.sandbox_of); None: remote
    warned_sandbox: set[str] = attrs.field(init=False, factory=set)  # its DEGRADED line, said once
    _changed: dict[str, trio.Event] = attrs.field(init=False, factory=dict)  # kind -> list_changed seen
    _announced: set[str] = attrs.field(init=False, factory=set)  # kinds of those said changed, not checked
    _kinds: list[str] = attrs.field(init=False, factory=list)  # the lists this run's server has
    _link: BackendLink | None = attrs.field(init=False, default=None)  # this run's
    _server_logs: RateLimiter | None = attrs.field(init=False, default=None)  # this run's, for its logs
    _era: EraState = attrs.field(init=False)  # its era across runs: probed, kept or forced
    _modern: ModernRun | None = attrs.field(init=False, default=None)  # this run's, if it speaks 2026-07-28
    _lane: LegacyLane | None = attrs.field(init=False, default=None)  # this run's, for legacy clients

    def __attrs_post_init__(self) -> None:
        self._era = EraState(
            era=self.config.era, gateway_name=self.gateway_name, probe_timeout_s=self.config.probe_timeout_s
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.meter.run_started()
        news = self.list_news or ListNews()
        name = self.config.name
        with logger.contextualize(backend=name), news.hearing(name, self._mark_changed):
            again = True
            while again:  # once more, as legacy, after a process that exited on the era probe
                async with trio.open_nursery() as connection:  # a WebSocket's reader task lives here
                    again = await self._run(connection, task_status)
                    connection.cancel_scope.cancel()

    async def _run(self, connection: trio.Nursery, task_status: trio.TaskStatus[None]) -> bool:
        """One connection to the server; True when it ended on the era probe and is to be made again."""
        calls, inbox = trio.open_memory_channel[BackendCommand](INBOX_SIZE)
        transport = await open_transport(self, connection)
        link = link_over(self, transport, self._on_notification)
        self.meter.pid = getattr(transport, "pid", None)  # a process's; a remote backend has none
        self.meter.inflight_calls = lambda: [
            *link.inflight.values(),
            *(self._lane.calls() if self._lane else ()),
        ]
        addressee = self.clients.only() if self.clients is not None else None
        self._changed = {kind: trio.Event() for kind in LISTS}
        self._announced = set()
        self._link, self._server_logs = link, RateLimiter(SERVER_LOG_RATE)
        started, error = False, None
        end = RunEnd(name=self.config.name, catalog=self.catalog, link=link)
        try:
            with link.cancel_scope:
                async with trio.open_nursery() as nursery:
                    start_link_tasks(link, transport, nursery)
                    ready = await self._start(link, calls, nursery, addressee)
                    ready = attrs.evolve(ready, call_now=BackendDoor(link, inbox, self._lane).call_now)
                    await self.catalog.send(ready)
                    end.arm(nursery)  # from now on a loss takes its tools out before any call is answered
                    self.meter.ready_since = trio.current_time()
                    task_status.started()
                    started = True
                    await self._serve(link, inbox)
        except Exception as exc:  # explained below, once the process has been stopped
            error = exc
        finally:
            lost = link.lost
            reason = (
                (str(lost) if self.expose_stderr else lost.without_stderr)
                if lost
                else "the gateway is stopping it"
            )
            await end.withdraw()  # done already, unless the loss came before `arm`
            fail_queued(self.config.name, inbox, reason)
            link.fail_all(reason)
            self.meter.run_ended()
            # The gateway's shutdown budget while it stops, its own share of shutdown_s when stopped alone.
            budget = self.shutdown.budget_or(Budget.of(self.shutdown_s))
            # A hung server will not notice its stdin closing: straight to SIGTERM.
            polite_s = 0.0 if isinstance(link.lost, BackendHungError) else budget.polite_s
            await transport.stop(close_wait_s=polite_s, term_wait_s=budget.term_s)
            self._modern, self._lane = None, None
        if self._era.died_on_probe(link, transport):
            return True
        await explain_end(link, transport, started, error)
        return False

    async def _start(
        self,
        link: BackendLink,
        calls: trio.MemorySendChannel[BackendCommand],
        nursery: trio.Nursery,
        addressee: object,
    ) -> BackendReady:
        """The start in its era, and the tasks that serve the run beside the calls."""
        over_http = is_http(link.transport)
        verdict, ready = await self._handshake(link, calls, over_http)
        self.meter.eras = verdict.era.value
        if self._era.lanes(verdict):  # a second connection for legacy clients, opened on the first's call
            self._lane = LegacyLane(backend=self, modern=link, era=self._era)
            nursery.start_soon(self._lane.run)
        if verdict.modern:
            relist_tools = partial(self._relist, link, "tools")
            self._modern = ModernRun(
                link=link, nursery=nursery, era=self._era, over_http=over_http, relist_tools=relist_tools
            )
            self._listed("tools", ready.tools)
            uris = self.subscriptions.uris_of(self.config.name) if self.subscriptions is not None else []
            await self._modern.start(ready.capabilities, uris)
        else:
            link.on_error = partial(refused_version, self._era, link)
            if self.roots == "client" and self.clients is not None:
                nursery.start_soon(follow_clients, link, self.clients, addressee)
        for kind in self._kinds:
            nursery.start_soon(self._relist_on_change, link, kind)
        if self.config.health.interval_s > 0:
            liveness = DISCOVER if verdict.modern else "ping"
            nursery.start_soon(watch_health, link, self.config.health, liveness)
        return ready

    async def _handshake(
        self, link: BackendLink, calls: trio.MemorySendChannel[BackendCommand], over_http: bool
    ) -> tuple[EraVerdict, BackendReady]:
        """The era (probed, kept or forced), then initialize or discover, and the first listings: all
        within startup_timeout_s."""
        stage = f"{DISCOVER} (the era probe)"
        with trio.move_on_after(self.startup_timeout_s):
            verdict = await self._era.verdict(link, over_http=over_http)
            if verdict.modern:
                stage = f"{DISCOVER} and the first listings"
                link.envelope = gateway_envelope(self.gateway_name, verdict.version or MODERN_VERSIONS[0])
                if is_http(link.transport):
                    link.transport.modern = True
                ready, self._kinds = await self._era.checked(start_modern(self, link, calls, verdict))
            else:
                stage = "initialize and tools/list"
                ready, self._kinds = await self._era.checked(handshake(self, link, calls))
            return verdict, ready
        raise BackendStartError(f"{stage} did not finish within {self.startup_timeout_s}s")

    def _on_notification(self, notification: Notification) -> None:
        """A notification the link does not handle itself. Only a well-formed, rebuilt one reaches sessions;
        a malformed one is dropped and logged (rate-limited by the link)."""
        method, params = notification.method, notification.params
        if self._modern is not None and self._modern.hears(notification):
            return
        if method in CHANGES:
            self._mark_changed(method)
            if self.list_news is not None:
                self.list_news.heard(self.config.name, method)
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

    def _mark_changed(self, method: str, announced: bool = True) -> None:
        """The kinds a list_changed names are listed again (once more after a listing running now);
        `announced` False: only to check, news to clients only if a list differs (fleet catch-up)."""
        for kind in CHANGES.get(method, ()):
            changed = self._changed.get(kind)
            if changed is not None:
                if announced:
                    self._announced.add(kind)
                changed.set()

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
            announced = kind in self._announced
            self._announced.discard(kind)
            await self._relist(link, kind, announced)

    async def _relist(self, link: BackendLink, kind: str, announced: bool = True) -> None:
        """List `kind` again and tell the catalog; a failure keeps the old list."""
        try:
            items = await list_all(link, kind)
        except (BackendStartError, BackendExitedError, BackendRequestError) as exc:
            logger.warning("{} failed, keeping the old list: {}", LISTS[kind][0], exc)
            return
        self._listed(kind, items)
        hint = link.list_hints.get(kind, (None, None))
        await self.catalog.send(ListChanged(self.config.name, kind, items, hint, announced))

    def _listed(self, kind: str, items: tuple[dict[str, Any], ...]) -> None:
        """A modern HTTP backend's tools say which arguments go in Mcp-Param-* headers."""
        transport = self._link.transport if self._link is not None else None
        if kind == "tools" and is_http(transport) and transport.modern:
            transport.param_headers = declared_param_headers(items)

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
                if self._lane is not None and self._lane.takes(command):
                    continue
                if self._modern is not None and self._modern.takes(command):
                    continue
                if isinstance(command, Call):
                    frames.append(link.frame_for(command))
                elif isinstance(command, Cancel):
                    frame = link.cancel_frame(command)
                    if frame is not None:
                        frames.append(frame)
                elif passes_roots_change(command, self.roots, self.clients):
                    frames.append(codec.encode(command.notification))
            if frames:
                await link.send_frames(frames)
