"""The legacy lane: a second connection to a backend that speaks both eras, for its legacy clients' calls.

The official SDKs pin a connection to the era of its first request. A backend found modern under era
"auto" is reached over its run's connection in 2026-07-28; there, a tool that asks its client the old way
(a real sampling or elicitation request during the call) has no back-channel, so a legacy client reached
through the bridge would lose what a direct connection gives it. So the first call of a legacy client that
may make the backend ask (tools/call, prompts/get, resources/read) opens a lane: the backend spawned again
the same way (or its URL connected to again) and initialized. From then on legacy clients' calls go over
it, and the backend's asks reach their client through the lane link's ClientRequests, as any legacy
backend's do. Everything else (lists, subscriptions, the bridge's resumed rounds) stays on the run's
connection, and the catalog lists from it alone. The two processes of a stdio backend share no state.

Calls that come while the lane opens wait for it. A backend that refuses initialize is modern-only for the
gateway's run (EraState.modern_only): the waiting calls, and every later one, go over the run's connection
through the bridge. A lane that cannot start fails only the calls that waited for it (they go over the run's
connection); legacy calls take the bridge for a backoff, then open it again; after LANE_FAILURES_MAX
failures in a row they take the bridge for the rest of the run. An open lane is pinged as the run's
connection is ([backends.health]); one that dies or hangs ends the run (BackendLaneError), as the death of a
backend's only process does: its tools leave the catalog (clients hear list_changed), every call of both
connections is answered with an error naming the backend, and the supervisor restarts the backend, counted
by its restart intensity. A lane with no call for `lane_idle_s` (the backend's config) is closed, not a
failure, and the next legacy call opens one again. The lane is the run's: it ends with it.
"""

from __future__ import annotations

import math
from functools import partial
from typing import TYPE_CHECKING, Final

import attrs
import trio
from loguru import logger

from actors.backends.connection import BackendLink, BackendRequestError
from actors.backends.errors import (
    BackendError,
    BackendExitedError,
    BackendHungError,
    BackendLaneError,
    BackendStartError,
)
from actors.backends.handshake import initialize
from actors.backends.health import watch_health
from actors.backends.input import log_params
from actors.backends.lane_policy import (
    LANE_BACKOFF_S,
    LANE_FAILURES_MAX,
    LaneState,
    for_lane,
)
from actors.backends.opening import fail_queued, link_over, open_transport, start_link_tasks
from actors.backends.probe import EraState
from actors.backends.roots import follow_clients, passes_roots_change
from actors.protocol import codec
from actors.protocol.envelopes import BackendCommand, BackendEvent, Call, Cancel, Notify, Reply, answer
from actors.protocol.errors import unavailable
from actors.protocol.messages import Notification
from actors.runtime.shutdown import Budget

if TYPE_CHECKING:
    from actors.backends.actor import Backend

LANE_INBOX_SIZE: Final = 64  # legacy calls queued for the lane; past it they take the bridge


class LaneRefusedError(BackendError):
    """The backend answered the lane's initialize with an error (a modern-only server: -32022), or in a
    version the gateway does not speak: it is modern-only."""


