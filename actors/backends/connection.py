"""One run of a backend connection: the transport, the in-flight table, and the frames read from it.

Transport-agnostic: a stdio process, a WebSocket or an HTTP backend share this code. The in-flight table maps
backend-side id -> Call, and is the only one a call is in: every Call put in it is answered exactly once,
straight to its `reply_to` (a session's table entry, which puts the answer in that session's outbox), by the
backend's response, by the sweep when its request_timeout_s has passed, or by `fail_all` when the run ends.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

import attrs
import orjson
import trio
from loguru import logger

from actors.backends.client_requests import ClientRequests
from actors.backends.era import stamped
from actors.backends.errors import BackendError, BackendExitedError, redacted
from actors.backends.input import progress_params
from actors.backends.round_roots import answered_by_config
from actors.catalog.clients import ClientDirectory
from actors.framing.burst import close_burst
from actors.framing.transport import Transport
from actors.protocol import codec
from actors.protocol.codec import clip, shown
from actors.protocol.envelopes import Call, Cancel, Reply, ReplySlot, answer, next_call_id
from actors.protocol.eras import ModernEnvelope
from actors.protocol.errors import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    URL_ELICITATION_REQUIRED,
    InexactIntegerError,
    MessageError,
    MessageTooLargeError,
    timed_out,
    unavailable,
)
from actors.protocol.messages import (
    Batch,
    ErrorResponse,
    Message,
    Notification,
    Request,
    Response,
    RpcError,
)
from actors.protocol.modern_results import CacheHint
from actors.runtime.log import RateLimiter
from actors.telemetry.meters import BackendMeter

GARBAGE_LOG_RATE: Final = 5.0  # dropped-frame warnings per second, per backend
CLIENT_METHODS: Final = frozenset({"sampling/createMessage", "elicitation/create", "roots/list"})


class BackendRequestError(BackendError):
    """The backend answered one of the gateway's own requests with a JSON-RPC error."""

    def __init__(self, method: str, error: RpcError) -> None:
        super().__init__(f"{method} failed: {clip(error.message)} (code {error.code})")
        self.error = error


