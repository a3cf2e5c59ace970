"""The dispatch actor: one client session's protocol state machine.

States: NEW (only initialize and ping) -> INITIALIZING (initialize held until the catalog has settled) ->
OPERATING. A request is checked, then answered by its feature's handler (tools, prompts, resources,
completion, logs, lifecycle: one module each). A handler either answers at once or decides to forward; a
forwarded call is put in the backend's inbox and the dispatcher goes on (forward.py): the backend answers
the client through the request's InFlight entry. Only what must wait runs in a task of its own:
initialize, subscriptions, middleware around a call, batches, requests pipelined behind initialize, and a
call held for its user's approval (approvals.py).

A request of the 2026-07-28 era (its `_meta` names its version) stands outside the state machine: it is
checked, decided and encoded by modern.py whatever the state, never pins the connection, and may continue a
call parked on a legacy backend's asks (bridge.py). handlers.py says which handler serves which method.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Final

import attrs
import trio
from loguru import logger

from actors.catalog import CatalogView
from actors.middleware.chain import MiddlewareChain
from actors.policy import STDIO_CALLER, Caller
from actors.protocol.codec import clip, is_id, shown
from actors.protocol.envelopes import Mail
from actors.protocol.eras import is_modern_request
from actors.protocol.errors import METHOD_NOT_FOUND, NOT_INITIALIZED, rpc_error
from actors.protocol.messages import (
    Batch,
    ErrorResponse,
    Message,
    Notification,
    Params,
    Request,
    RequestId,
    Response,
    RpcError,
)
from actors.protocol.on_behalf import OnBehalf
from actors.runtime.channels import put, receiver_idle
from actors.runtime.log import RateLimiter
from actors.runtime.watch import Watch
from actors.session import approvals, lifecycle, listen, mailbox, modern, retries, shim, tools
from actors.session.approvals import AskFirst, SessionKey
from actors.session.batches import receive_batch
from actors.session.budget import QueuedBytes, client_of, request_bytes
from actors.session.client_asks import PLAIN_ASK_IDS, AskIds, ClientAsks
from actors.session.fields import bad_id, duplicate, invalid_field, meta_error, too_many
from actors.session.forward import SHUTTING_DOWN, Forward, Forwarder
from actors.session.handlers import LATER, MODERN_LATER, NOW, Later, Resume
from actors.session.inflight import Answers, InFlight, InFlightTable
from actors.session.notifications import receive_notification
from actors.session.resources import release_subscriptions
from actors.session.results import ResultShaper
from actors.session.settings import MAILBOX_SIZE, SessionSettings, SessionState
from actors.telemetry.tracing_attributes import Peer, peer_attributes

if TYPE_CHECKING:
    from actors.telemetry.tracing import ServerSpan, Tracing

BEFORE_INITIALIZE: Final = frozenset({"initialize", "ping"})
DROP_LOG_RATE: Final = 5.0  # warnings per second about what a session dropped (bad notifications, events)
CANCEL_FLUSH_S: Final = 1.0  # at the session's end, how long queued cancels may wait for room at a backend


@attrs.define(kw_only=True)
class Dispatcher:
    """Owns: the session's protocol state, its in-flight request table, and its outbox send end.
    Receives: messages from the reader on `inbox`.
    Sends: responses and notifications to the writer on `outbox`; Calls and Cancels to backends.
    Stops when: the inbox ends and every request in flight is answered (after `drain_s`, counted from the
        first settle when requests wait for it, or at once when `halt()` is called, the rest are answered
        with an error).
    Errors: none of its own; every request gets exactly one answer unless the client cancelled it. Whatever a
        client sends, a bad field is answered with -32602 naming it (a bad notification is dropped, logged at
        a bounded rate); past `max_inflight` unanswered requests, a request is refused at once. Should the
        session crash all the same, `owed_answers` says what it still owes.
    """

    session: str
    inbox: trio.MemoryReceiveChannel[Message]
    outbox: trio.MemorySendChannel[Message]
    catalog: Watch[CatalogView]
    settings: SessionSettings
    asks: trio.MemoryReceiveChannel[Mail] | None = None  # the mailbox: backends' requests for this client,
    asks_to: trio.MemorySendChannel[Mail] | None = None  # events, catalog changes; the send end is on Calls
    # the way backends answer into the outbox; the writer drains its overflow
    answers: Answers = attrs.field(default=attrs.Factory(lambda self: Answers(self.outbox), takes_self=True))
    subject: str | None = None  # the client's bearer token subject
    caller: Caller = STDIO_CALLER  # who asks, as [policy] and [limits] see it (policy/context.caller_of)
    queued: QueuedBytes = attrs.field(  # the sizes of what waits in `inbox`, shared with the reader
        default=attrs.Factory(lambda self: QueuedBytes(self.settings.budget), takes_self=True)
    )
    on_ready: Callable[[], None] | None = None  # told when the client has finished initialize, or first sent
    ask_ids: AskIds = PLAIN_ASK_IDS  # the ids its client sees on backends' requests
    spoke: bool = False  # a valid modern request (which needs no initialize)
    state: SessionState = SessionState.NEW
    version: str | None = None  # the negotiated protocol version
    subscriptions: dict[tuple[str, str], str] = attrs.field(factory=dict)  # (backend, its URI) -> ours
    log_level: int = 1  # forward backend logs at "info" and above until the client sets its level
    chain: MiddlewareChain | None = None  # made at initialize, when there is middleware
    modern_chains: dict[str | None, MiddlewareChain] = attrs.field(factory=dict)  # by modern clients' names
    listens: dict[RequestId, listen.Listen] = attrs.field(factory=dict)  # open subscriptions/listen requests
    listen_holders: set[str] = attrs.field(factory=set)  # each listen's, from its start: counts and caps
    announced: dict[str, int] = attrs.field(factory=dict)  # list kind -> version the client was told of
    # tools its user approved "for this session" (at most approvals.MAX_SESSION_APPROVALS; gone with it)
    approved_tools: set[SessionKey] = attrs.field(factory=set)
    operating: trio.Event = attrs.field(factory=trio.Event)
    client_ready: trio.Event = attrs.field(factory=trio.Event)
    ready_pending: bool = False  # notifications/initialized came while initialize was held
    inflight: InFlightTable = attrs.field(init=False)
    forwarder: Forwarder = attrs.field(init=False)
    client_asks: ClientAsks = attrs.field(init=False)
    background: trio.Nursery = attrs.field(init=False)
    _batches: int = 0  # batches received so far: each one's number
    _drops: RateLimiter = attrs.field(factory=lambda: RateLimiter(DROP_LOG_RATE))
    _trace_peer: Peer | None = None  # what its SERVER spans say of its client, once tracing asks
    # an HTTP transport's: the traceparent header of the POST that carried a request (its span links to it)
    http_context: Callable[[RequestId], str | None] | None = None
    # what its calls carry for backends' credentials: the connection's, and an HTTP transport's per request
    on_behalf: OnBehalf | None = None
    on_behalf_of: Callable[[RequestId], OnBehalf | None] | None = None

    def __attrs_post_init__(self) -> None:
        if self.asks is None or self.asks_to is None:
            self.asks_to, self.asks = trio.open_memory_channel[Mail](MAILBOX_SIZE)
        self.inflight = InFlightTable(
            self.answers,
            on_input=partial(shim.start_rounds, self),
            budget=self.settings.budget,
            client=client_of(self.subject, self.session),
        )
        self.client_asks = ClientAsks(self.send, tracing=self.settings.tracing, ask_ids=self.ask_ids)
        self.forwarder = Forwarder(
            results=ResultShaper(
                self.settings.output,
                self.catalog,
                self.settings.policy,
                caller=lambda: self.caller,
                route=self.settings.route,
            ),
            session=self.session,
            catalog=self.catalog,
            outbox=self.outbox,
            asks_to=self.asks_to,
            bridges=self.settings.bridges,
            subject=self.subject,
            bound=self.bound,
            tracing=self.settings.tracing,
            on_behalf=self.on_behalf,
            on_behalf_of=self.on_behalf_of,
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        mailbox_in, mailbox_to = self.asks, self.asks_to
        assert mailbox_in is not None and mailbox_to is not None
        try:
            with self.outbox:
                async with trio.open_nursery() as background:
                    self.background = self.forwarder.background = background
                    background.start_soon(mailbox.read, self, mailbox_in, mailbox_to)
                    async with trio.open_nursery() as requests:
                        task_status.started()
                        with self.inbox:
                            async for message in self.inbox:
                                self.queued.taken()
                                await self._receive(message, requests)
                        listen.end_all(self)  # nothing more will be asked: they end now, gracefully
                        background.start_soon(self._halt_after, partial(lifecycle.drain_time, self))
                        await self.inflight.wait_empty()
                    background.cancel_scope.cancel()
        finally:
            self.forwarder.background = None  # closed: what cannot be sent at once waits for the flush
            for entry in self.inflight.entries.values():  # still owed (a crash answers them): the backends
                self.forwarder.abandon(entry, "the client session ended")  # stop working on them
            self.inflight.release_all()
            with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_FLUSH_S):
                await self.forwarder.commands.flush()  # cancels queued for full inboxes are not lost
            release_subscriptions(self)
            if self.settings.clients is not None:
                self.settings.clients.leave(self.session)
            self.client_asks.refuse_queued(mailbox_in, "the client session ended")
            mailbox_in.close()  # backends asking from now on learn the session is gone
            self.client_asks.fail_all("the client session ended before answering")
            self.settings.bridges.session_ended(self.bound)

    async def _receive(self, message: Message, requests: trio.Nursery) -> None:
        match message:
            case Request() if (refused := self._refused(message)) is not None:
                self.trace_refusal(message, refused)
                await self.send(refused)
            case Request(id=request_id, method="ping", params=params) if not is_modern_request(params):
                await self.send(Response(request_id, {}))  # at any time, answered inline (gone in 2026-07-28)
            case Request(id=request_id):
                entry = self.inflight.accept(request_id, size=request_bytes(message))
                self.trace(entry, message)
                await self._accept(message, entry, requests)
            case Notification():
                receive_notification(self, message)
            case Batch():
                await receive_batch(self, message, requests)
            case Response() | ErrorResponse() if self.client_asks.settle(message):
                pass
            case _:
                logger.opt(lazy=True).debug(
                    "ignored a response to nothing the gateway asked: {}", partial(shown, message)
                )

    def _refused(self, request: Request, size: int | None = None) -> ErrorResponse | None:
        """The error a request gets before any handler sees it: a bad or duplicate id, or one past
        max_inflight (a ping never is: it is answered at once, whatever is in flight). `size`: its
        request_bytes, when known already."""
        request_id = request.id
        if not is_id(request_id):
            return ErrorResponse(None, bad_id(request_id))
        if request_id in self.inflight.entries:
            return ErrorResponse(request_id, duplicate(request_id))
        if request.method == "ping":
            return None
        if len(self.inflight) >= self.settings.max_inflight:
            return ErrorResponse(request_id, too_many(self.settings.max_inflight))
        size = request_bytes(request) if size is None else size
        over = self.settings.budget.refusal(self.inflight.client, size)
        return None if over is None else ErrorResponse(request_id, over)

    async def _accept(self, request: Request, entry: InFlight, requests: trio.Nursery) -> None:
        """Answer or forward at once when the handler can; else a task serves the request."""
        refused = modern.accept(self, request, entry)
        if refused is not None:
            entry.answered(refused)
            self.inflight.remove(entry)
            await self.send(refused)
            return
        outcome = self._decide(request, entry) if self._later(request.method, entry) is None else None
        if outcome is None:
            entry.scope = trio.CancelScope()
            requests.start_soon(self._serve, request, entry)
            return
        if isinstance(outcome, Forward) and self.answers.overflow:
            await (
                self.answers.wait_drained()
            )  # the client reads slowly: no new call until its answers are out
        answer = self._act(request, entry, outcome)
        if answer is not None:
            await self.send(answer)

    def take_now(self, message: Message) -> bool:
        """`_receive` in the reader's task, for a request answered, refused or forwarded at once while this
        dispatcher waits on an empty inbox and holds no answers back. False: it goes in the inbox."""
        if type(message) is not Request:
            return False
        modern_request = is_modern_request(message.params)
        if modern_request:
            if (
                not self.settings.first_settle.over
                or self.settings.middleware
                or message.method in MODERN_LATER
            ):
                return False  # it may wait (settle, middleware, listen): in a task
        elif self.state is not SessionState.OPERATING or self._later(message.method, None) is not None:
            return False
        if not receiver_idle(self.inbox) or self.answers.overflow:
            return False
        size = request_bytes(message)
        refused = self._refused(message, size)
        if refused is not None:
            self.trace_refusal(message, refused)
            self.answers.deliver(refused)
            return True
        entry = self.inflight.accept(message.id, size=size)
        self.trace(entry, message)
        refused = modern.accept(self, message, entry) if modern_request else None
        if refused is not None:
            entry.answered(refused)
            self.inflight.remove(entry)
            self.answers.deliver(refused)
            return True
        outcome = self._decide(message, entry)
        assert outcome is not None  # only INITIALIZING and the first settle defer
        answer = self._act(message, entry, outcome)
        if answer is not None:
            self.answers.deliver(answer)
        return True

    def _act(
        self, request: Request, entry: InFlight, outcome: Message | Forward | Resume | AskFirst
    ) -> Message | None:
        """A decision carried out: a call forwarded, a retry attached to its parked call, a call held for
        the user's approval (None: the answer will come through the entry), or the client's answer now (the
        entry is then done)."""
        if isinstance(outcome, Forward):
            self.forwarder.now(entry, outcome)
            return None
        if isinstance(outcome, AskFirst):
            approvals.start_asking(self, entry, outcome)
            return None
        if isinstance(outcome, Resume):
            assert entry.modern is not None
            answer = modern.resume(self, request.id, entry.modern, entry)
        else:
            answer = outcome
        if answer is not None:
            entry.answered(answer)
            self.inflight.remove(entry)
        return answer

    def trace(self, entry: InFlight, request: Request) -> None:
        """The request's SERVER span, when tracing is on: it ends with the request's answer."""
        if self.settings.tracing is not None:
            entry.span = self._server_span(self.settings.tracing, request)

    def trace_refusal(self, request: Request, refused: ErrorResponse) -> None:
        """A request refused before it was taken in (a bad or duplicate id, past max_inflight or its budget)
        is a request too: its span, when tracing is on, ends at once with the refusal."""
        if self.settings.tracing is not None:
            self._server_span(self.settings.tracing, request).end(refused)

    def _server_span(self, tracing: Tracing, request: Request) -> ServerSpan:
        if self._trace_peer is None:
            caller, quiet = self.caller, self.settings.quiet
            peer = peer_attributes(
                caller.listener, caller.address, self.session, caller.listener == "http" and not quiet
            )
            self._trace_peer = tuple(peer.items())
        link = self.http_context(request.id) if self.http_context is not None else None
        return tracing.server(request, self._trace_peer, self.version, link)

    @property
    def bound(self) -> str | None:
        """The session the requestStates it hands out are good in; None for a session of one request (a
        modern HTTP POST), whose retry comes as another POST: its states are bound to its principal."""
        return None if self.settings.quiet else self.session

    def chain_of(self, request_id: RequestId) -> MiddlewareChain | None:
        """The middleware a request goes through: its own client's when it is modern, else the session's."""
        entry = self.inflight.get(request_id)
        return entry.modern.chain if entry is not None and entry.modern is not None else self.chain

    def _decide(
        self, request: Request, entry: InFlight | None
    ) -> Message | Forward | Resume | AskFirst | None:
        """The answer or forward of a request handled at once; None when it must wait for initialize (a
        legacy request) or for the catalog's first settle (a modern one)."""
        call = entry.modern if entry is not None else None
        if call is not None:
            return modern.decide(self, request, call)
        handler = NOW.get(request.method)
        if handler is None:
            error = rpc_error(METHOD_NOT_FOUND, f"Method not found: {clip(request.method)}")
            return ErrorResponse(request.id, error)
        if self.state is SessionState.INITIALIZING and request.method not in BEFORE_INITIALIZE:
            return None  # a client that pipelines after initialize waits for its answer
        params = self._checked(request)
        if isinstance(params, ErrorResponse):
            return params
        return handler(self, request.id, params)

    def _checked(self, request: Request) -> Params | ErrorResponse:
        if self.state is not SessionState.OPERATING and request.method not in BEFORE_INITIALIZE:
            error = rpc_error(
                NOT_INITIALIZED, f"Server not initialized: send initialize before {request.method}"
            )
            return ErrorResponse(request.id, error)
        params = {} if request.params is None else request.params
        if not isinstance(params, dict):
            return ErrorResponse(request.id, invalid_field("params", "an object"))
        error = meta_error(params)
        return params if error is None else ErrorResponse(request.id, error)

    async def answer(self, request: Request, entry: InFlight | None = None) -> Message:
        """A request's answer, awaited (in the request's task)."""
        call = entry.modern if entry is not None else None
        if call is not None:
            if not self.settings.first_settle.over:
                await lifecycle.settled_view(self, "a request")
        elif self.state is SessionState.INITIALIZING and request.method not in BEFORE_INITIALIZE:
            await self.operating.wait()
        later = self._later(request.method, entry)
        if later is None:
            outcome = self._decide(request, entry)
            assert outcome is not None
            if isinstance(outcome, Resume):
                assert call is not None
                return await modern.resumed(self, request, call, entry)
            if isinstance(outcome, AskFirst):
                outcome = await approvals.settle(self, request.id, outcome)
            if not isinstance(outcome, Forward):
                return outcome
            answer = await shim.forwarded(self, outcome, request.id, entry)
        else:
            params = call.params if call is not None else self._checked(request)
            if isinstance(params, ErrorResponse):
                return params
            answer = await later(self, request.id, params)
        return answer if call is None else call.encode(answer)

    def _later(self, method: str, entry: InFlight | None) -> Later | None:
        call = entry.modern if entry is not None else None
        if call is not None and call.state is not None:
            if method == "tools/call" and call.chain is not None:
                return retries.retry_through_middleware  # the call's next round, through the middleware
            return None  # a retry, decided at once (modern.decide)
        if method == "tools/call" and (self.chain if call is None else call.chain) is not None:
            return tools.call_through_middleware
        return LATER.get(method) if call is None else MODERN_LATER.get(method)

    async def _serve(
        self, request: Request, entry: InFlight, deliver: Callable[[Message], Awaitable[None]] | None = None
    ) -> None:
        """Answer one request in a task. It stays in flight until its answer is in the outbox (a batch's,
        until the batch's array is: `_serve_batch` then forgets it); a session torn down before that still
        owes it."""
        assert entry.scope is not None
        with entry.scope:
            response: Message | None = await self.answer(request, entry)
        if entry.scope.cancelled_caught:  # the client's cancel wants nothing; anything else an error
            response = None if entry.silent else self._stopped(request, entry)
        if response is not None:
            entry.answered(response)
            await (deliver or self.send)(response)
        if deliver is None:
            self.inflight.remove(entry)

    def _stopped(self, request: Request, entry: InFlight) -> Message:
        """The answer of a request the gateway stops: an error, or a listen's graceful end."""
        if request.method == "subscriptions/listen" and entry.modern is not None:
            return listen.ended(request.id, entry.modern.server_info)
        return ErrorResponse(request.id, SHUTTING_DOWN)

    def owed_answers(self, error: RpcError) -> list[Message]:
        """What a session that crashed still owes its client (see InFlightTable.owed_answers)."""
        return self.inflight.owed_answers(error)

    def drop(self, what: str, why: str, source: str = "the client") -> None:
        """A notification (or event) not acted on, logged at a bounded rate: a peer may send floods."""
        self._drops.log("WARNING", "dropped {} from {}: {}", shown(what), source, why)

    async def send(self, message: Message) -> None:
        try:
            await put(self.outbox, message)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            logger.debug("writer is gone; dropped {}", type(message).__name__)

    def halt(self) -> None:
        """Answer everything in flight with an error now: the session is stopping."""
        for entry in list(self.inflight.entries.values()):
            self.forwarder.stop(entry, "the gateway is shutting down")

    async def _halt_after(self, wait: Callable[[], Awaitable[object]]) -> None:
        await wait()
        self.halt()
