"""The writer actor: the owner of the client's side of the transport.

Every frame for the client goes through it, in order. When it waits on an empty outbox, a sender may write
one frame for it in the sender's own task (`write_now`), whole or not at all, which is what the writer would
have done next; anything that would wait goes through the outbox."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import attrs
import trio
from loguru import logger

from actors.framing.transport import Transport
from actors.protocol import codec
from actors.protocol.messages import Encoded, Message
from actors.runtime.channels import receiver_idle
from actors.session.inflight import Answers
from actors.telemetry.meters import Traffic

BATCH_MAX: Final = 64  # messages written together when the outbox has that many ready


@attrs.define(kw_only=True)
class Writer:
    """Owns: the outbox receive end; closes it when it stops.
    Receives: messages on the outbox, in order, and after them the answers that found it full (`answers`).
    Sends: each as one frame to the client; `write_now` writes one in the caller's task while it is idle.
    Stops when: every outbox sender has closed (all queued messages written), or the client is gone; then it
        calls `on_peer_gone` so the session ends instead of queueing answers nobody reads.
    Errors: none of its own.
    """

    transport: Transport
    outbox: trio.MemoryReceiveChannel[Message | Encoded]
    on_peer_gone: Callable[[], None]
    answers: Answers | None = None
    traffic: Traffic = attrs.field(factory=Traffic)  # its frontend's: bytes written count there

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        if self.answers is not None:
            self.answers.write_now = self.write_now
        try:
            await self._write(task_status)
        finally:
            if self.answers is not None:
                self.answers.write_now = None

    def write_now(self, message: Message) -> bool:
        """Write one message in the caller's task, if the writer waits on an empty outbox (so nothing queued
        is overtaken) and the transport takes the frame whole without waiting (or holds it for the burst's
        one write: framing/burst.py); False when nothing was written.
        What the writer would have done next, one task step sooner."""
        if not receiver_idle(self.outbox):
            return False
        frame = codec.encode(message)
        if not self.transport.send_nowait((frame,)):
            return False
        self.traffic.bytes_out += len(frame)
        return True

    async def _write(self, task_status: trio.TaskStatus[None]) -> None:
        with self.outbox:
            task_status.started()
            async for message in self.outbox:
                batch = [message]
                while len(batch) < BATCH_MAX:  # what else is ready goes in the same write
                    try:
                        batch.append(self.outbox.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                if self.answers is not None and self.answers.overflow:
                    batch += self.answers.take_overflow()
                frames = [_frame(each) for each in batch]
                queued = sum(len(each.frame) for each in batch if type(each) is Encoded)  # counted by Answers
                del batch
                self.traffic.bytes_out += sum(map(len, frames))
                try:
                    await self.transport.send_many(frames)
                    frames.clear()  # not kept alive while the writer waits: an idle session holds no frames
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    logger.info("client is gone; closing the session")
                    self.on_peer_gone()
                    return
                if self.answers is not None:
                    self.answers.written(queued)  # and checked: a transport may hold what it took


def _frame(message: Message | Encoded) -> bytes:
    return message.frame if type(message) is Encoded else codec.encode(message)  # type: ignore[arg-type]
