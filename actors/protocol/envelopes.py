"""Internal actor messages. Commands are imperatives, facts are past tense (STYLE.md)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs
import trio

from actors.protocol.eras import ModernEnvelope
from actors.protocol.messages import Message, Notification, RequestId, RpcError
from actors.protocol.on_behalf import OnBehalf

_call_ids = itertools.count(1)


def next_call_id() -> int:
    """A gateway-wide unique id. Backends use it as their backend-side request id, so ids from different
    sessions (or from the gateway itself) never collide on any backend."""
    return next(_call_ids)


@attrs.frozen(slots=True)
class Reply:
    """Backend -> requester: the backend's answer, with `result` or `error`."""

    result: Any = None
    error: RpcError | None = None
    raw: bytes | memoryview | None = attrs.field(default=None, eq=False, repr=False)  # Response.raw's


class ReplySlot:
    """Where the one reply to a Call or an Ask goes: filled once by whoever answers, awaited by the one
    requester. It does a memory channel's job for a single item at a fraction of the cost (it is on every
    call's path), and `fill` never blocks. A second fill is ignored: the first answer wins."""

    __slots__ = ("_filled", "_reply")

    def __init__(self) -> None:
        self._reply: Reply | None = None
        self._filled = trio.Event()

    def fill(self, reply: Reply) -> None:
        if self._reply is None:
            self._reply = reply
            self._filled.set()

    @property
    def filled(self) -> bool:
        return self._reply is not None

    async def wait(self) -> Reply:
        await self._filled.wait()
        assert self._reply is not None
        return self._reply


@attrs.frozen(slots=True, eq=False)
class Call:
    """Requester -> Backend: forward one request. The backend answers on `reply_to` exactly once, even when it
    dies (then with an error naming itself), and sends progress for it to `notify_to`."""

    call_id: int
    method: str
    params: dict[str, Any] | None
    session: str
    reply_to: ReplySlot = attrs.field(repr=False)
    notify_to: trio.MemorySendChannel[Message] | None = attrs.field(default=None, repr=False)
    progress_token: RequestId | None = None  # the client's token; the backend sees call_id instead
    asks_to: MailTarget | None = attrs.field(default=None, repr=False)  # its session's mailbox
    # a modern call's: the backend's log messages while it is the backend's one call in flight
    log_to: Callable[[Notification], None] | None = attrs.field(default=None, repr=False)
    # who the call is for, as a modern backend is told in the request's _meta (None: nobody's, the gateway's)
    envelope: ModernEnvelope | None = attrs.field(default=None, repr=False)
    # a legacy (initialize-era) session's call: a backend of both eras takes it over its legacy lane
    from_legacy: bool = False
    # its asks go to a place of its own (a modern call's), not to a session's mailbox shared by its calls
    own_asks: bool = False
    trace: str | None = None  # the trace id of its traceparent: what its backend's requests name it by
    # a modern client's inputResponses sent on a call of its own (no requestState): a modern link passes
    # them on (a server may take them at once, SEP-2322); a legacy link has nowhere to put them
    input_responses: dict[str, Any] | None = attrs.field(default=None, repr=False)
    # its hop's CLIENT span (telemetry/tracing.py CallSpan) when tracing is on: ended with its one answer
    span: Any = attrs.field(default=None, repr=False)
    # what it carries for its backend's credentials: its caller's token, the client's forwardable headers
    on_behalf: OnBehalf | None = attrs.field(default=None, repr=False)
    # a tools/call's: what its result may bring to its client (output limits, public URIs), applied once, to
    # the answer as it arrives, before anything holds it (session/results.py); given the result and the size
    # of its raw bytes when known (an upper bound on every part's characters: a limit it is within is met)
    shape: Callable[[dict[str, Any], int | None], dict[str, Any]] | None = attrs.field(
        default=None, repr=False
    )


@attrs.frozen(slots=True, eq=False)
class Ask:
    """Backend -> session: a request from a backend for the client (sampling/createMessage,
    elicitation/create, roots/list). The session answers on `reply_to` exactly once: with the client's
    answer, or with an error when it cannot take it or ends first. `ask_id` is the id the client sees."""

    ask_id: int
    backend: str
    method: str
    params: dict[str, Any] | None
    reply_to: ReplySlot = attrs.field(repr=False)
    request_id: RequestId | None = None  # the backend's own id for it: a bridged ask's key