@attrs.define(kw_only=True, eq=False)
class LegacyLane:
    """Owns: the lane's connection (its process or socket, its BackendLink and in-flight table) while it
        is open; the calls waiting for it to open; its inbox.
    Receives: from the backend actor, legacy clients' calls (`takes`), a copy of every Cancel and, while
        open, of every client's roots change.
    Sends: each call's frame over the lane, or over the run's connection (`modern`) when it cannot take it.
    Stops when: the backend's run ends (its nursery is cancelled): the lane's process is stopped and every
        call it holds is answered with an error naming the backend.
    Errors: a lane that dies or hangs once open loses the run's link (BackendLaneError): the run ends; a
        lane that cannot start fails only the calls that waited for it."""

    backend: Backend
    modern: BackendLink  # the run's connection
    era: EraState  # the backend's, across runs: told when the backend refuses a lane
    state: LaneState = LaneState.CLOSED
    failures: int = 0
    _retry_at: float = -math.inf
    _last_call_at: float = -math.inf  # when the open lane last took a call
    _had_calls: bool = False
    _link: BackendLink | None = None
    _pending: list[Call] = attrs.field(factory=list)
    _send: trio.MemorySendChannel[BackendCommand] = attrs.field(init=False)
    _recv: trio.MemoryReceiveChannel[BackendCommand] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._send, self._recv = trio.open_memory_channel[BackendCommand](LANE_INBOX_SIZE)

    @property
    def name(self) -> str:
        return self.backend.config.name

    def calls(self) -> list[Call]:
        """The calls it holds: waiting for it to open, and in flight over the lane."""
        return [*self._pending, *(self._link.inflight.values() if self._link is not None else ())]

    def wants(self, command: BackendCommand) -> bool:
        """Whether a call is the lane's now (not while it backs off, nor once the backend refused it)."""
        if not for_lane(command):
            return False
        if self.state is LaneState.CLOSED:
            return trio.current_time() >= self._retry_at
        return self.state in (LaneState.OPENING, LaneState.OPEN)

    def takes(self, command: BackendCommand) -> bool:
        """True when the lane took a call (False: the run's connection sends it: a full lane inbox never
        holds the actor up). A Cancel is copied to the lane once it has had a call, and also handled by the
        run's connection (False); so is a client's roots change, while the lane is open (a modern
        connection has no use for it, a legacy one may have asked for the roots)."""
        if isinstance(command, Cancel | Notify):
            if self._had_calls if isinstance(command, Cancel) else self.state is LaneState.OPEN:
                self._offer(command)
            return False
        if not self.wants(command) or not self._offer(command):
            return False
        self._had_calls = True
        return True

    def _offer(self, command: BackendCommand) -> bool:
        try:
            self._send.send_nowait(command)
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        return True

    async def run(self) -> None:
        """Serve the lane's inbox until the run ends; then answer whatever it still holds."""
        reason = "the gateway is stopping it"
        try:
            async with trio.open_nursery() as nursery:
                async for command in self._recv:
                    await self._handle(command, nursery)
        finally:
            fail_queued(self.name, self._recv, reason)
            self._fail_pending(reason)

    async def _handle(self, command: BackendCommand, nursery: trio.Nursery) -> None:
        if isinstance(command, Cancel):
            await self._cancel(command)
        elif isinstance(command, Notify):
            backend = self.backend
            if self._link is not None and passes_roots_change(command, backend.roots, backend.clients):
                await self._write_frames(self._link, [codec.encode(command.notification)])
        elif self.state is LaneState.OPEN and self._link is not None:
            await self._write(self._link, [command])
        elif self.state is LaneState.OPENING and len(self._pending) < LANE_INBOX_SIZE:
            self._pending.append(command)
        elif self.state is LaneState.CLOSED and trio.current_time() >= self._retry_at:
            self.state, self._pending = LaneState.OPENING, [command]
            nursery.start_soon(self._connection)
        else:
            await self._to_modern([command])

    async def _cancel(self, cancel: Cancel) -> None:
        """A cancel reaches the call wherever it is: waiting here, over the lane, or sent by the lane over
        the run's connection after the actor had looked there."""
        self._pending = [call for call in self._pending if call.call_id != cancel.call_id]
        for link in (self._link, self.modern):
            frame = link.cancel_frame(cancel) if link is not None else None
            if frame is not None:
                await self._write_frames(link, [frame])

    async def _to_modern(self, calls: list[Call]) -> None:
        """Calls the lane cannot take go over the run's connection, through the bridge."""
        await self._send_modern([self.modern.frame_for(call) for call in calls])

    async def _write(self, link: BackendLink, calls: list[Call]) -> None:
        self._last_call_at = trio.current_time()
        await self._write_frames(link, [link.frame_for(call) for call in calls])

    @staticmethod
    async def _write_frames(link: BackendLink, frames: list[bytes]) -> None:
        """Write to a link without waiting for the end of its run when it breaks (as send_frames does):
        the lane goes on, and the connection's end answers the calls it had."""
        try:
            await link.transport.send_many(frames)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            link.lose(BackendExitedError(f"connection lost while writing: {exc or type(exc).__name__}"))
        else:
            link.meter.bytes_out += sum(map(len, frames))

    async def _connection(self) -> None:
        """Open the lane, initialize it, serve it until it ends; then settle what it held. Every outcome is
        settled here, synchronously with the state, so that no call slips in between."""
        logger.info("opening a legacy lane for its legacy clients' calls")
        async with trio.open_nursery() as connection:  # a WebSocket's reader task lives here
            leftover = await self._serve_connection(connection)
            connection.cancel_scope.cancel()
        await self._send_modern(leftover)

    async def _serve_connection(self, connection: trio.Nursery) -> list[bytes]:
        """The lane's connection from its opening to its end; the frames of the calls that waited for it
        when it did not open."""
        try:
            transport = await open_transport(self.backend, connection)
        except BackendStartError as exc:
            return self._closed(None, exc)
        link = link_over(self.backend, transport, self._on_notification)
        refusal: BackendError | None = None
        idle = False  # closed for idleness: its state is settled already, and a new lane may be opening
        opened = False
        try:
            with link.cancel_scope:
                async with trio.open_nursery() as tasks:
                    start_link_tasks(link, transport, tasks)
                    try:
                        await self._initialize(link)
                    except BackendError as exc:  # refused, or not answered in time
                        refusal = exc
                        tasks.cancel_scope.cancel()
                    else:
                        opened = True
                        await self._opened(link, tasks)
                        await self._until_idle(link)
                        idle = True
                        tasks.cancel_scope.cancel()
        finally:
            problem = refusal or link.lost
            leftover = [] if idle else self._closed(link, problem, opened=opened)
            budget = self.backend.shutdown.budget_or(Budget.of(self.backend.shutdown_s))  # as the run's
            polite_s = 0.0 if isinstance(problem, BackendHungError) else budget.polite_s
            await transport.stop(close_wait_s=polite_s, term_wait_s=budget.term_s)
        return leftover

    async def _initialize(self, link: BackendLink) -> None:
        """initialize over the lane. LaneRefusedError when the backend answers it with an error or with a
        version the gateway does not speak; BackendStartError when it does not answer in time."""
        with trio.move_on_after(self.backend.startup_timeout_s):
            try:
                init = await initialize(link, self.backend.gateway_name, self.backend.roots)
            except (BackendRequestError, BackendStartError) as exc:
                raise LaneRefusedError(exc.without_stderr) from None
            logger.info("legacy lane initialized (protocol {})", init["protocolVersion"])
            return
        raise BackendStartError(
            f"its legacy lane's initialize got no answer within {self.backend.startup_timeout_s}s"
        )

    async def _until_idle(self, link: BackendLink) -> None:
        """Until the lane has had no call for `lane_idle_s` and holds none: then it is closed here, at once
        (no checkpoint between the look and the close, so no call can be written to it after), as a lane
        that never opened: the next legacy call opens another, without a backoff."""
        idle_s = self.backend.config.lane_idle_s
        while True:
            await trio.sleep_until(self._last_call_at + idle_s)
            now = trio.current_time()
            if link.inflight:
                self._last_call_at = now  # a long call: idle from its answer on, give or take a period
            elif now >= self._last_call_at + idle_s:
                logger.info("closing its legacy lane: no legacy call for {:.0f}s", idle_s)
                self.state, self._link, self._retry_at = LaneState.CLOSED, None, -math.inf
                self.backend.meter.eras = "modern"
                return

    async def _opened(self, link: BackendLink, tasks: trio.Nursery) -> None:
        """Open: the waiting calls go over it, its roots follow the clients as a legacy backend's, it is
        pinged as the run's connection is, and its loss is the run's."""
        self.state, self._link, self.failures = LaneState.OPEN, link, 0
        self._last_call_at = trio.current_time()
        self.backend.meter.eras = "modern+legacy"
        link.on_lost = partial(self._lost, link)
        backend = self.backend
        if backend.roots == "client" and backend.clients is not None:
            tasks.start_soon(follow_clients, link, backend.clients, backend.clients.only())
        if backend.config.health.interval_s > 0:
            tasks.start_soon(watch_health, link, backend.config.health, "ping")
        pending, self._pending = self._pending, []
        await self._write(link, pending)

    def _lost(self, link: BackendLink) -> None:
        """The open lane died or hung: the run ends, as it would for its only process; the lane's calls
        are answered as the run's end reaches the lane (after its tools have left the catalog)."""
        assert link.lost is not None
        what = "hung" if isinstance(link.lost, BackendHungError) else "ended"
        self.modern.lose(
            BackendLaneError(f"its legacy lane ({link.transport.label}) {what}: {link.lost.without_stderr}")
        )

    def _closed(
        self, link: BackendLink | None, problem: BackendError | None, *, opened: bool = False
    ) -> list[bytes]:
        """The lane's connection ended (or never opened): its calls in flight are answered with an error
        naming the backend, its state says what comes next, and the calls that waited for it become the
        run connection's (their frames are returned, to be sent over it). A lane that had opened ends only
        with the run (its own loss ends the run: `_lost`)."""
        self._link = None
        self.backend.meter.eras = "modern"
        if link is not None:
            reason = f"its legacy lane ended: {problem.without_stderr}" if problem else "its run ended"
            link.fail_all(reason)
        if isinstance(problem, LaneRefusedError):
            self._refused(problem)
        elif problem is not None and not opened:
            self._failed(problem)
        else:  # the run is ending
            self.state = LaneState.CLOSED
        pending, self._pending = self._pending, []
        return [self.modern.frame_for(call) for call in pending]

    async def _send_modern(self, frames: list[bytes]) -> None:
        if frames:
            await self.modern.send_frames(frames)

    def _refused(self, exc: LaneRefusedError) -> None:
        logger.info(
            "refused initialize on a legacy lane ({}): legacy clients reach it through the bridge", exc
        )
        self.state = LaneState.REFUSED
        self.era.modern_only = True

    def _failed(self, problem: BackendError) -> None:
        """A lane that could not open: open it again after a backoff, unless it failed LANE_FAILURES_MAX
        times in a row (an opening that succeeds starts the count again)."""
        self.failures += 1
        if self.failures >= LANE_FAILURES_MAX:
            self.state = LaneState.GAVE_UP
            logger.warning(
                "its legacy lane failed {} times ({}); legacy clients reach it through the bridge for "
                "the rest of this run",
                self.failures,
                problem.without_stderr,
            )
            return
        backoff_s = LANE_BACKOFF_S * 2 ** (self.failures - 1)
        self.state, self._retry_at = LaneState.CLOSED, trio.current_time() + backoff_s
        logger.warning(
            "its legacy lane did not open ({}); opened again after {:.1f}s", problem.without_stderr, backoff_s
        )

    def _fail_pending(self, reason: str) -> None:
        error = unavailable(self.name, reason)
        pending, self._pending = self._pending, []
        for call in pending:
            answer(call, Reply(error=error))

    def _on_notification(self, notification: Notification) -> None:
        """The lane's log messages reach the legacy sessions as the backend's; its list changes are the
        run connection's business (the catalog lists from it)."""
        if notification.method != "notifications/message" or self.backend.events is None:
            return
        clean = log_params(notification.params, self.name)
        if clean is not None:
            self.backend.events.publish(BackendEvent(self.name, Notification(notification.method, clean)))
