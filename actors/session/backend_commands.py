"""A session's commands for backends whose inbox is full, queued so that nothing overtakes a cancel."""

from __future__ import annotations

from collections import deque

import attrs
import trio

from actors.protocol.envelopes import BackendCommand, Call, Cancel, Notify
from actors.runtime.channels import put

Calls = trio.MemorySendChannel[BackendCommand]


@attrs.define(eq=False)
class _Backlog:
    commands: deque[Cancel | Notify] = attrs.field(factory=deque)
    notify_queued: bool = False
    drained: trio.Event = attrs.field(factory=trio.Event)


@attrs.define
class BackendCommands:
    """Owns: one session's Cancels and Notifies that found a backend's inbox full, queued per backend.

    A command goes at once when there is room, so a cancel reaches the backend before later calls. Else it
    waits in its backend's queue, sent in order by one task, and the session's next calls to that backend
    wait behind it: they never overtake a cancel, and the queue stays bounded (a Cancel only for a call that
    reached the backend, one per call, and a session has at most max_inflight of them; roots list_changed
    Notifies coalesced to one). Nothing queued is lost: `flush` sends the rest when the session ends."""

    _backlogs: dict[Calls, _Backlog] = attrs.field(factory=dict)

    def send(self, calls: Calls, command: Cancel | Notify, nursery: trio.Nursery | None) -> None:
        """Send now, or queue behind what waits; `nursery` None (the session is ending): `flush` sends it."""
        backlog = self._backlogs.get(calls)
        if backlog is None:
            try:
                calls.send_nowait(command)
                return
            except trio.WouldBlock:
                backlog = self._backlogs[calls] = _Backlog()
                if nursery is not None:
                    nursery.start_soon(self._send_queued, calls, backlog)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return  # that run of the backend is over: it answered its calls and forgot them
        if isinstance(command, Notify):
            if backlog.notify_queued:
                return  # the news is already on its way
            backlog.notify_queued = True
        backlog.commands.append(command)

    def holds(self, calls: Calls) -> bool:
        """Commands wait for this backend's inbox: a call must queue behind them."""
        return calls in self._backlogs

    async def call(self, calls: Calls, call: Call) -> None:
        """Put a call in the backend's inbox, behind the commands queued for it. Errors as `send`."""
        while (backlog := self._backlogs.get(calls)) is not None:
            await backlog.drained.wait()
        await put(calls, call)

    def pending(self) -> int:
        return sum(len(backlog.commands) for backlog in self._backlogs.values())

    async def flush(self) -> None:
        """Send what is still queued; the caller bounds the wait (the session is ending)."""
        for calls, backlog in list(self._backlogs.items()):
            await self._send_queued(calls, backlog)

    async def _send_queued(self, calls: Calls, backlog: _Backlog) -> None:
        try:
            while backlog.commands:
                await calls.send(backlog.commands[0])  # cancelled: it stays queued for `flush`
                if isinstance(backlog.commands.popleft(), Notify):
                    backlog.notify_queued = False
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            backlog.commands.clear()  # the backend's run ended; it has nothing to cancel any more
        if self._backlogs.get(calls) is backlog:
            del self._backlogs[calls]
        backlog.drained.set()
