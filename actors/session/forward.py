"""Forwarding a client's request to the backend that owns it, under the backend's own names and ids.

Two ways, one result. `now`: the dispatcher puts the Call in the backend's inbox (or, when the backend actor
is idle, writes it itself: backends/door.py) and goes on; the backend's connection answers the request's
InFlight entry, which answers the client (a task only when the backend's inbox is full). `wait`: a task
that needs the answer itself (middleware around a call, a batch, a subscription) awaits it. Either way the
backend's connection sweeps the timeout, and a client's cancel reaches the backend at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import attrs
import trio

from actors.catalog import BackendStatus, CatalogView
from actors.policy import Target
from actors.protocol.envelopes import Call, Cancel, Mail, MailTarget, Reply, ReplySlot, answer, next_call_id
from actors.protocol.eras import ModernEnvelope
from actors.protocol.errors import BACKEND_UNAVAILABLE, rpc_error, timed_out, unavailable
from actors.protocol.messages import ErrorResponse, Message, Params, RequestId, Response, RpcError
from actors.protocol.modern_results import legacy_result
from actors.protocol.on_behalf import OnBehalf
from actors.protocol.trace_context import CALLS_THAT_ASK, with_trace
from actors.runtime.watch import Watch
from actors.session.backend_commands import BackendCommands
from actors.session.fields import progress_token
from actors.session.inflight import InFlight, Rewrite
from actors.session.parked import Bridges
from actors.session.results import ResultShaper, Shape

if TYPE_CHECKING:
    from actors.telemetry.tracing import CallSpan, Tracing

SHUTTING_DOWN: Final = rpc_error(BACKEND_UNAVAILABLE, "the gateway is shutting down")
ASK_CAPABILITIES: Final = frozenset({"sampling", "elicitation", "roots"})  # what a backend may ask a client


@attrs.frozen(slots=True)
class Forward:
    """A handler's decision: this request goes to `backend` as `method` with `params`."""

    backend: BackendStatus
    method: str
    params: Params
    rewrite: Rewrite | None = None  # applied to a successful result (a resource's URI as the client wrote it)
    target: Target | None = None  # what the [policy] judged: each later round of the call is judged again


