"""One write per peer for what the lines of one read produce: the burst.

A read of a pipe brings about two messages at a time on the forwarding path (docs/performance.md, issue
#27), and each used to be written to its peer alone: two writes, and two wake-ups of the peer, where one
would do. While a reading task handles the lines of one read (the burst is open), a frame written with
`send_nowait` to a pipe is held in that stream's cork instead; the reading task closes the burst before it
next waits (for more bytes, for room in a channel, on anything), and every stream that holds frames writes
them then, in one write each.

Order is kept by the stream, not by the burst: whatever a stream holds goes out ahead of anything sent to it
later, by any task (`LineStream.send_many` writes the cork first; `send_nowait` joins it only while the
burst is open, and refuses while a cork is stuck). A cork that cannot be written whole when the burst
closes (the pipe is full) is stuck: it is written by a task in the stream's spare nursery as soon as the
pipe has room, still ahead of what comes later; meanwhile `send_nowait` refuses, so its callers take their
usual slow paths (the outbox, the backend's inbox) with their back-pressure.

Trio runs one task at a time, so one burst for the whole run is enough: it is open only between the read
that opened it and the reading task's next wait, and no other task runs in between. That rests on every
reading task closing the burst before each of its waits; so that a wait nobody thought of (a checkpoint
deep in a call, a reader that stops mid-burst) can only cost a write and never hold a frame, a corking
stream also installs `StepEnd` in its run: Trio calls it after every task step, and it closes a burst still
open then. A frame is never held past the task step that sent it.
"""

from __future__ import annotations

from typing import Protocol

import trio


class Corked(Protocol):
    def flush_cork(self) -> None:
        """Write what the stream holds, whole, now; or hand it to its spare nursery."""
        ...


class Burst:
    """Owns: whether a burst is open, and the streams holding frames until it closes."""

    __slots__ = ("corked", "is_open")

    def __init__(self) -> None:
        self.is_open = False
        self.corked: list[Corked] = []

    def close(self) -> None:
        """Before the reading task waits: every stream holding frames writes them, in one write each."""
        self.is_open = False
        if self.corked:
            corked, self.corked = self.corked, []
            for stream in corked:
                stream.flush_cork()


BURST = Burst()


def close_burst() -> None:
    """What a reading task calls before it waits on anything but its next read (and when it stops)."""
    if BURST.is_open:
        BURST.close()


class StepEnd(trio.abc.Instrument):
    """Closes a burst still open when a task step ends (the task yielded without closing it). It never
    raises: Trio would log the error and take the instrument out."""

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if BURST.is_open:
            BURST.close()


_installed_in: list[trio.lowlevel.Task] = []  # the root task of the run that has StepEnd (one run at a time)


def install_step_end() -> None:
    """Make sure this run closes any burst at the end of a task step (once per run; cheap when done)."""
    root = trio.lowlevel.current_root_task()
    if _installed_in and _installed_in[0] is root:
        return
    trio.lowlevel.add_instrument(StepEnd())
    _installed_in[:] = [root]
