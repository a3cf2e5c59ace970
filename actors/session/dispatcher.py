"""The dispatch actor: one client session's protocol state machine and router.

States: NEW (only initialize and ping) -> INITIALIZING (initialize held until the catalog has settled) ->
OPERATING. Each request runs in its own task, so a slow call never blocks a ping or another call.
"""

from __future__ import annotations

import contextlib
import enum
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from contextlib import nullcontext
from functools import partial
from typing import Any, Final

import attrs
import trio
from loguru import logger

from actors import __version__
from actors.backends.connection import unavailable
from actors.catalog import BackendStatus, CatalogView, Route
from actors.catalog.clients import ClientDirectory
from actors.catalog.resource_routes import resource_route, template_owner, with_public_uri
from actors.catalog.subscriptions import Subscriptions
from actors.middleware import ClientInfo, Middleware, ToolCall
from actors.middleware.chain import MiddlewareChain
from actors.protocol.codec import clip, is_id, shown, writable
from actors.protocol.envelopes import (
    BackendCommand,
    BackendEvent,
    Call,
    Cancel,
    CatalogChanged,
    Mail,
    Notify,
    ReplySlot,
    next_call_id,
)
from actors.protocol.errors import (
    BACKEND_UNAVAILABLE,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_INITIALIZED,
    REQUEST_TIMEOUT,
    RESOURCE_NOT_FOUND,
    rpc_error,
)
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
from actors.protocol.pages import page
from actors.protocol.versions import LOG_LEVELS, negotiate_version
from actors.runtime.broadcast import Broadcast
from actors.runtime.channels import put
from actors.runtime.log import RateLimiter
from actors.runtime.watch import Watch
from actors.session.client_asks import ClientAsks

BEFORE_INITIALIZE: Final = frozenset({"initialize", "ping"})
LOG_SEVERITY: Final = {level: rank for rank, level in enumerate(LOG_LEVELS)}
BATCH_VERSIONS: Final = frozenset({"2025-03-26"})  # the one negotiated version with JSON-RPC batches
MAILBOX_SIZE: Final = 256  # unasked items queued for a session; past it backends' requests are refused
CATALOG_CHANGED: Final = CatalogChanged()
ROOTS_CHANGED: Final = Notification("notifications/roots/list_changed")
TOO_MANY_REQUESTS: Final = -32000  # the implementation's range: past max_inflight; the session goes on
MAX_URI_CHARS: Final = 8192  # a longer URI is refused before any resource template is matched against it
MAX_REASON_CHARS: Final = 256  # of a client's cancel reason, as passed on to the backend
MAX_SUBSCRIPTIONS: Final = 1024  # resources one session may be subscribed to (the table is the gateway's)
DROP_LOG_RATE: Final = 5.0  # warnings per second about what a session dropped (bad notifications, events)
CANCEL_FLUSH_S: Final = 1.0  # at the session's end, how long queued cancels may wait for room at a backend
SESSION_FAILED: Final = "Internal error: the gateway's session failed; reconnect"
SHUTTING_DOWN: Final = rpc_error(BACKEND_UNAVAILABLE, "the gateway is shutting down")


class SessionState(enum.Enum):
    NEW = "new"
    INITIALIZING = "initializing"
    OPERATING = "operating"


@attrs.frozen
class SessionSettings:
    server_name: str
    settle_timeout_s: float  # longest hold of the first initialize while backends start (initialize_hold_s)
    drain_s: float  # after the client's stream ends, how long in-flight requests may still finish
    page_size: int = 100  # entries per page of an aggregated list
    events: Broadcast[BackendEvent] | None = None  # backends' log messages and resource updates
    clients: ClientDirectory | None = None  # where backends find the only session connected
    middleware: tuple[Middleware, ...] = ()  # around tools/list and tools/call, in config order
    subscriptions: Subscriptions = attrs.field(factory=Subscriptions)  # shared by the gateway's sessions
    max_inflight: int = 256  # requests of one session not yet answered; past it, an error at once
    initialize_within_s: float | None = None  # a network client must finish initialize by then (None: never)


@attrs.define(eq=False)
class _InFlight:
    request_id: RequestId
    batch: int = 0  # the batch it came in (0: alone); after a crash a batch is answered in one array
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    silent: bool = False  # cancelled by the client: the spec says send nothing
    forwarded: tuple[BackendStatus, int] | None = None  # while forwarded: the backend and its call id


Handler = Callable[[RequestId, Params], Awaitable[Message]]
Calls = trio.MemorySendChannel[BackendCommand]


@attrs.define(eq=False)
class _Backlog:
    commands: deque[Cancel | Notify] = attrs.field(factory=deque)
    notify_queued: bool = False
    drained: trio.Event = attrs.field(factory=trio.Event)


