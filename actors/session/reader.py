"""The reader actor: frames in from the client, messages out to the dispatcher."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import attrs
import trio
from loguru import logger

from actors.framing.burst import close_burst
from actors.framing.transport import Transport
from actors.protocol import codec
from actors.protocol.errors import INVALID_REQUEST, MessageError, MessageTooLargeError
from actors.protocol.messages import ErrorResponse, Message, RpcError
from actors.runtime.log import RateLimiter
from actors.session.budget import ByteBudget, QueuedBytes
from actors.telemetry.meters import Traffic

REFUSAL_LOG_RATE: Final = 2.0  # warnings per second about refused frames: a client may send floods of them


@attrs.define
class Reader:
    """Owns: the dispatcher's inbox send end and a clone of the outbox; closes both when it stops.
    Receives: frames from the transport.
    Sends: each decoded message to the dispatcher (handled in this task when the dispatcher is idle and
        can take it at once: Dispatcher.take_now); an error response straight to the writer for a frame that
        is not JSON (-32700), not a JSON-RPC message (-32600) or too large (-32600). The session goes on.
    Stops when: the client's stream ends or breaks, or the session cancels it.
    Errors: none of its own.
    """

    transport: Transport
    dispatch: trio.MemorySendChannel[Message]
    outbox: trio.MemorySendChannel[Message]
    take_now: Callable[[Message], bool] | None = None  # the dispatcher's, for a message it takes at once
    quiet: bool = False  # the end of the stream is logged at DEBUG only (a session for one request)
    traffic: Traffic = attrs.field(factory=Traffic)  # its frontend's: bytes read count there
    queued: QueuedBytes = attrs.field(factory=lambda: QueuedBytes(ByteBudget()))  # decoded, not yet taken
    _refusals: RateLimiter = attrs.field(factory=lambda: RateLimiter(REFUSAL_LOG_RATE))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with self.dispatch, self.outbox:
            task_status.started()
            try:
                await self._read()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                logger.debug("stream closed under the reader")
            finally:
                close_burst()  # what the lines read so far sent is written, however the reader stops

    async def _read(self) -> None:
        while True:
            try:
                frame = await self.transport.receive()
            except MessageTooLargeError as exc:
                self._refusals.log("WARNING", "refused a message: {}", exc)
                close_burst()  # before any wait but the next read (framing/burst.py)
                await self.outbox.send(
                    ErrorResponse(exc.request_id, RpcError(INVALID_REQUEST, f"Invalid request: {exc}"))
                )
                continue
            if frame is None:
                logger.log("DEBUG" if self.quiet else "INFO", "client closed its stream")
                return
            size = len(frame)
            self.traffic.bytes_in += size
            queued = self.queued
            if queued.total:  # decoded, a frame costs many times its size: one at a time
                if queued.total + size > queued.budget.max_request_bytes:
                    close_burst()  # it will wait
                await queued.reserve(size)
            else:
                queued.total = size  # nothing waits decoded: room for any frame (reserve without a wait)
            try:
                message = codec.decode(frame)
            except MessageError as exc:
                self.queued.release(size)
                close_burst()
                await self.outbox.send(ErrorResponse(exc.request_id, exc.error))
                continue
            del frame
            if self.take_now is not None and self.take_now(message):
                self.queued.release(size)
            else:
                self.queued.queued(size)
                try:
                    self.dispatch.send_nowait(message)  # as `put` does, closing the burst before a wait
                except trio.WouldBlock:
                    close_burst()
                    await self.dispatch.send(message)
