"""Newline-delimited framing (MCP stdio): one JSON-RPC message per line, over any trio byte stream."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import trio

from actors.framing.pipes import PipeStream
from actors.protocol.codec import find_request_id
from actors.protocol.errors import MessageTooLargeError

READ_SIZE: Final = 65536  # one pipe buffer per read
ENDS_KEPT: Final = 1024  # bytes kept from each end of a skipped line, to find its id


class LineStream:
    """A Transport over a receive stream and a send stream. Empty lines are skipped; a trailing '\\r' is
    dropped; a line over `max_bytes` is skipped up to its newline without being held in memory, and reported
    once, with its id when one can be read from its first or last bytes."""

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

    def _whole(self, data: bytes) -> bytes | None:
        """A read that is exactly one line (its newline last): the line, as `_take` would give it."""
        if len(data) - 1 > self._max_bytes:
            self._buffer += data
            return self._take(len(data) - 1)  # raises MessageTooLargeError, with its id when it can
        line = data[:-1].rstrip(b"\r")
        return line if line and not line.isspace() else None

    def _take(self, newline: int) -> bytes | None:
        line = bytes(self._buffer[:newline])
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
        """Several messages in one write: a line each."""
        data = b"\n".join(frames) + b"\n"
        try:  # uncontended, which is nearly always: no extra trip through the scheduler for the lock
            self._send_lock.acquire_nowait()
        except trio.WouldBlock:
            await self._send_lock.acquire()
        try:
            await self._send_stream.send_all(data)
        finally:
            self._send_lock.release()

    def send_nowait(self, frames: Sequence[bytes]) -> bool:
        """Write the frames now, whole, if the stream can without waiting (a pipe with room, no other write
        under way); False when nothing was written."""
        if self._send_lock.locked() or not isinstance(self._send_stream, PipeStream):
            return False
        return self._send_stream.send_whole_nowait(b"\n".join(frames) + b"\n")

    async def aclose(self) -> None:
        await self._send_stream.aclose()
        await self._receive_stream.aclose()
