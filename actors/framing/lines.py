"""Newline-delimited framing (MCP stdio): one JSON-RPC message per line, over any trio byte stream."""

from __future__ import annotations

import select
from collections.abc import Sequence
from typing import Final

import trio
from loguru import logger

from actors.framing.burst import BURST, install_step_end
from actors.framing.pipes import PipeStream
from actors.protocol.codec import find_request_id
from actors.protocol.errors import MessageTooLargeError

READ_SIZE: Final = 65536  # one pipe buffer per read
PIPE_BUF: Final = select.PIPE_BUF  # the most a cork holds: one atomic write
ENDS_KEPT: Final = 1024  # bytes kept from each end of a skipped line, to find its id
BIG_LINE: Final = 1 << 16  # from this size a line is taken in one copy (a view), smaller ones in two


class LineStream:
    """A Transport over a receive stream and a send stream. Empty lines are skipped; a trailing '\\r' is
    dropped; a line over `max_bytes` is skipped up to its newline without being held in memory, and reported
    once, with its id when one can be read from its first or last bytes.

    Writes: once `cork_with` gave it a spare nursery, frames sent with `send_nowait` to a pipe while a burst
    is open are held (at most PIPE_BUF bytes) and written in one write when the burst closes (burst.py)."""

    def __init__(self, receive: trio.abc.ReceiveStream, send: trio.abc.SendStream, max_bytes: int) -> None:
        self._receive_stream = receive
        self._send_stream = send
        self._max_bytes = max_bytes
        self._buffer = bytearray()
        self._scanned = 0  # bytes of _buffer known to hold no newline
        self._skipping = 0  # >0 while discarding an oversized line: bytes discarded so far
        self._head = b""  # the first and last bytes of the line being discarded
        self._tail = b""
        self._send_lock = trio.StrictFIFOLock()
        self._pipe_out = send if isinstance(send, PipeStream) else None  # what send_nowait can write to
        self._spare: trio.Nursery | None = None  # where a stuck cork is written; None: it never corks
        self._cork: list[bytes] = []  # frames accepted by send_nowait, not yet written, in order
        self._cork_bytes = 0
        self._stuck = False  # the cork could not be written whole: a task in _spare writes it
        self._listed = False  # in the open burst's list of streams to flush

    def cork_with(self, nursery: trio.Nursery) -> None:
        """Hold the frames of a burst for one write; a cork the pipe cannot take whole is written by a task
        in `nursery` (the one that owns the peer's other tasks: it ends with them)."""
        install_step_end()  # a burst never outlives the task step that opened it
        self._spare = nursery

    async def receive(self) -> bytes | None:
        while True:
            newline = self._buffer.find(b"\n", self._scanned)
            if newline >= 0:
                line = self._take(newline)
                if line is not None:
                    return line
                continue
            self._scanned = len(self._buffer)
            if len(self._buffer) > self._max_bytes:
                if not self._skipping:
                    self._head, self._tail = bytes(self._buffer[:ENDS_KEPT]), b""
                self._tail = (self._tail + self._buffer[-ENDS_KEPT:])[-ENDS_KEPT:]
                self._skipping += len(self._buffer)
                self._buffer.clear()
                self._scanned = 0
            if BURST.is_open:
                BURST.close()  # this task is about to wait: what the burst held goes out first
            data = await self._receive_stream.receive_some(READ_SIZE)
            if not data:
                return self._take_rest()
            alone = not self._buffer and not self._skipping and type(data) is bytes
            if alone and data.find(b"\n") == len(data) - 1:
                line = self._whole(data)  # one whole line, read alone: the common case, without the buffer
                if line is not None:
                    return line
                continue
            self._buffer += data
            BURST.is_open = True  # the lines of this read: what they send is written when it is all read

    def _whole(self, data: bytes) -> bytes | None:
        """A read that is exactly one line (its newline last): the line, as `_take` would give it."""
        if len(data) - 1 > self._max_bytes:
            self._buffer += data
            return self._take(len(data) - 1)  # raises MessageTooLargeError, with its id when it can
        line = data[:-1].rstrip(b"\r")
        return line if line and not line.isspace() else None

    def _take(self, newline: int) -> bytes | None:
        if newline < BIG_LINE:
            line = bytes(self._buffer[:newline])  # two copies of a small line: cheaper than a view's setup
        else:
            with memoryview(self._buffer) as view:  # one copy of a big line (a slice would be two)
                line = bytes(view[:newline])
        if len(self._buffer) == newline + 1:
            self._buffer = bytearray()  # all of it taken: a big line's buffer is freed, not kept for the next
        else:
            del self._buffer[: newline + 1]
        self._scanned = 0
        if self._skipping:
            size, self._skipping = self._skipping + len(line), 0
            tail = (self._tail + line)[-ENDS_KEPT:]
            raise MessageTooLargeError(size, self._max_bytes, find_request_id(self._head, tail))
        if len(line) > self._max_bytes:
            request_id = find_request_id(line[:ENDS_KEPT], line[-ENDS_KEPT:])
            raise MessageTooLargeError(len(line), self._max_bytes, request_id)
        line = line.rstrip(b"\r")
        return line if line and not line.isspace() else None  # isspace: what strip() drops, without a copy

    def _take_rest(self) -> bytes | None:
        """At end of stream: a last line without a newline still counts."""
        if self._skipping or not self._buffer.strip():
            self._buffer.clear()
            self._skipping = 0
            return None
        self._buffer += b"\n"
        return self._take(len(self._buffer) - 1)

    async def send(self, frame: bytes) -> None:
        await self.send_many((frame,))

    async def send_many(self, frames: Sequence[bytes]) -> None:
        """Several messages in one write: a line each, after whatever the cork holds."""
        data = b"\n".join(frames) + b"\n" if frames else b""
        try:  # uncontended, which is nearly always: no extra trip through the scheduler for the lock
            self._send_lock.acquire_nowait()
        except trio.WouldBlock:
            await self._send_lock.acquire()
        try:
            if self._cork:  # held earlier: ahead of these
                data = b"".join(self._cork) + data
                self._cork.clear()
                self._cork_bytes, self._stuck = 0, False
            if data:
                await self._send_stream.send_all(data)
        finally:
            self._send_lock.release()

    def send_nowait(self, frames: Sequence[bytes]) -> bool:
        """Write the frames now, whole, if the stream can without waiting (a pipe with room, no other write
        under way), or hold them for the burst's one write; False when nothing was written or held."""
        pipe = self._pipe_out
        if pipe is None or self._send_lock.locked():
            return False
        data = b"\n".join(frames) + b"\n"
        if self._cork:
            if self._stuck or not BURST.is_open:
                return False  # behind a cork that waits for room: the caller's slow path keeps the order
        elif not BURST.is_open or self._spare is None:
            return pipe.send_whole_nowait(data)  # no burst: at once, as always
        size = len(data)
        if size > PIPE_BUF:
            return False  # too big for one atomic write (nor is anything held: see above)
        if self._cork_bytes + size > PIPE_BUF and not self._write_cork():
            return False  # what it held is stuck: this goes the slow way, behind it
        if not self._listed:
            self._listed = True
            BURST.corked.append(self)
        self._cork.append(data)
        self._cork_bytes += size
        return True

    def flush_cork(self) -> None:
        """The burst closed: what the cork holds goes out now (burst.py)."""
        self._listed = False
        if self._cork and not self._stuck:
            self._write_cork()

    def _write_cork(self) -> bool:
        """Write the cork whole now; else it is stuck, and a task writes it once the pipe has room."""
        cork = self._cork
        data = cork[0] if len(cork) == 1 else b"".join(cork)
        assert self._pipe_out is not None
        if self._pipe_out.send_whole_nowait(data):
            cork.clear()
            self._cork_bytes = 0
            return True
        self._stuck = True
        try:
            self._spare.start_soon(self._write_stuck)  # type: ignore[union-attr]  # set: it corked
        except RuntimeError:  # that nursery has ended: so has the peer's connection
            logger.debug("a cork of {} frames is dropped: its connection has ended", len(cork))
        return False

    async def _write_stuck(self) -> None:
        try:
            await self.send_many(())  # waits for room; whoever writes next writes the cork first anyway
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            logger.debug("the peer is gone: a cork could not be written")  # its reader finds out too

    async def aclose(self) -> None:
        await self._send_stream.aclose()
        await self._receive_stream.aclose()
