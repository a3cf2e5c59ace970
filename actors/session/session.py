"""One client session: a reader, a dispatcher and a writer in a nursery of their own.

The session dies whole and alone: a crash in any of its actors cancels the other two and nothing else. Before
its transport closes, a crashed session still writes, best effort and within CRASH_ANSWER_S: the answers that
were queued for its client, and an error for every request it had accepted and not answered.
"""

from __future__ import annotations

import math
import sys
from functools import partial
from typing import TYPE_CHECKING, Final

import attrs
import trio
from loguru import logger

from actors.catalog import CatalogView
from actors.framing.lines import LineStream
from actors.framing.transport import HoldsFrames, Transport
from actors.policy import STDIO_CALLER, Caller
from actors.protocol import codec
from actors.protocol.envelopes import Mail
from actors.protocol.errors import INTERNAL_ERROR
from actors.protocol.messages import Encoded, Message, RpcError
from actors.protocol.on_behalf import OnBehalf
from actors.runtime.watch import Watch
from actors.session.client_asks import PLAIN_ASK_IDS, AskIds
from actors.session.dispatcher import Dispatcher
from actors.session.inflight import Answers
from actors.session.reader import Reader
from actors.session.settings import MAILBOX_SIZE, SESSION_FAILED, SessionSettings
from actors.session.writer import Writer

INBOX_SIZE: Final = 16  # one client's burst of requests before the reader waits for the dispatcher
OUTBOX_SIZE: Final = 64  # answers queued for a client that reads slowly before their senders wait
CRASH_ANSWER_S: Final = 1.0  # how long a crashed session may take to write its last answers

if TYPE_CHECKING:
    from actors.framing.websocket import WebSocketTransport


def websocket_of(transport: Transport) -> WebSocketTransport | None:
    """`transport` when it is a WebSocket's. trio-websocket is imported only where WebSockets are served: a
    transport can be one only once its module is loaded."""
    module = sys.modules.get("actors.framing.websocket")
    return transport if module is not None and isinstance(transport, module.WebSocketTransport) else None