@attrs.frozen(slots=True)
class Withdraw:
    """Backend -> session: the backend cancelled its request `ask_id`; the client is told and its answer,
    if one still comes, is dropped."""

    ask_id: int
    reason: str


def answer(call: Call | Ask, reply: Reply) -> None:
    """Deliver the one reply of a call (or of a backend's request for a client). Never blocks."""
    if type(call) is Call:
        if call.shape is not None and reply.error is None and type(reply.result) is dict:
            shaped = call.shape(reply.result, len(reply.raw) if reply.raw is not None else None)
            if (
                shaped is not reply.result
            ):  # the backend's bytes no longer say it: only the new result goes on
                reply = Reply(result=shaped)
        if call.span is not None:
            call.span.answered(reply)
    call.reply_to.fill(reply)


# What a backend sends straight to one session: its requests for the client, their withdrawals, and
# notifications about them (notifications/elicitation/complete).
ToClient = Ask | Withdraw | Notification


class MailTarget(Protocol):
    """Where a backend puts what it has for the client of a call: the session's mailbox (a channel's send
    end), or a modern call's own place for asks (session/bridge.py, session/modern.py; `Call.own_asks`).
    A target whose client is gone refuses what it is sent (raises, or answers the Ask with an error)."""

    def send_nowait(self, value: Any) -> None: ...


@attrs.frozen(slots=True)
class Cancel:
    """Requester -> Backend: the caller gave up on a call (client cancel or timeout). The backend forgets it
    and tells the server with notifications/cancelled."""

    call_id: int
    reason: str


@attrs.frozen(slots=True)
class Notify:
    """Requester -> Backend: pass a client's notification on (notifications/roots/list_changed). `asks_to`
    is the session it came from: the backend passes a roots change on only when its roots are the client's
    and that session is the one connected (the one its roots/list may go to)."""

    notification: Notification
    asks_to: trio.MemorySendChannel[Mail] | None = attrs.field(default=None, eq=False, repr=False)


BackendCommand = Call | Cancel | Notify
CallNow = Callable[[Call], bool]  # a backend's BackendDoor.call_now: a call written in the caller's task


@attrs.frozen(slots=True)
class BackendReady:
    """Backend -> Catalog: a run finished its handshake and first tools/list; calls go to `calls`."""

    name: str
    tools: tuple[dict[str, Any], ...]
    calls: trio.MemorySendChannel[BackendCommand] = attrs.field(eq=False, repr=False)
    server_info: dict[str, Any] = attrs.field(factory=dict, eq=False)
    instructions: str | None = None
    prompts: tuple[dict[str, Any], ...] = ()
    resources: tuple[dict[str, Any], ...] = ()
    templates: tuple[dict[str, Any], ...] = ()  # resource templates
    capabilities: dict[str, Any] = attrs.field(factory=dict, eq=False)  # what the server offers
    call_now: CallNow | None = attrs.field(default=None, eq=False, repr=False)
    list_hints: Mapping[str, tuple[int | None, str | None]] = attrs.field(factory=dict, eq=False)


@attrs.frozen(slots=True)
class BackendLost:
    """Backend -> Catalog: a ready run has ended (its process died, hung, or its legacy lane did); its calls
    are answered only once the catalog has published a view without its entries and set `published`, so a
    client told its call failed never lists the dead backend's tools. The supervisor's event follows."""

    name: str
    error: BaseException = attrs.field(eq=False)
    published: trio.Event = attrs.field(eq=False, repr=False, factory=trio.Event)


@attrs.frozen(slots=True)
class BackendEvent:
    """Backend -> every session (through a Broadcast): a notification that is not about one call, such as
    notifications/message or notifications/resources/updated. Each session decides whether it is its."""

    backend: str
    notification: Notification


@attrs.frozen(slots=True)
class CatalogChanged:
    """Catalog (through its Watch) -> a session's mailbox: a newer catalog version exists."""


# What a session's one mailbox holds: everything that comes to it unasked.
Mail = ToClient | BackendEvent | CatalogChanged


@attrs.frozen(slots=True)
class ListChanged:
    """Backend -> Catalog: one of the backend's lists (tools, prompts, resources, templates) changed,
    after its list_changed notification and a fresh listing."""

    name: str
    kind: str
    items: tuple[dict[str, Any], ...]
    hint: tuple[int | None, str | None] = (None, None)  # ttlMs and cacheScope the listing came with
    # False: a listing the gateway made to check (the fleet caught up after Redis was away), news to the
    # clients only when the list differs; True: the server (here or on another replica) said it changed
    announced: bool = True
