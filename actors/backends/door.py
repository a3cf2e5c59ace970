"""A session's call written to an idle backend in the session's own task: one task step fewer per call.

The backend actor writes every call it takes from its inbox. When it is waiting on an empty inbox, a call
put there would only wake it to write that one frame, so the caller may do the same work itself, at once:
give the call to the link's in-flight table and write its frame, whole, to the backend's pipe (or have the
pipe hold it for one write with the rest of the burst: framing/burst.py). It is the
actor's own work done in the caller's task, exactly when the actor would have done it next and nothing else,
so the order of what reaches the backend and every answer stay as they were. Anything else (a busy actor,
queued commands, a frame too big for one atomic write, a pipe that is full, a WebSocket or HTTP backend)
goes through the inbox as before.
"""

from __future__ import annotations

import attrs
import trio

from actors.backends.connection import BackendLink, request_frame
from actors.backends.lane import LegacyLane
from actors.backends.listen import LISTEN_FILTER_METHODS
from actors.protocol.envelopes import BackendCommand, Call
from actors.runtime.channels import receiver_idle


@attrs.define(eq=False)
class BackendDoor:
    """Owns: nothing; one run's link and the run's inbox, to see whether the actor is idle.
    Receives: calls from sessions (`call_now`), in their tasks.
    Sends: each call's frame to the backend, and the call to the link's in-flight table.
    Stops when: the run ends: its actor no longer waits on the inbox, so every call goes through the inbox,
        which answers it as the run's end does.
    Errors: none; False sends the caller the usual way."""

    link: BackendLink
    inbox: trio.MemoryReceiveChannel[BackendCommand]
    lane: LegacyLane | None = None  # a legacy client's call for the lane is the actor's to route

    def call_now(self, call: Call) -> bool:
        """Write the call now, if the backend actor is waiting on an empty inbox and the frame goes out whole
        without waiting; False when nothing was done."""
        if not receiver_idle(self.inbox) or self.link.lost is not None:
            return False
        if self.lane is not None and self.lane.wants(call):
            return False
        if self.link.envelope is not None and call.method in LISTEN_FILTER_METHODS:
            return False  # a modern backend's listen filter changes instead: the actor's work
        frame = request_frame(call, self.link.envelope)
        if not self.link.transport.send_nowait((frame,)):
            return False
        self.link.meter.bytes_out += len(frame)
        self.link.track(call)  # before the answer can be read: this task does not yield in between
        return True