@attrs.define
class BackendCommands:
    """Owns: one session's Cancels and Notifies that found a backend's inbox full, queued per backend.

    A command goes at once when there is room, so a cancel reaches the backend before later calls. Else it
    waits in its backend's queue, sent in order by one task, and the session's next calls to that backend
    wait behind it: they never overtake a cancel, and the queue stays bounded (a Cancel only for a call that
    reached the backend, one per call, and a session has at most max_inflight of them; roots list_changed
    Notifies coalesced to one). Nothing queued is lost: `flush` sends the rest when the session ends."""

    _backlogs: dict[Calls, _Backlog] = attrs.field(factory=dict)

    def send(self, calls: Calls, command: Cancel | Notify, nursery: trio.Nursery) -> None:
        backlog = self._backlogs.get(calls)
        if backlog is None:
            try:
                calls.send_nowait(command)
                return
            except trio.WouldBlock:
                backlog = self._backlogs[calls] = _Backlog()
                nursery.start_soon(self._send_queued, calls, backlog)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return  # that run of the backend is over: it answered its calls and forgot them
        if isinstance(command, Notify):
            if backlog.notify_queued:
                return  # the news is already on its way
            backlog.notify_queued = True
        backlog.commands.append(command)

    async def call(self, calls: Calls, call: Call) -> None:
        """Put a call in the backend's inbox, behind the commands queued for it. Errors as `send`."""
        while (backlog := self._backlogs.get(calls)) is not None:
            await backlog.drained.wait()
        await put(calls, call)

    def pending(self) -> int:
        return sum(len(backlog.commands) for backlog in self._backlogs.values())

    async def flush(self) -> None:
        """Send what is still queued; the caller bounds the wait (the session is ending)."""
        for calls, backlog in list(self._backlogs.items()):
            await self._send_queued(calls, backlog)

    async def _send_queued(self, calls: Calls, backlog: _Backlog) -> None:
        try:
            while backlog.commands:
                await calls.send(backlog.commands[0])  # cancelled: it stays queued for `flush`
                if isinstance(backlog.commands.popleft(), Notify):
                    backlog.notify_queued = False
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            backlog.commands.clear()  # the backend's run ended; it has nothing to cancel any more
        if self._backlogs.get(calls) is backlog:
            del self._backlogs[calls]
        backlog.drained.set()