@attrs.define(kw_only=True)
class BackendLink:
    """Owns: one run's transport (writes to it, reads it in `read`), its in-flight table and its deadlines.
    Receives: Calls and Cancels from the backend actor (`frame_for`, `cancel_frame`); frames from the backend.
    Sends: each call's one Reply to its reply_to; progress to the caller's session; notifications the link
        does not handle to `on_notification`; requests for a client to its ClientRequests.
    Stops when: the transport ends, or `lose` is called (which tells `on_lost`, when set, instead of
        cancelling); the backend actor then calls `fail_all`.
    Errors: what the backend sends is checked where it enters: a frame that is not JSON-RPC is dropped and
        logged (rate-limited); a call it does not answer within request_timeout_s gets REQUEST_TIMEOUT and the
        backend a notifications/cancelled."""

    name: str
    transport: Transport
    on_notification: Callable[[Notification], None]
    cancel_scope: trio.CancelScope
    request_timeout_s: float = math.inf  # a client's call unanswered that long is answered by the sweep
    inflight: dict[int, Call] = attrs.field(factory=dict)
    list_hints: dict[str, CacheHint] = attrs.field(factory=dict)  # kind -> what its last listing said
    lost: BackendError | None = None
    clients: ClientDirectory | None = None  # sessions a request for the client may go to
    roots: str | tuple[str, ...] = "client"  # who answers its roots/list: nobody, the one client, the config
    roots_chosen: bool = True  # the config named them (not the default): a modern call's asks, too
    # a modern backend's: the gateway's own envelope, in the _meta of every request not for a client's call
    envelope: ModernEnvelope | None = None
    # the owner's, once the link is lost: it cancels `cancel_scope` itself, when it has done what comes first
    on_lost: Callable[[], None] | None = None
    # an error answer to take before its caller gets it; True when taken (and answered) there
    on_error: Callable[[Call, RpcError], bool] | None = None
    meter: BackendMeter = attrs.field(factory=lambda: BackendMeter("-"))  # the backend's, across runs
    # the id of the call on whose response stream a request of the backend came (HTTP), else None
    stream_of: Callable[[object], object] | None = None
    client_requests: ClientRequests = attrs.field(init=False)
    # call id -> deadline of the calls the sweep answers, oldest first: one timeout for every call, so
    # insertion order is deadline order and the sweep looks only at the front
    _deadlines: dict[int, float] = attrs.field(factory=dict)
    _sweep: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    _garbage: RateLimiter = attrs.field(factory=lambda: RateLimiter(GARBAGE_LOG_RATE))

    def __attrs_post_init__(self) -> None:
        self.client_requests = ClientRequests(self, self.clients, self.roots)

    def lose(self, error: BackendError) -> None:
        """End this run: remember the first reason and cancel the run's scope, or, with `on_lost`, have its
        owner end it (which answers the calls in flight once the catalog no longer lists the backend)."""
        if self.lost is None:
            self.lost = error
        if self.on_lost is not None:
            self.on_lost()
        else:
            self.cancel_scope.cancel()

    def fail_all(self, reason: str) -> None:
        """Answer every call still in flight with an error naming this backend, and withdraw its requests
        to clients. Synchronous: nothing can slip in between."""
        calls, self.inflight = self.inflight, {}
        deadlines, self._deadlines = self._deadlines, {}
        error = unavailable(self.name, reason)
        for call in calls.values():
            if call.span is not None:
                call.span.event("mcp.gateway.backend_down", {"reason": reason})
            self._answered(call, error, deadlines.get(call.call_id))
            answer(call, Reply(error=error))
        self.client_requests.withdraw_all(reason)

    async def send(self, message: Request | Notification | Response | ErrorResponse) -> None:
        await self.send_frames([codec.encode(message)])

    async def send_frames(self, frames: list[bytes]) -> None:
        self.meter.bytes_out += sum(map(len, frames))
        try:
            await self.transport.send_many(frames)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.lose(BackendExitedError(f"connection lost while writing: {exc or type(exc).__name__}"))
            await trio.sleep_forever()  # the scope is cancelled; this only waits for it

    def frame_for(self, call: Call, *, timed: bool = True) -> bytes:
        """The request frame of a call, which is in flight from now on (see `track`)."""
        self.track(call, timed=timed)
        return request_frame(call, self.envelope)

    def track(self, call: Call, *, timed: bool = True) -> None:
        """The call is in flight from now on (and, `timed`, answered by the sweep if the backend has not
        answered it within request_timeout_s)."""
        self.inflight[call.call_id] = call
        if timed and self.request_timeout_s < math.inf:
            deadline = trio.current_time() + self.request_timeout_s
            if self._sweep.deadline == math.inf:  # else the sweep wakes no later than this call's deadline
                self._sweep.deadline = deadline
            self._deadlines[call.call_id] = deadline

    def inflight_call(self, call_id: object) -> Call | None:
        """The call in flight under `call_id`, if any (an HTTP transport asks whom a request is for)."""
        return self.inflight.get(call_id) if _is_call_id(call_id) else None  # type: ignore[call-overload]

    def cancel_frame(self, cancel: Cancel) -> bytes | None:
        """The notifications/cancelled frame for a call still in flight (which is forgotten), else None."""
        call = self._forget(cancel.call_id)
        if call is None:
            return None
        self.client_requests.given_up(call)  # the backend may go on with it a while
        if call.span is not None:
            call.span.cancelled(cancel.reason)
        return _cancelled(cancel.call_id, cancel.reason)

    def _forget(self, call_id: object) -> Call | None:
        """Take a call out of the in-flight table (it is being answered or cancelled)."""
        if not _is_call_id(call_id):
            return None
        self._deadlines.pop(call_id, None)  # type: ignore[call-overload]
        call = self.inflight.pop(call_id, None)  # type: ignore[call-overload]
        if call is not None and call.trace is not None:
            self.client_requests.call_ended(call)
        return call

    async def sweep(self) -> None:
        """One timer for every call: wakes at the oldest call's deadline, answers the calls past theirs with
        REQUEST_TIMEOUT, and tells the backend it may stop working on them."""
        while True:
            with self._sweep:
                await trio.sleep_forever()
            now, frames = trio.current_time(), []
            while self._deadlines:
                call_id, deadline = next(iter(self._deadlines.items()))
                if deadline > now:
                    break
                del self._deadlines[call_id]
                call = self.inflight.pop(call_id)
                self.client_requests.call_ended(call)
                self.client_requests.given_up(call)
                error = timed_out(self.name, call.method, self.request_timeout_s)
                self._answered(call, error, deadline)
                answer(call, Reply(error=error))
                frames.append(_cancelled(call_id, f"no answer within {self.request_timeout_s}s"))
            self._sweep = trio.CancelScope(deadline=deadline if self._deadlines else math.inf)
            if frames:
                await self.send_frames(frames)

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """The gateway's own request to this backend; returns the result or raises BackendRequestError."""
        call = Call(next_call_id(), method, params, "gateway", ReplySlot())
        await self.send_frames([self.frame_for(call, timed=False)])  # its caller bounds the wait
        try:
            reply = await call.reply_to.wait()  # type: ignore[union-attr]
        finally:
            self.inflight.pop(call.call_id, None)
        if reply.error is not None:
            raise BackendRequestError(method, reply.error)
        return reply.result

    async def read(self, nursery: trio.Nursery) -> None:
        """Read frames until the stream ends, then lose the link. Nothing here waits but the next read, so
        the answers of one read go out together (framing/burst.py)."""
        try:
            await self._read(nursery)
        finally:
            close_burst()

    async def _read(self, nursery: trio.Nursery) -> None:
        while True:
            try:
                frame = await self.transport.receive()
            except MessageTooLargeError as exc:
                self._too_large(exc)
                continue
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                frame = None
            if frame is None:
                if self.on_lost is None:  # else its owner answers them, when it ends the run
                    self.fail_all("its connection closed")
                self.lose(BackendExitedError("connection closed"))
                return
            self.meter.bytes_in += len(frame)
            plain = codec.plain_answer(frame)  # nearly every frame: an answer, its result's bytes kept
            if plain is not None:
                self._settle(plain[0], Reply(result=plain[1], raw=plain[2]), nursery)
                del frame, plain  # not held while the next frame is awaited (a big answer is freed now)
                continue
            try:
                message = codec.decode(frame)
            except InexactIntegerError as exc:
                self._inexact(exc, nursery)
                continue
            except MessageError as exc:
                self.drop(f"dropped a frame that is not JSON-RPC ({clip(str(exc))}): {shown(frame)}")
                continue
            if type(message) is Response:  # an answer, nearly every frame: what _dispatch does with it
                self._settle(message.id, Reply(result=message.result), nursery)
                continue
            self._dispatch_any(message, nursery)

    def _dispatch_any(self, message: Message, nursery: trio.Nursery) -> None:
        if isinstance(message, Batch):
            self.drop("dropped a JSON-RPC batch: backends must send one message per line")
            return
        self._dispatch(message, nursery)

    def _dispatch(
        self, message: Request | Notification | Response | ErrorResponse, nursery: trio.Nursery
    ) -> None:
        # the call on whose response stream a request came, told once, whatever the request (HTTP)
        streamed_on = self.stream_of(message.id) if self.stream_of and isinstance(message, Request) else None
        match message:
            case Response(id=request_id, result=result):
                self._settle(request_id, Reply(result=result), nursery)
            case ErrorResponse(id=request_id, error=error):
                self._settle(request_id, Reply(error=redacted(error)))  # its text may go to a client, a log
            case Notification(method="notifications/progress", params=params):
                self._progress(params)
            case Notification(method="notifications/cancelled", params=params):
                self.client_requests.withdraw(params)
            case Notification(method="notifications/elicitation/complete", params=params):
                self.client_requests.elicitation_complete(params)
            case Notification():
                self.on_notification(message)
            case Request(id=request_id, method="ping"):
                nursery.start_soon(self.send, Response(request_id, {}))
            case Request(method=method) if method in CLIENT_METHODS:
                self.client_requests.take(message, nursery, streamed_on)
            case Request(id=request_id, method=method):
                error = RpcError(METHOD_NOT_FOUND, f"the gateway does not forward {clip(method)} to clients")
                nursery.start_soon(self.send, ErrorResponse(request_id, error))

    def _settle(
        self, request_id: int | str | None, reply: Reply, nursery: trio.Nursery | None = None
    ) -> None:
        deadline = self._deadlines.get(request_id)  # type: ignore[arg-type]  # a timed call's: a client's
        call = self._forget(request_id)
        if call is None:
            self.client_requests.answered_late(request_id)  # a call given up: done at the backend now
            self.drop(f"dropped a response to unknown or cancelled request id {shown(request_id)}")
            return
        if reply.error is None and not isinstance(reply.result, dict):  # every MCP result is an object
            self.drop(f"answered {call.method} with a result that is not an object: {shown(reply.result)}")
            message = f"backend '{self.name}' answered {call.method} with a result that is not an object"
            reply = Reply(error=RpcError(INTERNAL_ERROR, message, {"backend": self.name}))
        if reply.error is not None and self.on_error is not None and self.on_error(call, reply.error):
            return
        if nursery is not None:  # a modern backend's round: roots by config
            taken = answered_by_config(self, call, reply)
            if isinstance(taken, Call):  # roots were all it asked: called again at once
                self.track(taken)
                nursery.start_soon(self.send_frames, [request_frame(taken, self.envelope)])
                return
            reply = taken
        self._answered(call, reply.error, deadline)
        if reply.error is not None and reply.error.code == URL_ELICITATION_REQUIRED and call.asks_to:
            # The client is to open a URL; the backend's notice that it is done goes to the same session.
            data = reply.error.data if isinstance(reply.error.data, dict) else {}
            elicitations = data.get("elicitations")
            for elicitation in elicitations if isinstance(elicitations, list) else ():
                if isinstance(elicitation, dict):
                    self.client_requests.remember_elicitation(elicitation.get("elicitationId"), call.asks_to)
        answer(call, reply)

    def _answered(self, call: Call, error: RpcError | None, deadline: float | None) -> None:
        """Count the answer to a client's call: a timed one (the gateway's own requests are not)."""
        if deadline is not None:
            self.meter.answered(call, error, deadline - self.request_timeout_s)

    def _inexact(self, exc: InexactIntegerError, nursery: trio.Nursery) -> None:
        """A frame with an integer outside 64 bits: an answer fails its call with the reason, a request is
        refused to the backend; nothing is passed on rounded."""
        self.drop(f"refused a frame: {exc}")
        if exc.request_id is None:
            return
        if not exc.response:
            nursery.start_soon(self.send, ErrorResponse(exc.request_id, exc.error))
            return
        call = self._forget(exc.request_id)
        if call is not None:
            message = f"backend '{self.name}' answered {call.method}: {exc.reason}"
            answer(call, Reply(error=RpcError(INTERNAL_ERROR, message, {"backend": self.name})))

    def _too_large(self, exc: MessageTooLargeError) -> None:
        """A response too large to take answers its caller with an error; anything else is dropped."""
        call = self._forget(exc.request_id)
        if call is None:
            self.drop(f"dropped a frame: {exc}")
            return
        logger.warning("answer to {} was too large: {}", call.method, exc)
        message = f"backend '{self.name}' answered {call.method} with a {exc}"
        data = {"backend": self.name, "size": exc.size, "limit": exc.limit}
        answer(call, Reply(error=RpcError(INTERNAL_ERROR, message, data)))

    def _progress(self, params: Any) -> None:
        """Progress goes back to the session whose call it is, under the token that session chose."""
        token = params.get("progressToken") if isinstance(params, dict) else None
        call = self.inflight.get(token) if _is_call_id(token) else None  # type: ignore[arg-type]
        if call is None or call.notify_to is None or call.progress_token is None:
            self.drop(f"dropped progress for unknown token {shown(token)}")
            return
        clean = progress_params(params, call.progress_token)
        if clean is None:
            self.drop(f"dropped malformed progress: {shown(params)}")
            return
        try:
            call.notify_to.send_nowait(Notification("notifications/progress", clean))
        except trio.WouldBlock:
            logger.debug("session={} is not keeping up; dropped a progress notification", call.session)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    def drop(self, text: str, level: str = "WARNING") -> None:
        """Log what was dropped or refused of what the backend sent, rate-limited."""
        self._garbage.log(level, "{}", text)


def request_frame(call: Call, envelope: ModernEnvelope | None = None) -> bytes:
    """The frame a backend gets for a call: the request under the call's gateway-wide id; for a modern
    backend (`envelope`, the gateway's), with whom it is for in _meta: the call's client, else the gateway."""
    if envelope is None:  # what codec.encode(Request(...)) writes, without the Request (every call's path)
        wire: dict[str, Any] = {"jsonrpc": codec.JSONRPC, "id": call.call_id, "method": call.method}
        if call.params is not None:
            wire["params"] = call.params
        return orjson.dumps(wire)
    params = stamped(call.params, call.envelope or envelope)
    if call.input_responses and "inputResponses" not in params:
        params["inputResponses"] = call.input_responses  # a fresh call's answers given ahead (SEP-2322)
    return codec.encode(Request(call.call_id, call.method, params))


def _is_call_id(value: object) -> bool:
    """An id the gateway could have given one of its requests (an int, never a bool)."""
    return type(value) is int


def _cancelled(call_id: int, reason: str) -> bytes:
    return codec.encode(Notification("notifications/cancelled", {"requestId": call_id, "reason": reason}))
