"""The transport interface: a byte stream turned into whole message frames and back.

Sessions and backend actors are written against `Transport` only, so a new transport (WebSocket, Streamable
HTTP) adds a module here and no branch in any actor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import trio


class Transport(Protocol):
    async def receive(self) -> bytes | None:
        """The next frame (one JSON-RPC message), or None at the end of the stream.

        Raises MessageTooLargeError for a frame over the limit; the transport has skipped it and can go on."""
        ...

    async def send(self, frame: bytes) -> None:
        """Send one frame. Safe to call from several tasks; frames never interleave.
        Raises trio.BrokenResourceError or trio.ClosedResourceError when the peer is gone."""
        ...

    async def send_many(self, frames: Sequence[bytes]) -> None:
        """Send frames in order, in as few writes as the transport allows (one, for newline framing).
        Otherwise as `send`."""
        ...

    def send_nowait(self, frames: Sequence[bytes]) -> bool:
        """Send the frames now, whole, without waiting, if the transport can (a pipe with room and no other
        send under way), or hold them for one write with the rest of a burst (framing/burst.py), ahead of
        anything sent later; False when nothing was sent or held. Never raises: a peer that is gone is for
        `send_many` to find out."""
        ...

    async def aclose(self) -> None: ...


class UnreadLedger(Protocol):
    """Where a session counts the bytes waiting for its client (session/inflight.py's Answers)."""

    def hold(self, size: int) -> None:
        """`size` more bytes wait for the client (checked against the budget at the writer's next batch)."""
        ...

    def written(self, size: int) -> None:
        """`size` of the bytes counted are written to the client (or dropped for good)."""
        ...


@runtime_checkable
class HoldsFrames(Protocol):
    """A transport that keeps frames after `send_many` returns, until its client takes them (Streamable
    HTTP's response streams): they count in the session's ledger meanwhile, and a client dropped for not
    reading loses them all at once."""

    def count_unread_in(self, ledger: UnreadLedger) -> None:
        """Count the bytes kept from now on (and those kept so far) in `ledger`."""
        ...

    def drop_client(self) -> None:
        """The client has left too much unread: everything kept for it goes, and every write to it is cut."""
        ...


class BackendTransport(Transport, Protocol):
    """What a backend actor needs of its connection beyond frames. A stdio process and a WebSocket
    connection both provide it, so the backend actor has no branch per kind."""

    ended: trio.Event  # set once the peer is gone and the explanation of its end is complete

    @property
    def label(self) -> str:
        """What the log calls it: a process id, a URL."""
        ...

    @property
    def ended_cleanly(self) -> bool:
        """A normal end (a process that exited 0); never true for a lost connection."""
        ...

    async def drain(self) -> None:
        """Runs beside the frames for the whole connection: a process's stderr, for one."""
        ...

    async def stop(self, *, close_wait_s: float, term_wait_s: float) -> None:
        """End the connection for good; shielded, bounded by the two waits."""
        ...

    def describe_end(self) -> str: ...


async def receive_or_end(inbound: trio.MemoryReceiveChannel[bytes]) -> bytes | None:
    """The next frame a transport's own tasks queued for the actor, or None once that queue has ended."""
    try:
        return await inbound.receive()
    except (trio.EndOfChannel, trio.ClosedResourceError):
        return None
