"""One client session: a reader, a dispatcher and a writer in a nursery of their own.

The session dies whole and alone: a crash in any of its actors cancels the other two and nothing else.
"""

from __future__ import annotations

from typing import Final

import attrs
import trio
from loguru import logger

from actors.catalog import CatalogView
from actors.dispatch import MAILBOX_SIZE, Dispatcher, SessionSettings
from actors.envelopes import Mail
from actors.messages import Message
from actors.reader import Reader
from actors.transports.base import Transport
from actors.watch import Watch
from actors.writer import Writer

INBOX_SIZE: Final = 16  # one client's burst of requests before the reader waits for the dispatcher
OUTBOX_SIZE: Final = 64  # answers queued for a client that reads slowly before their senders wait


@attrs.define(eq=False)
class Session:
    """Owns: its transport (closed when the session ends) and its three actors.
    Stops when: the client's stream ends (in-flight requests get `drain_s` to finish), the client is gone,
        or `stop()` is called (in-flight requests are answered with an error at once)."""

    id: str
    transport: Transport
    catalog: Watch[CatalogView]
    settings: SessionSettings
    subject: str | None = None  # the bearer token's subject, when the frontend checks tokens
    done: trio.Event = attrs.field(factory=trio.Event)
    _reader_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    _dispatcher: Dispatcher | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with logger.contextualize(session=self.id):
            inbox_send, inbox_recv = trio.open_memory_channel[Message](INBOX_SIZE)
            outbox_send, outbox_recv = trio.open_memory_channel[Message](OUTBOX_SIZE)
            try:
                async with trio.open_nursery() as nursery:
                    await nursery.start(Writer(self.transport, outbox_recv, nursery.cancel_scope.cancel).run)
                    asks_to, asks = trio.open_memory_channel[Mail](MAILBOX_SIZE)
                    dispatcher = Dispatcher(
                        self.id,
                        inbox_recv,
                        outbox_send.clone(),
                        self.catalog,
                        self.settings,
                        asks,
                        asks_to,
                        self.subject,
                    )
                    self._dispatcher = dispatcher
                    await nursery.start(dispatcher.run)
                    nursery.start_soon(self._read, Reader(self.transport, inbox_send, outbox_send))
                    task_status.started()
            finally:
                self.done.set()
                with trio.CancelScope(shield=True), trio.move_on_after(1.0):
                    await self.transport.aclose()
            logger.info("session ended")

    async def run_temporary(self) -> None:
        """run(), as a temporary child: a crash ends this session alone, logged, and is never restarted."""
        try:
            await self.run()
        except Exception:
            with logger.contextualize(session=self.id):
                logger.opt(exception=True).error("session crashed")

    async def _read(self, reader: Reader) -> None:
        with self._reader_scope:
            await reader.run()

    def stop(self) -> None:
        """Stop reading, answer everything in flight with an error, flush, end."""
        self._reader_scope.cancel()
        if self._dispatcher is not None:
            self._dispatcher.halt()