@attrs.define
class Dispatcher:
    """Owns: the session's protocol state, its in-flight request table, and its outbox send end.
    Receives: messages from the reader on `inbox`.
    Sends: responses and notifications to the writer on `outbox`; Calls and Cancels to backends.
    Stops when: the inbox ends and every request task has finished (after `drain_s`, or at once when `halt()`
        is called, the rest are answered with an error).
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
    subject: str | None = None  # the client's bearer token subject
    on_ready: Callable[[], None] | None = None  # told once, when the client has finished initialize
    _state: SessionState = SessionState.NEW
    _version: str | None = None  # the negotiated protocol version
    _subscriptions: dict[tuple[str, str], str] = attrs.field(factory=dict)  # (backend, its URI) -> ours
    _log_level: int = 1  # forward backend logs at "info" and above until the client sets its level
    # accepted and not yet answered into the outbox: what max_inflight counts (a task each), what a client's
    # cancel finds by id, and what a crash still owes
    _inflight: dict[RequestId, _InFlight] = attrs.field(factory=dict)
    _batches: int = 0  # batches received so far: each one's number
    _ready_pending: bool = False  # notifications/initialized came while initialize was held
    _commands: BackendCommands = attrs.field(factory=BackendCommands)
    _drops: RateLimiter = attrs.field(factory=lambda: RateLimiter(DROP_LOG_RATE))
    _operating: trio.Event = attrs.field(factory=trio.Event)
    _client_ready: trio.Event = attrs.field(factory=trio.Event)
    _announced: dict[str, int] = attrs.field(factory=dict)  # list kind -> version the client was told of
    _handlers: dict[str, Handler] = attrs.field(init=False)
    _background: trio.Nursery = attrs.field(init=False)
    _client_asks: ClientAsks = attrs.field(init=False)
    _chain: MiddlewareChain | None = None  # made at initialize, when there is middleware

    def __attrs_post_init__(self) -> None:
        if self.asks is None or self.asks_to is None:
            self.asks_to, self.asks = trio.open_memory_channel[Mail](MAILBOX_SIZE)
        self._client_asks = ClientAsks(self._send)
        self._handlers = {
            "initialize": self._initialize,
            "ping": self._ping,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
            "logging/setLevel": self._set_log_level,
            "prompts/list": self._list_prompts,
            "prompts/get": self._get_prompt,
            "resources/list": self._list_resources,
            "resources/templates/list": self._list_templates,
            "resources/read": self._read_resource,
            "completion/complete": self._complete,
            "resources/subscribe": self._subscribe,
            "resources/unsubscribe": self._unsubscribe,
        }

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        mailbox, mailbox_to = self.asks, self.asks_to
        assert mailbox is not None and mailbox_to is not None
        try:
            with self.outbox:
                async with trio.open_nursery() as background:
                    self._background = background
                    background.start_soon(self._read_mailbox, mailbox, mailbox_to)
                    async with trio.open_nursery() as requests:
                        task_status.started()
                        with self.inbox:
                            async for message in self.inbox:
                                await self._receive(message, requests)
                        background.start_soon(
                            self._cancel_all_after, partial(trio.sleep, self.settings.drain_s)
                        )
                    background.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_FLUSH_S):
                await self._commands.flush()  # cancels queued for full inboxes are not lost
            self._release_subscriptions()
            if self.settings.clients is not None:
                self.settings.clients.leave(self.session)
            self._client_asks.refuse_queued(mailbox, "the client session ended")
            mailbox.close()  # backends asking from now on learn the session is gone
            self._client_asks.fail_all("the client session ended before answering")

    async def _receive(self, message: Message, requests: trio.Nursery) -> None:
        match message:
            case Request(id=request_id) if not is_id(request_id):
                await self._send(ErrorResponse(None, _bad_id(request_id)))
            case Request(id=request_id) if request_id in self._inflight:
                await self._send(ErrorResponse(request_id, _duplicate(request_id)))
            case Request(id=request_id, method="ping"):
                await self._send(Response(request_id, {}))  # at any time, answered inline
            case Request(id=request_id) if len(self._inflight) >= self.settings.max_inflight:
                await self._send(ErrorResponse(request_id, self._too_many()))
            case Request(id=request_id):
                requests.start_soon(self._serve, message, self._accept(request_id))
            case Notification():
                self._notified(message)
            case Batch():
                await self._receive_batch(message, requests)
            case Response() | ErrorResponse() if self._client_asks.settle(message):
                pass
            case _:
                logger.opt(lazy=True).debug(
                    "ignored a response to nothing the gateway asked: {}", partial(shown, message)
                )

    def _accept(self, request_id: RequestId, batch: int = 0) -> _InFlight:
        entry = self._inflight[request_id] = _InFlight(request_id, batch)
        return entry

    def _too_many(self) -> RpcError:
        limit = self.settings.max_inflight
        message = f"Too many requests in flight: this session has {limit} unanswered (max_inflight {limit})"
        return rpc_error(TOO_MANY_REQUESTS, message, max_inflight=limit)

    async def _receive_batch(self, batch: Batch, requests: trio.Nursery) -> None:
        """Protocol 2025-03-26 allows JSON-RPC batches: each request is served as if alone (concurrently),
        and the responses go back as one array. Every later version refuses them. Each request of a batch
        counts against max_inflight; those past it are answered with the error in the batch's array."""
        if self._version not in BATCH_VERSIONS:
            reason = (
                f"protocol {self._version} has no batches" if self._version else "a batch before initialize"
            )
            await self._send(ErrorResponse(None, rpc_error(INVALID_REQUEST, f"Invalid request: {reason}")))
            return
        self._batches += 1
        answers: list[Message] = []
        accepted: list[tuple[Request, _InFlight]] = []
        for item in batch.items:
            match item:
                case Response() | ErrorResponse() if self._client_asks.settle(item):
                    pass  # the client's answer to a request of ours
                case ErrorResponse():
                    answers.append(item)  # what an element that is no message earns
                case Notification():
                    self._notified(item)
                case Request(id=request_id) if not is_id(request_id):
                    answers.append(ErrorResponse(None, _bad_id(request_id)))
                case Request(id=request_id, method="initialize"):
                    error = rpc_error(
                        INVALID_REQUEST, "Invalid request: initialize cannot be part of a batch"
                    )
                    answers.append(ErrorResponse(request_id, error))
                case Request(id=request_id) if request_id in self._inflight:
                    answers.append(ErrorResponse(request_id, _duplicate(request_id)))
                case Request(id=request_id) if len(self._inflight) >= self.settings.max_inflight:
                    answers.append(ErrorResponse(request_id, self._too_many()))
                case Request(id=request_id):
                    accepted.append((item, self._accept(request_id, self._batches)))
                case _:
                    logger.opt(lazy=True).debug(
                        "ignored a response from the client in a batch: {}", partial(shown, item)
                    )
        if accepted:
            requests.start_soon(self._serve_batch, accepted, answers)
        elif answers:
            await self._send(Batch(tuple(answers)))  # type: ignore[arg-type]

    async def _serve_batch(self, accepted: list[tuple[Request, _InFlight]], answers: list[Message]) -> None:
        async def collect(message: Message) -> None:
            answers.append(message)

        async with trio.open_nursery() as nursery:
            for request, entry in accepted:
                nursery.start_soon(self._serve, request, entry, collect)
        if answers:
            await self._send(Batch(tuple(answers)))  # type: ignore[arg-type]
        for request, _ in accepted:
            del self._inflight[request.id]

    async def _serve(
        self,
        request: Request,
        entry: _InFlight,
        deliver: Callable[[Message], Awaitable[None]] | None = None,
    ) -> None:
        """Answer one request. It stays in flight until its answer is in the outbox (a batch's, until the
        batch's array is: `_serve_batch` then forgets it); a session torn down before that still owes it."""
        with entry.scope:
            response: Message | None = await self._answer(request)
        if entry.scope.cancelled_caught:  # the client's cancel wants nothing; anything else an error
            response = None if entry.silent else ErrorResponse(request.id, SHUTTING_DOWN)
        if response is not None:
            await (deliver or self._send)(response)
        if deliver is None:
            del self._inflight[request.id]

    def owed_answers(self, error: RpcError) -> list[Message]:
        """An error for each request accepted and not yet answered into the outbox (the requests of a batch in
        one array): what a session that crashed still owes its client."""
        alone: list[Message] = []
        batches: dict[int, list[ErrorResponse]] = {}
        for entry in self._inflight.values():
            if entry.silent:
                continue
            answer = ErrorResponse(entry.request_id, error)
            if entry.batch:
                batches.setdefault(entry.batch, []).append(answer)
            else:
                alone.append(answer)
        return alone + [Batch(tuple(items)) for items in batches.values()]

    async def _answer(self, request: Request) -> Message:
        handler = self._handlers.get(request.method)
        if handler is None:
            return ErrorResponse(
                request.id, rpc_error(METHOD_NOT_FOUND, f"Method not found: {clip(request.method)}")
            )
        if self._state is SessionState.INITIALIZING and request.method not in BEFORE_INITIALIZE:
            await self._operating.wait()  # a client that pipelines after initialize waits for its answer
        if self._state is not SessionState.OPERATING and request.method not in BEFORE_INITIALIZE:
            error = rpc_error(
                NOT_INITIALIZED, f"Server not initialized: send initialize before {request.method}"
            )
            return ErrorResponse(request.id, error)
        params = {} if request.params is None else request.params
        if not isinstance(params, dict):
            return ErrorResponse(request.id, invalid_field("params", "an object"))
        error = _meta_error(params)
        if error is not None:
            return ErrorResponse(request.id, error)
        return await handler(request.id, params)

    def _notified(self, notification: Notification) -> None:
        method, params = notification.method, notification.params
        if params is not None and not isinstance(params, dict):
            self._drop(method, "its params are not an object")
            return
        params = params or {}
        match method:
            case "notifications/initialized" if self._state is SessionState.OPERATING:
                self._set_client_ready()
            case "notifications/initialized" if self._state is SessionState.INITIALIZING:
                if not self._ready_pending:  # one task, however many times the client says it
                    self._ready_pending = True
                    self._background.start_soon(self._ready_once_operating)
            case "notifications/roots/list_changed" if self._state is SessionState.OPERATING:
                self._tell_backends()
            case "notifications/cancelled":
                self._cancelled(params)
            case _:
                logger.opt(lazy=True).debug("ignored notification {}", partial(shown, method))

    def _cancelled(self, params: Params) -> None:
        request_id, reason = params.get("requestId"), params.get("reason")
        if not is_id(request_id):
            self._drop("notifications/cancelled", "its requestId is not a string or an integer")
            return
        if reason is not None and not isinstance(reason, str):
            self._drop("notifications/cancelled", "its reason is not a string")
            return
        entry = self._inflight.get(request_id)
        if entry is None or self._state is not SessionState.OPERATING:
            return
        entry.silent = True
        if entry.forwarded is not None:  # now, so it reaches the backend before later calls
            self._cancel_at_backend(
                *entry.forwarded, clip(reason, MAX_REASON_CHARS) if reason else "cancelled by the client"
            )
            entry.forwarded = None
        entry.scope.cancel()

    def _drop(self, what: str, why: str, source: str = "the client") -> None:
        """A notification (or event) not acted on, logged at a bounded rate: a peer may send floods."""
        self._drops.log("WARNING", "dropped {} from {}: {}", shown(what), source, why)

    async def _send(self, message: Message) -> None:
        try:
            await put(self.outbox, message)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            logger.debug("writer is gone; dropped {}", type(message).__name__)

    def halt(self) -> None:
        """Answer everything in flight with an error now: the session is stopping."""
        for entry in self._inflight.values():
            entry.scope.cancel()

    async def _cancel_all_after(self, wait: Callable[[], Awaitable[object]]) -> None:
        await wait()
        for entry in self._inflight.values():
            entry.scope.cancel()

    # -- handlers -------------------------------------------------------------------------------------------

    async def _initialize(self, request_id: RequestId, params: Params) -> Message:
        if self._state is not SessionState.NEW:
            return ErrorResponse(
                request_id, rpc_error(INVALID_REQUEST, "Invalid request: already initialized")
            )
        version = params.get("protocolVersion")
        if not isinstance(version, str):
            error = rpc_error(
                INVALID_PARAMS,
                "Invalid params: initialize needs protocolVersion (a string)",
                field="protocolVersion",
            )
            return ErrorResponse(request_id, error)
        for field in ("capabilities", "clientInfo"):
            if params.get(field) is not None and not isinstance(params[field], dict):
                return ErrorResponse(request_id, invalid_field(field, "an object"))
        self._state = SessionState.INITIALIZING
        self._version = negotiate_version(version)
        view = await self._settled_view()
        self._state = SessionState.OPERATING
        self._operating.set()
        self._announced = {
            "tools": view.tools_version,
            "prompts": view.prompts_version,
            "resources": view.resources_version,
        }
        client = params.get("clientInfo") if isinstance(params.get("clientInfo"), dict) else {}
        if self.settings.middleware:
            name = client.get("name") if isinstance(client.get("name"), str) else None
            self._chain = MiddlewareChain(
                self.settings.middleware, ClientInfo(self.session, self.subject, name)
            )
        capabilities = params.get("capabilities")
        self._client_asks.capabilities = capabilities if isinstance(capabilities, dict) else {}
        logger.info(
            "client {} {} initialized (protocol {})",
            _label(client.get("name")),
            _label(client.get("version")),
            _label(version),
        )
        result: dict[str, Any] = {
            "protocolVersion": self._version,
            "capabilities": view.server_capabilities(),
            "serverInfo": {"name": self.settings.server_name, "version": __version__},
        }
        instructions = view.instructions()
        if instructions:
            result["instructions"] = instructions
        return Response(request_id, result)

    async def _ready_once_operating(self) -> None:
        await self._operating.wait()
        self._set_client_ready()

    def _set_client_ready(self) -> None:
        if self._client_ready.is_set():
            return  # said twice: nothing new
        self._client_ready.set()
        if self.on_ready is not None:
            self.on_ready()
        assert self.asks_to is not None
        with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            self.asks_to.send_nowait(CATALOG_CHANGED)  # what changed since initialize is announced now
        if self.settings.clients is not None:
            self.settings.clients.join(self.session, self.asks_to)

    def _tell_backends(self) -> None:
        """The client's roots changed: every ready backend hears it (as the gateway's own notification, so
        nothing else the client put in it goes along)."""
        command = Notify(ROOTS_CHANGED, self.asks_to)
        for status in self.catalog.value.backends.values():
            if status.ready:
                assert status.calls is not None
                self._commands.send(status.calls, command, self._background)

    async def _read_mailbox(
        self, mailbox: trio.MemoryReceiveChannel[Mail], to: trio.MemorySendChannel[Mail]
    ) -> None:
        """One task for everything that comes to the session unasked: backends' requests for the client and
        their withdrawals, backend events (logs, resource updates), and catalog changes to announce."""
        events = self.settings.events
        with self.catalog.follow(to, CATALOG_CHANGED), events.deliver_to(to) if events else nullcontext():
            async for item in mailbox:
                if isinstance(item, BackendEvent):
                    await self._forward_event(item)
                elif item is not CATALOG_CHANGED:
                    await self._client_asks.take(item, self._state is SessionState.OPERATING)  # type: ignore[arg-type]
                if self._client_ready.is_set():
                    await self._announce_list_changes()

    async def _settled_view(self) -> CatalogView:
        """Hold the first initialize until every backend is ready or has ended its first start, so a client
        that lists tools once never sees an empty catalog only because it connected first."""
        with trio.move_on_after(self.settings.settle_timeout_s) as hold:
            version, view = self.catalog.version, self.catalog.value
            while not view.settled:
                version, view = await self.catalog.wait_newer(version)
        view = self.catalog.value
        late = [
            f"{name} ({status.describe()})" for name, status in view.backends.items() if not status.settled
        ]
        if hold.cancelled_caught and late:
            logger.warning(
                "initialize held {}s; answering with what is ready, without {}",
                self.settings.settle_timeout_s,
                ", ".join(late),
            )
        return view

    async def _ping(self, request_id: RequestId, params: Params) -> Message:
        return Response(request_id, {})

    async def _list_tools(self, request_id: RequestId, params: Params) -> Message:
        view = self.catalog.value
        tools = view.tools if self._chain is None else self._chain.tools(view.tools_version, view.tools)
        if isinstance(tools, RpcError):
            return ErrorResponse(request_id, tools)
        return page(request_id, params, "tools", tools, view.tools_version, self.settings.page_size)

    async def _list_prompts(self, request_id: RequestId, params: Params) -> Message:
        view = self.catalog.value
        return page(
            request_id, params, "prompts", view.prompts, view.prompts_version, self.settings.page_size
        )

    async def _list_resources(self, request_id: RequestId, params: Params) -> Message:
        view = self.catalog.value
        return page(
            request_id, params, "resources", view.resources, view.resources_version, self.settings.page_size
        )

    async def _list_templates(self, request_id: RequestId, params: Params) -> Message:
        view = self.catalog.value
        return page(
            request_id,
            params,
            "resourceTemplates",
            view.templates,
            view.resources_version,
            self.settings.page_size,
        )

    async def _read_resource(self, request_id: RequestId, params: Params) -> Message:
        routed = self._resource_owner(request_id, params)
        if isinstance(routed, ErrorResponse):
            return routed
        status, own, uri = routed
        answer = await self._forward(status, "resources/read", {**params, "uri": own}, request_id)
        if own != uri and isinstance(answer, Response) and isinstance(answer.result, dict):
            answer = Response(request_id, with_public_uri(answer.result, own, uri))
        return answer

    async def _subscribe(self, request_id: RequestId, params: Params) -> Message:
        """The first session to subscribe to a URI subscribes the gateway at the owner; the others join once
        the owner has said yes. This session then gets notifications/resources/updated for it, under the
        form it used."""
        routed = self._resource_owner(request_id, params)
        if isinstance(routed, ErrorResponse):
            return routed
        status, own, uri = routed
        if len(self._subscriptions) >= MAX_SUBSCRIPTIONS and (status.name, own) not in self._subscriptions:
            message = f"Too many subscriptions: this session has {MAX_SUBSCRIPTIONS}; unsubscribe from some"
            return ErrorResponse(request_id, rpc_error(TOO_MANY_REQUESTS, message, limit=MAX_SUBSCRIPTIONS))
        ask = partial(self._forward, status, "resources/subscribe", {**params, "uri": own}, request_id)
        answer = await self.settings.subscriptions.subscribe(
            status.name, own, self.session, ask, lambda answer: isinstance(answer, Response)
        )
        if answer is not None and not isinstance(answer, Response):
            return answer
        self._subscriptions[(status.name, own)] = uri
        return Response(request_id, {}) if answer is None else answer

    async def _unsubscribe(self, request_id: RequestId, params: Params) -> Message:
        """This session stops getting the updates; the last session to leave unsubscribes the gateway."""
        routed = self._resource_owner(request_id, params)
        if isinstance(routed, ErrorResponse):
            return routed
        status, own, _ = routed
        self._subscriptions.pop((status.name, own), None)
        if self.settings.subscriptions.remove(status.name, own, self.session):
            return await self._forward(status, "resources/unsubscribe", {**params, "uri": own}, request_id)
        return Response(request_id, {})

    def _release_subscriptions(self) -> None:
        """At the end of the session: unsubscribe at the backends from what nobody else wants."""
        view = self.catalog.value
        for backend, uri in self.settings.subscriptions.drop_session(self.session):
            status = view.backends.get(backend)
            if status is None or not status.ready:
                continue  # down: it forgot its subscriptions, and will not be given this one again
            assert status.calls is not None
            call = Call(next_call_id(), "resources/unsubscribe", {"uri": uri}, self.session, ReplySlot())
            with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                status.calls.send_nowait(call)

    def _resource_owner(
        self, request_id: RequestId, params: Params
    ) -> tuple[BackendStatus, str, str] | ErrorResponse:
        """The ready backend that owns params.uri, its form of the URI, and the URI as the client wrote it."""
        uri = params.get("uri")
        if not isinstance(uri, str):
            return ErrorResponse(request_id, invalid_field("uri", "a string"))
        if len(uri) > MAX_URI_CHARS:
            return ErrorResponse(request_id, invalid_field("uri", f"at most {MAX_URI_CHARS} characters long"))
        view = self.catalog.value
        route = resource_route(view, uri)
        status = view.backends.get(route.backend) if route is not None else None
        if route is None or status is None:
            return ErrorResponse(
                request_id, rpc_error(RESOURCE_NOT_FOUND, f"Resource not found: {clip(uri)}", uri=uri)
            )
        if not status.ready:
            return ErrorResponse(request_id, _backend_down(uri, status, "resource"))
        return status, route.own, uri

    async def _complete(self, request_id: RequestId, params: Params) -> Message:
        """Routed by its ref: a prompt by public name, a resource template by its published form."""
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(ref, dict):
            return ErrorResponse(request_id, invalid_field("ref", "an object"))
        if argument is not None and not isinstance(argument, dict):
            return ErrorResponse(request_id, invalid_field("argument", "an object"))
        view = self.catalog.value
        route: Route | None = None
        kind, name, uri = ref.get("type"), ref.get("name"), ref.get("uri")
        if kind == "ref/prompt":
            if not isinstance(name, str):
                return ErrorResponse(request_id, invalid_field("ref.name", "a string"))
            route = view.prompt_routes.get(name)
            own_ref = {**ref, "name": route.own} if route else ref
        elif kind == "ref/resource":
            if not isinstance(uri, str):
                return ErrorResponse(request_id, invalid_field("ref.uri", "a string"))
            route, own = template_owner(view, uri)
            own_ref = {**ref, "uri": own}
        else:
            return ErrorResponse(request_id, invalid_field("ref.type", '"ref/prompt" or "ref/resource"'))
        status = view.backends.get(route.backend) if route is not None else None
        if route is None or status is None:
            message = "Invalid params: completion/complete needs a ref to a known prompt or resource template"
            return ErrorResponse(request_id, rpc_error(INVALID_PARAMS, message))
        if not status.ready:
            return ErrorResponse(request_id, _backend_down(str(name or uri), status, "ref"))
        return await self._forward(status, "completion/complete", {**params, "ref": own_ref}, request_id)

    async def _get_prompt(self, request_id: RequestId, params: Params) -> Message:
        return await self._forward_named(
            request_id, params, "prompts/get", "prompt", self.catalog.value.prompt_routes
        )

    async def _call_tool(self, request_id: RequestId, params: Params) -> Message:
        view = self.catalog.value
        if self._chain is None:
            return await self._forward_named(request_id, params, "tools/call", "tool", view.routes)
        error = _named_error(params)  # before the middleware sees the call
        if error is not None:
            return ErrorResponse(request_id, error)
        name = params.get("name")
        routes = view.routes
        if isinstance(name, str) and self._chain.hides(view.tools_version, view.tools, name):
            routes = {}  # filtered out for this client: as unknown as a name nobody has
        route = routes.get(name) if isinstance(name, str) else None
        call = ToolCall(
            self._chain.client,
            name if isinstance(name, str) else "",
            route.backend if route else None,
            route.own if route else None,
            params.get("arguments"),
            time.time(),
        )

        async def forward(call: ToolCall) -> Message:
            if call.arguments is params.get("arguments"):
                return await self._forward_named(request_id, params, "tools/call", "tool", routes)
            if not isinstance(call.arguments, dict | None) or not writable(call.arguments):
                message = "Internal error: middleware changed the arguments into something not a JSON object"
                return ErrorResponse(request_id, rpc_error(INTERNAL_ERROR, message))
            changed = {**params, "arguments": call.arguments}
            return await self._forward_named(request_id, changed, "tools/call", "tool", routes)

        return await self._chain.call(request_id, call, forward)

    async def _forward_named(
        self, request_id: RequestId, params: Params, method: str, kind: str, routes: Mapping[str, Route]
    ) -> Message:
        """A request naming a tool or prompt by its public name: to the owner, under the owner's name."""
        error = _named_error(params)
        if error is not None:
            return ErrorResponse(request_id, error)
        name: str = params["name"]
        route = routes.get(name)
        status = self.catalog.value.backends.get(route.backend) if route is not None else None
        if route is None or status is None:
            shown_name = clip(name)
            return ErrorResponse(
                request_id, rpc_error(INVALID_PARAMS, f"Unknown {kind}: {shown_name}", **{kind: shown_name})
            )
        if not status.ready:
            return ErrorResponse(request_id, _backend_down(name, status, kind))
        forwarded = params if route.own == name else {**params, "name": route.own}
        return await self._forward(status, method, forwarded, request_id)

    # -- forwarding -----------------------------------------------------------------------------------------

    async def _forward(
        self, backend: BackendStatus, method: str, params: Params, request_id: RequestId
    ) -> Message:
        calls = backend.calls
        assert calls is not None
        call_id, token = next_call_id(), _progress_token(params)
        if token is not None:
            params = {**params, "_meta": {**params["_meta"], "progressToken": call_id}}
        notify_to = self.outbox if token is not None else None
        call = Call(call_id, method, params, self.session, ReplySlot(), notify_to, token, self.asks_to)
        entry = self._inflight.get(request_id)
        sent = False  # in the backend's inbox: from then on, giving up on it means telling the backend
        try:
            with trio.move_on_after(backend.request_timeout_s) as timer:
                try:
                    await self._commands.call(calls, call)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return ErrorResponse(request_id, self._gone(backend))
                sent = True
                if entry is not None:
                    entry.forwarded = (backend, call_id)
                reply = await call.reply_to.wait()
        except trio.Cancelled:
            if sent and (entry is None or entry.forwarded is not None):  # no client cancel told it yet
                self._cancel_at_backend(backend, call_id, "the gateway is shutting down")
            raise
        finally:
            if entry is not None:
                entry.forwarded = None
        if timer.cancelled_caught:
            if sent:
                self._cancel_at_backend(backend, call_id, f"no answer within {backend.request_timeout_s}s")
            message = f"backend '{backend.name}' did not answer {method} within {backend.request_timeout_s}s"
            return ErrorResponse(request_id, rpc_error(REQUEST_TIMEOUT, message, backend=backend.name))
        if reply.error is not None:
            return ErrorResponse(request_id, reply.error)
        return Response(request_id, reply.result)

    def _gone(self, backend: BackendStatus) -> RpcError:
        now = self.catalog.value.backends.get(backend.name, backend)
        reason = f"it is {now.describe()}" if now.reason else "it went down as the call was sent"
        return unavailable(backend.name, reason)

    def _cancel_at_backend(self, backend: BackendStatus, call_id: int, reason: str) -> None:
        assert backend.calls is not None
        self._commands.send(backend.calls, Cancel(call_id, reason), self._background)

    async def _set_log_level(self, request_id: RequestId, params: Params) -> Message:
        level = params.get("level")
        if not isinstance(level, str) or level not in LOG_SEVERITY:
            return ErrorResponse(request_id, invalid_field("level", f"one of {', '.join(LOG_SEVERITY)}"))
        self._log_level = LOG_SEVERITY[level]
        return Response(request_id, {})

    async def _forward_event(self, event: BackendEvent) -> None:
        """What backends say to everyone, filtered for this session once its client is ready: log messages
        at or above its level, updates of the resources it subscribed to (under the URI it used). Takes any
        params shape: what it cannot read is dropped, never raised."""
        if not self._client_ready.is_set():
            return
        note = event.notification
        params = note.params if note.params is not None else {}
        source = f"backend {event.backend}"
        if not isinstance(params, dict):
            self._drop(note.method, "its params are not an object", source)
            return
        if note.method == "notifications/message":
            level = params.get("level")
            if not isinstance(level, str):
                self._drop(note.method, "its level is not a string", source)
            elif LOG_SEVERITY.get(level, 0) >= self._log_level:
                await self._send(note)
        elif note.method == "notifications/resources/updated":
            uri = params.get("uri")
            if not isinstance(uri, str):
                self._drop(note.method, "its uri is not a string", source)
                return
            public = self._subscriptions.get((event.backend, uri))
            if public is not None:
                await self._send(Notification(note.method, {**params, "uri": public}))

    async def _announce_list_changes(self) -> None:
        """notifications/{tools,prompts,resources}/list_changed for each list changed since the client was
        last told."""
        view = self.catalog.value
        versions = {
            "tools": view.tools_version,
            "prompts": view.prompts_version,
            "resources": view.resources_version,
        }
        for kind, current in versions.items():
            if self._announced.get(kind, 0) != current:
                self._announced[kind] = current
                await self._send(Notification(f"notifications/{kind}/list_changed"))


