"""A session's requests in flight, and the reply-to a backend answers them on.

The OTP reply-to shape: the dispatcher forwards a call and goes on. The call's `reply_to` is the request's
`InFlight` entry; the backend's connection fills it (with the backend's answer, its sweep's timeout error,
or an error when the backend dies), and the entry puts the client's answer straight into the session's
outbox through `Answers`, which never blocks the backend: an answer that finds the outbox full waits in a
queue of its own that the writer drains, and the dispatcher reads no new request until that queue is empty.
A request that needs a task (middleware around a call, batches, handlers that wait) keeps its entry in the
same table, with a cancel scope, and answers through the task.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import trio
from loguru import logger

from actors.catalog import BackendStatus
from actors.protocol import codec
from actors.protocol.envelopes import Reply
from actors.protocol.messages import Batch, Encoded, ErrorResponse, Message, RequestId, Response, RpcError
from actors.protocol.modern_results import legacy_result

if TYPE_CHECKING:
    from actors.session.bridge import BridgedCall
    from actors.session.budget import ByteBudget
    from actors.session.forward import Forward
    from actors.session.modern import ModernCall
    from actors.telemetry.tracing import ServerSpan

Rewrite = Callable[[dict[str, Any]], dict[str, Any]]


@attrs.define(eq=False)
class Answers:
    """Owns: answers that found the outbox full (`overflow`), in order, until the writer takes them, and
        the count of the bytes of every answer queued here until the writer has written it (`unread`).
    Receives: answers from entries, filled by backends' connections (`deliver`, never blocks).
    Sends: each answer to the client at once when the writer is idle (Writer.write_now), else, written as
        its frame (Encoded: a decoded result costs 1 to 24 times its JSON), to the outbox, or to the
        overflow the writer drains after the outbox.
    Stops when: the session ends; answers delivered after the outbox closed are dropped.
    Errors: the overflow holds at most the session's max_inflight answers (the dispatcher takes no request
        while it is not empty), and the answers waiting for a client that does not read them at most
        `budget.max_unread_bytes`: past it `on_unread` is told, once, and the session ends."""

    outbox: trio.MemorySendChannel[Message | Encoded]
    overflow: deque[Message | Encoded] = attrs.field(factory=deque)
    write_now: Callable[[Message], bool] | None = None  # the writer's, while it runs
    budget: ByteBudget | None = None  # its max_unread_bytes caps `unread`
    on_unread: Callable[[int], None] | None = None  # told the bytes unread when they pass the cap
    unread: int = 0  # bytes of the Encoded answers queued for the writer, not yet written by it
    _drained: trio.Event | None = None
    _over: bool = False

    def deliver(self, message: Message) -> None:
        if not self.overflow and self.write_now is not None and self.write_now(message):
            return  # the writer was idle: written in this task, as it would have been next
        try:
            queued = Encoded(codec.encode_kept(message))  # waits as the bytes it will be written as
        except TypeError:  # a notification no frame can hold (an answer always can): dropped here, so
            logger.debug("dropped an unwritable {}", type(message).__name__)  # its deliverer never fails
            return
        self.unread += len(queued.frame)
        if not self.overflow:
            try:
                self.outbox.send_nowait(queued)
                self._check_unread()
                return
            except trio.WouldBlock:
                pass
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.unread -= len(queued.frame)
                return  # the session is over: its client reads nothing any more
        self.overflow.append(queued)
        self._check_unread()

    def written(self, size: int) -> None:
        """The writer's: `size` bytes of the answers queued here are out (counted until then, while the
        writer holds them too: a client that reads nothing keeps the writer's batch in its hands); a
        transport's (HoldsFrames): `size` bytes it held are written to the client. Checked after each batch:
        what a transport took from that batch counts from then on."""
        self.unread -= size
        self._check_unread()

    def hold(self, size: int) -> None:
        """A transport's (HoldsFrames): `size` bytes the writer handed it are kept until the client takes them
        (an HTTP response stream nobody reads yet), counted as unread until it says `written`."""
        self.unread += size

    def _check_unread(self) -> None:
        budget = self.budget
        if budget is not None and self.unread > budget.max_unread_bytes and not self._over:
            self._over = True
            if self.on_unread is not None:
                self.on_unread(self.unread)

    def take_overflow(self) -> list[Message | Encoded]:
        """The writer's: everything queued beside the outbox, now."""
        taken = list(self.overflow)
        self.overflow.clear()
        if self._drained is not None:
            self._drained.set()
            self._drained = None
        return taken

    async def wait_drained(self) -> None:
        while self.overflow:
            if self._drained is None:
                self._drained = trio.Event()
            await self._drained.wait()