@attrs.define(eq=False, kw_only=True)
class Session:
    """Owns: its transport (closed when the session ends) and its three actors.
    Stops when: the client's stream ends (in-flight requests get `drain_s` to finish), the client is gone,
        or `stop()` is called (in-flight requests are answered with an error at once).
    Errors: a crash of any of its actors ends it; its requests in flight are answered with -32603 first (best
        effort, bounded), then `run` raises and `run_temporary` logs it and sets `crashed`."""

    id: str
    transport: Transport
    catalog: Watch[CatalogView]
    settings: SessionSettings
    subject: str | None = None  # the bearer token's subject, when the frontend checks tokens
    expires_at: float = math.inf  # when its token expires (trio's clock): it then ends as a client's close
    caller: Caller = STDIO_CALLER  # who asks, for [policy] and [limits]
    on_behalf: OnBehalf | None = None  # what its calls carry for backends' credentials (its token...)
    ask_ids: AskIds = PLAIN_ASK_IDS  # the ids its client sees on backends' requests (sealed in a fleet)
    done: trio.Event = attrs.field(factory=trio.Event)
    crashed: bool = False  # set by run_temporary when it caught a crash (the stdio frontend exits non-zero)
    _reader_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    _dispatcher: Dispatcher | None = None
    _answers: Answers | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with logger.contextualize(session=self.id):
            inbox_send, inbox_recv = trio.open_memory_channel[Message](INBOX_SIZE)
            outbox_send, outbox_recv = trio.open_memory_channel[Message | Encoded](OUTBOX_SIZE)
            unwritten = outbox_recv.clone()  # what the writer had not taken when a crash stopped it
            try:
                async with trio.open_nursery() as nursery:
                    if isinstance(self.transport, LineStream):
                        self.transport.cork_with(nursery)  # the answers of one burst in one write
                    answers = self._answers = Answers(
                        outbox_send.clone(),
                        budget=self.settings.budget,
                        on_unread=partial(self._not_reading, nursery),
                    )
                    if isinstance(self.transport, HoldsFrames):
                        self.transport.count_unread_in(answers)  # what it keeps for the client counts
                    writer = Writer(
                        transport=self.transport,
                        outbox=outbox_recv,
                        on_peer_gone=nursery.cancel_scope.cancel,
                        answers=answers,
                        traffic=self.settings.traffic,
                    )
                    await nursery.start(writer.run)
                    asks_to, asks = trio.open_memory_channel[Mail](MAILBOX_SIZE)
                    dispatcher = Dispatcher(
                        session=self.id,
                        inbox=inbox_recv,
                        outbox=answers.outbox,  # the dispatcher closes it when it ends
                        catalog=self.catalog,
                        settings=self.settings,
                        asks=asks,
                        asks_to=asks_to,
                        answers=answers,
                        subject=self.subject,
                        caller=self.caller,
                        on_ready=self._initialized,
                        ask_ids=self.ask_ids,
                        http_context=getattr(self.transport, "http_context", None),
                        on_behalf=self.on_behalf,
                        on_behalf_of=getattr(self.transport, "on_behalf_of", None),
                    )
                    self._dispatcher = dispatcher
                    await nursery.start(dispatcher.run)
                    if self.settings.initialize_within_s is not None:
                        self._reader_scope.deadline = trio.current_time() + self.settings.initialize_within_s
                    nursery.start_soon(
                        self._read,
                        Reader(
                            self.transport,
                            inbox_send,
                            outbox_send,
                            dispatcher.take_now,
                            quiet=self.settings.quiet,
                            traffic=self.settings.traffic,
                            queued=dispatcher.queued,
                        ),
                    )
                    task_status.started()
            except Exception:
                await self._answer_after_crash(unwritten)
                raise
            finally:
                unwritten.close()
                self.done.set()
                with trio.CancelScope(shield=True), trio.move_on_after(1.0):
                    await self.transport.aclose()
            logger.log("DEBUG" if self.settings.quiet else "INFO", "session ended")

    async def run_temporary(self) -> None:
        """run(), as a temporary child: a crash ends this session alone, logged, and is never restarted."""
        try:
            await self.run()
        except Exception:
            self.crashed = True
            with logger.contextualize(session=self.id):
                logger.opt(exception=True).error("session crashed")

    def _not_reading(self, nursery: trio.Nursery, unread: int) -> None:
        """The client has left more answers unread than max_unread_bytes: its session ends, as for a client
        that is gone, rather than hold them without bound."""
        try:
            nursery.start_soon(self._drop_client, nursery.cancel_scope)
        except RuntimeError:  # the session has ended already: an answer came for it late, in a backend's
            return  # task, which must not fail on it
        limit = self.settings.budget.max_unread_bytes
        with logger.contextualize(session=self.id):
            logger.warning(
                "ending the session: its client left {} bytes of answers unread (max_unread_bytes {})",
                unread,
                limit,
            )

    async def _drop_client(self, scope: trio.CancelScope) -> None:
        """A WebSocket's TCP stream is dropped first: the writer is in the middle of a frame the client is
        not taking, and no close frame may follow a cut one (the client would read 1007, not the end)."""
        websocket = websocket_of(self.transport)
        stream = websocket.stream if websocket is not None else None
        if stream is not None:
            await trio.aclose_forcefully(stream)
        if isinstance(self.transport, HoldsFrames):
            self.transport.drop_client()  # an HTTP session's response streams: cut, their frames let go
        scope.cancel()

    async def _answer_after_crash(self, unwritten: trio.MemoryReceiveChannel[Message | Encoded]) -> None:
        """The writer is gone: write to the transport directly what was queued for the client, then an error
        for each request still owed. Shielded and bounded; a transport that cannot take it is let be."""
        messages: list[Message | Encoded] = []
        while True:
            try:
                messages.append(unwritten.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
        if self._answers is not None:
            messages += self._answers.take_overflow()
        if self._dispatcher is not None:
            messages += self._dispatcher.owed_answers(RpcError(INTERNAL_ERROR, SESSION_FAILED))
        frames = []
        for message in messages:
            if type(message) is Encoded:
                frames.append(message.frame)
                continue
            try:
                frames.append(codec.encode(message))  # type: ignore[arg-type]
            except TypeError:  # a request or notification that cannot be written; answers always can
                logger.debug("dropped an unwritable {} after the crash", type(message).__name__)
        if not frames:
            return
        with trio.CancelScope(shield=True), trio.move_on_after(CRASH_ANSWER_S) as timer:
            try:
                await self.transport.send_many(frames)
            except (trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError):
                logger.info("could not tell the client about the crash: its transport is gone")
                return
        if timer.cancelled_caught:
            logger.info("could not tell the client about the crash within {}s", CRASH_ANSWER_S)
        else:
            logger.info("answered {} message(s) queued or owed before closing", len(frames))

    async def _read(self, reader: Reader) -> None:
        """The reader, until the client's stream ends, stop(), the client has not finished initialize
        within initialize_within_s, or its token expires: then the session ends as if the client had
        closed its stream (what it has in flight is still answered)."""
        with trio.move_on_at(self.expires_at) as expiry:
            with self._reader_scope:
                await reader.run()
        if expiry.cancelled_caught:
            logger.info("closing: the client's access token has expired")
            if (websocket := websocket_of(self.transport)) is not None:
                from actors.framing.websocket import CLOSE_POLICY_VIOLATION

                websocket.close_code = CLOSE_POLICY_VIOLATION
                self.transport.close_reason = "the access token has expired"
        elif self._reader_scope.cancelled_caught and trio.current_time() >= self._reader_scope.deadline:
            logger.warning(
                "closing: the client did not finish initialize within {}s", self.settings.initialize_within_s
            )

    def initialize_deadline(self) -> float:
        """When the session ends unless its client has shown it speaks MCP (inf: it has, or no deadline)."""
        return self._reader_scope.deadline

    def _initialized(self) -> None:
        self._reader_scope.deadline = math.inf

    def stop(self) -> None:
        """Stop reading, answer everything in flight with an error, flush, end."""
        self._reader_scope.cancel()
        if self._dispatcher is not None:
            self._dispatcher.halt()