@attrs.define(kw_only=True)
class Forwarder:
    """Owns: the session's queue of commands for backends whose inbox is full (BackendCommands).
    Receives: Forward decisions from the dispatcher, cancels of forwarded calls.
    Sends: Calls, Cancels and Notifies to backends' inboxes.
    Stops when: the session ends (`flush` sends the cancels still queued).
    Errors: a backend that went down as the call was sent answers it as unavailable, naming the backend."""

    session: str
    catalog: Watch[CatalogView]
    outbox: trio.MemorySendChannel[Message]  # where progress for the client's token goes
    asks_to: trio.MemorySendChannel[Mail] | None  # the session's mailbox: backends' requests for its client
    commands: BackendCommands = attrs.field(factory=BackendCommands)
    background: trio.Nursery | None = None  # set by the dispatcher: where queued commands and late sends run
    envelope: ModernEnvelope | None = None  # the legacy session's client, as modern backends are told of it
    bridges: Bridges = attrs.field(factory=Bridges)  # where modern calls that may need input are parked
    subject: str | None = None  # the client's token subject: a parked call's principal
    bound: str | None = None  # the session the states handed out are good in (None: a stateless request)
    tracing: Tracing | None = None  # each hop's CLIENT span, when tracing is on
    # what its calls carry for backends' credentials (the caller's token, forwardable headers): the
    # request's own (an HTTP POST's, by the client's request id), else the connection's
    on_behalf: OnBehalf | None = None
    on_behalf_of: Callable[[RequestId], OnBehalf | None] | None = None
    results: ResultShaper | None = None  # what a tools/call's result may bring to the client

    def call_for(
        self, forward: Forward, reply_to: InFlight | ReplySlot, entry: InFlight | None
    ) -> Call | RpcError:
        """The Call to send; or, for a modern call that may need input when its client or session has as many
        bridged as it may, the refusal: such a call never goes out unbridged (its state would be unsealed)."""
        token, call_id = progress_token(forward.params), next_call_id()
        modern = entry.modern if entry is not None else None
        shape = self._shape(forward)
        notify_to = self.outbox if token is not None else None
        carried = self._carried(entry)
        if modern is None:
            reply: ReplySlot = reply_to  # type: ignore[assignment]  # an InFlight is a reply-to too
            params, trace, span = self._params(forward, call_id, token, entry)
            return Call(
                call_id, forward.method, params, self.session, reply, notify_to, token, self.asks_to, None,
                self.envelope, from_legacy=True, trace=trace, span=span, on_behalf=carried, shape=shape,
            )  # fmt: skip
        # A modern call's asks never reach the client as requests: a call that may need input is bridged
        # (its bridge is the reply-to and gets the asks), another one's asks are refused. The backend's logs
        # reach it alone.
        bridged = self.bridges.open_for(modern, self.subject, reply_to, self.session, self.bound)
        if isinstance(bridged, RpcError):
            return bridged
        asks_to: MailTarget = bridged if bridged is not None else modern.asks
        params, trace, span = self._params(forward, call_id, token, entry)
        call = Call(
            call_id, forward.method, params, self.session, bridged or reply_to, notify_to, token, asks_to,  # type: ignore[arg-type]
            modern.log, modern.envelope, own_asks=True, trace=trace,
            input_responses=modern.responses if modern.state is None and modern.responses else None,
            span=span, on_behalf=carried, shape=shape,
        )  # fmt: skip
        if bridged is not None:
            bridged.backend, bridged.call_id, bridged.tracing = forward.backend, call_id, self.tracing
            if entry is not None:
                entry.bridge = bridged
        return call

    def _shape(self, forward: Forward) -> Shape | None:
        """A tools/call's result shape (output limits, public URIs); None for any other request, or when
        there is nothing to shape."""
        if self.results is None or forward.method != "tools/call":
            return None
        own = forward.params.get("name")
        own = own if isinstance(own, str) else ""
        public = forward.target.tool if forward.target is not None and forward.target.tool else own
        return self.results.for_call(forward.backend.name, own, public)

    def _carried(self, entry: InFlight | None) -> OnBehalf | None:
        """What a call carries on its caller's behalf: its request's (an HTTP POST's), else the session's."""
        if self.on_behalf_of is not None and entry is not None:
            found = self.on_behalf_of(entry.request_id)
            if found is not None:
                return found
        return self.on_behalf

    def _params(
        self, forward: Forward, call_id: int, token: RequestId | None, entry: InFlight | None
    ) -> tuple[Params, str | None, CallSpan | None]:
        """The params a backend gets (a trace context of its own in `_meta` when its client may be asked or
        tracing is on, its progress token the call's id),
        the trace id its asks will name it by, and its hop's span when tracing is on."""
        span: CallSpan | None = None
        if self.tracing is None:
            params, trace = forward.params, None
            modern = entry.modern if entry is not None else None
            if modern is not None or self.may_be_asked():  # what its backend asks while serving it names it
                params, trace = with_trace(forward.method, params)
        else:  # the hop's span, a child of the request's: its context in _meta names the call as well
            parent = entry.span if entry is not None else None
            span, params = self.tracing.client(
                parent, call_id, forward.method, forward.params, forward.backend.name
            )
            trace = span.trace_id() if forward.method in CALLS_THAT_ASK else None
        if token is not None:
            params = {**params, "_meta": {**params["_meta"], "progressToken": call_id}}
        return params, trace, span

    def may_be_asked(self) -> bool:
        """The legacy session's client declared something a backend may ask it (sampling, elicitation,
        roots), or is not known yet. Only then does its call get a trace context of its own: a call whose
        client can be asked nothing needs no name for asks (any ask of it is refused, and ask_owner.py never
        hands a request without a trace to one of two clients), and a traceparent in `_meta` costs an SDK
        backend its trace-context extraction on every call (the Python SDK's: ~95 µs of CPU and ~180 µs of
        latency per call, measured; issue #27)."""
        envelope = self.envelope
        return envelope is None or not ASK_CAPABILITIES.isdisjoint(envelope.client_capabilities)

    def now(self, entry: InFlight, forward: Forward) -> None:
        """Put the call in the backend's inbox and go on; the backend answers `entry`."""
        entry.rewrite, entry.forward = forward.rewrite, forward
        call = self.call_for(forward, entry, entry)
        if isinstance(call, RpcError):
            entry.fill(Reply(error=call))
            return
        calls, call_now = forward.backend.calls, forward.backend.call_now
        assert calls is not None and self.background is not None
        if not self.commands.holds(calls):
            if call_now is not None and call_now(call):  # the backend actor was idle: written already
                entry.forwarded = (forward.backend, call.call_id)
                return
            try:
                calls.send_nowait(call)
            except trio.WouldBlock:
                pass
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                answer(call, Reply(error=self.gone(forward.backend)))
                return
            else:
                entry.forwarded = (forward.backend, call.call_id)
                return
        entry.scope = trio.CancelScope()
        self.background.start_soon(self._send_when_room, entry, forward.backend, call)

    async def _send_when_room(self, entry: InFlight, backend: BackendStatus, call: Call) -> None:
        assert entry.scope is not None
        with entry.scope:
            error = await self._send(backend, call)
            if error is not None:
                answer(call, Reply(error=error))
                return
            if not entry.done:
                entry.forwarded = (backend, call.call_id)
                entry.scope = None
            return
        answer(call, Reply(error=SHUTTING_DOWN))  # stopped before the backend had it: nothing to cancel

    async def wait(self, forward: Forward, request_id: RequestId, entry: InFlight | None) -> Message:
        """Forward and wait for the answer (in the request's task)."""
        backend, slot = forward.backend, ReplySlot()
        call = self.call_for(forward, slot, entry)
        if isinstance(call, RpcError):
            return ErrorResponse(request_id, call)
        sent = False  # in the backend's inbox: from then on, giving up on it means telling the backend
        try:
            error = await self._send(backend, call)
            if error is not None:
                answer(call, Reply(error=error))  # its hop ends here (nobody waits on its slot)
                return ErrorResponse(request_id, error)
            sent = True
            if entry is not None:
                entry.forwarded = (backend, call.call_id)
            reply = await slot.wait()
        except trio.Cancelled:
            if sent and (entry is None or entry.forwarded is not None):  # no client cancel told it yet
                self.cancel(backend, call.call_id, "the gateway is shutting down")
            raise
        finally:
            if entry is not None:
                entry.forwarded = None
        if reply.error is not None:
            return ErrorResponse(request_id, reply.error)
        result = (
            reply.result if entry is not None and entry.modern is not None else legacy_result(reply.result)
        )
        if forward.rewrite is not None and isinstance(result, dict):
            result = forward.rewrite(result)
        return Response(request_id, result)

    async def _send(self, backend: BackendStatus, call: Call) -> RpcError | None:
        """Put a call in a full backend inbox, behind the commands queued there. A backend that takes nothing
        (it stopped reading its input, say) times the call out as the sweep would once it had it."""
        assert backend.calls is not None
        with trio.move_on_after(backend.request_timeout_s):
            try:
                await self.commands.call(backend.calls, call)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return self.gone(backend)
            return None
        return timed_out(backend.name, call.method, backend.request_timeout_s)

    def gone(self, backend: BackendStatus) -> RpcError:
        now = self.catalog.value.backends.get(backend.name, backend)
        reason = f"it is {now.describe()}" if now.reason else "it went down as the call was sent"
        return unavailable(backend.name, reason)

    def cancel(self, backend: BackendStatus, call_id: int, reason: str) -> None:
        assert backend.calls is not None
        self.commands.send(backend.calls, Cancel(call_id, reason), self.background)

    def stop(self, entry: InFlight, reason: str) -> None:
        """Give up on a request now: the backend is told (if it has the call), a bridged call it is a request
        of ends (session/bridge.py), and the entry is answered with SHUTTING_DOWN unless the client cancelled
        it. A task serving it is cancelled and answers itself."""
        self.abandon(entry, reason)
        if entry.scope is not None:
            entry.scope.cancel()
        else:
            entry.fill(Reply(error=SHUTTING_DOWN))

    def abandon(self, entry: InFlight, reason: str) -> None:
        """The backend stops working on the request's call (if it has it), and a bridged call the request is
        of ends: the client gave it up, so nothing of it is kept for a retry."""
        bridge, entry.bridge = entry.bridge, None
        if entry.forwarded is not None:
            self.cancel(*entry.forwarded, reason)
            entry.forwarded = None
        elif bridge is not None and bridge.backend is not None and bridge.call_id and not bridge.closed:
            self.cancel(bridge.backend, bridge.call_id, reason)
        if bridge is not None:
            bridge.close(reason)