def invalid_field(field: str, expected: str) -> RpcError:
    """The -32602 a request earns for a field of the wrong type or size; it names the field."""
    return rpc_error(INVALID_PARAMS, f"Invalid params: {field} must be {expected}", field=field)


def _meta_error(params: Params) -> RpcError | None:
    meta = params.get("_meta")
    if meta is None:
        return None
    if not isinstance(meta, dict):
        return invalid_field("_meta", "an object")
    token = meta.get("progressToken")
    if token is not None and not is_id(token):
        return invalid_field("_meta.progressToken", "a string or an integer")
    return None


def _named_error(params: Params) -> RpcError | None:
    """tools/call and prompts/get: a name, and arguments (when given) as an object."""
    if not isinstance(params.get("name"), str):
        return invalid_field("name", "a string")
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        return invalid_field("arguments", "an object")
    return None


def _bad_id(request_id: object) -> RpcError:
    return rpc_error(
        INVALID_REQUEST, f"Invalid request: id {shown(request_id)} is not a string or an integer"
    )


def _duplicate(request_id: RequestId) -> RpcError:
    return rpc_error(INVALID_REQUEST, f"Invalid request: id {shown(request_id)} is already in flight")


def _label(value: object) -> str:
    """A client's value for a log line: a printable string as it is (clipped), anything else as its repr."""
    return clip(value) if isinstance(value, str) and value.isprintable() else shown(value)


def _progress_token(params: Params) -> RequestId | None:
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if is_id(token) else None  # type: ignore[return-value]


def _backend_down(name: str, status: BackendStatus, kind: str = "tool") -> Any:
    name = clip(name)
    message = f"{kind} '{name}' belongs to backend '{status.name}', which is {status.describe()}"
    return rpc_error(
        BACKEND_UNAVAILABLE, message, backend=status.name, state=status.state.value, **{kind: name}
    )