@attrs.define(eq=False, slots=True, kw_only=True)
class InFlight:
    """One accepted request not yet answered: what max_inflight counts, what a client's cancel finds by id,
    and what a crash still owes. As the reply-to of a forwarded call, `fill` answers it."""

    request_id: RequestId
    table: InFlightTable
    batch: int = 0  # the batch it came in (0: alone); after a crash a batch is answered in one array
    scope: trio.CancelScope | None = None  # while a task serves it (or waits for room at a backend)
    silent: bool = False  # cancelled by the client: the spec says send nothing
    forwarded: tuple[BackendStatus, int] | None = None  # in a backend's table: the backend and the call id
    rewrite: Rewrite | None = None  # applied to a successful result before the client sees it
    modern: ModernCall | None = None  # a request of the 2026-07-28 era: its answer is encoded for that era
    forward: Forward | None = None  # what was forwarded: a modern backend's input_required calls it again
    bridge: BridgedCall | None = None  # the bridged call it is a request of: stopping it ends that call
    charged: int = 0  # its raw bytes, counted against its client's budget until it leaves the table
    done: bool = False
    release: Callable[[], None] | None = None  # its slot under the caller's [limits], freed when it ends
    span: ServerSpan | None = None  # its SERVER span when tracing is on, ended with its answer
    on_error: Callable[[RpcError], RpcError] | None = None  # a backend's error, changed (call_tool's)

    def answered(self, message: Message | None, reason: str = "") -> None:
        """Its trace span ends with the client's answer (None: unanswered, for `reason`)."""
        span, self.span = self.span, None
        if span is not None:
            span.end(message, reason)

    def fill(self, reply: Reply) -> None:
        """The call's one answer, from the backend's connection: into the outbox under the client's id."""
        if self.done:
            return  # answered already: by a timeout, a cancel, or the session's end
        if (
            self.modern is None
            and reply.error is None
            and _needs_input(reply.result)
            and self.table.on_input is not None
            and self.forward is not None
        ):
            self.table.on_input(self, reply.result)  # type: ignore[arg-type]  # a legacy client's rounds
            return
        span, self.span = self.span, None
        self.table.remove(self)
        if self.silent:
            if span is not None:
                span.end(None, "cancelled by the client")
            return
        if reply.error is not None:
            error = reply.error if self.on_error is None else self.on_error(reply.error)
            error = error if self.modern is None else self.modern.error(error)
            message: Message = ErrorResponse(self.request_id, error)
        else:
            result = reply.result
            if self.rewrite is not None and isinstance(result, dict):
                result = self.rewrite(result)
            result = self.modern.result(result) if self.modern is not None else legacy_result(result)
            # the backend's bytes, under the client's id, when the result is still what they say
            message = Response(self.request_id, result, reply.raw if result is reply.result else None)
        if span is not None:
            span.end(message)
        self.table.answers.deliver(message)


@attrs.define(eq=False)
class InFlightTable:
    """Owns: the session's accepted requests not yet answered into the outbox, by the client's id."""

    answers: Answers
    entries: dict[RequestId, InFlight] = attrs.field(factory=dict)
    on_input: Callable[[InFlight, dict[str, Any]], None] | None = None  # runs a legacy client's rounds
    budget: ByteBudget | None = None  # the gateway's ledger: each entry's bytes count for `client`
    client: str = ""
    _emptied: trio.Event | None = None

    def __contains__(self, request_id: RequestId) -> bool:
        return request_id in self.entries

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, request_id: RequestId) -> InFlight | None:
        return self.entries.get(request_id)

    def accept(self, request_id: RequestId, batch: int = 0, size: int = 0) -> InFlight:
        """A request taken in: its `size` bytes are charged to the client until it leaves the table (the
        budget was checked before: Dispatcher._refused)."""
        entry = self.entries[request_id] = InFlight(request_id=request_id, table=self, batch=batch)
        if self.budget is not None and size:
            self.budget.keep(self.client, size)
            entry.charged = size
        return entry

    def remove(self, entry: InFlight) -> None:
        if entry.span is not None:
            entry.answered(None, "cancelled by the client" if entry.silent else "ended unanswered")
        entry.done = True
        entry.forwarded = None
        self._release(entry)
        if self.entries.get(entry.request_id) is entry:
            del self.entries[entry.request_id]
            if not self.entries and self._emptied is not None:
                self._emptied.set()
                self._emptied = None

    def _release(self, entry: InFlight) -> None:
        """What the entry holds is freed once: its bytes in the client's budget and its [limits] slot."""
        if entry.charged and self.budget is not None:
            self.budget.release(self.client, entry.charged)
        entry.charged = 0
        if entry.release is not None:
            entry.release()
            entry.release = None

    def release_all(self) -> None:
        """The session is over: whatever its entries still hold (bytes, [limits] slots) is freed."""
        for entry in self.entries.values():
            self._release(entry)

    async def wait_empty(self) -> None:
        while self.entries:
            if self._emptied is None:
                self._emptied = trio.Event()
            await self._emptied.wait()

    def owed_answers(self, error: RpcError) -> list[Message]:
        """An error for each request accepted and not yet answered into the outbox (the requests of a batch in
        one array): what a session that crashed still owes its client."""
        alone: list[Message] = []
        batches: dict[int, list[ErrorResponse]] = {}
        for entry in self.entries.values():
            if entry.silent:
                continue
            answer = ErrorResponse(entry.request_id, error)
            if entry.batch:
                batches.setdefault(entry.batch, []).append(answer)
            else:
                alone.append(answer)
        return alone + [Batch(tuple(items)) for items in batches.values()]


def _needs_input(result: object) -> bool:
    """A modern backend's input_required (shim.py lives its rounds out with a legacy client)."""
    return type(result) is dict and result.get("resultType") == "input_required"
