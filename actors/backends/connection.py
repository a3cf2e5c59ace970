"""One run of a backend connection: the transport, the in-flight table, and the frames read from it.

Transport-agnostic: a stdio process, and later a WebSocket or HTTP backend, share this code. The in-flight
table maps backend-side id -> Call; every Call put in it is answered exactly once, by the backend's response
or by `fail_all` when the run ends.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import unquote, urlsplit

import attrs
import trio
from loguru import logger

from actors.backends.input import elicitation_problem, is_name, progress_params
from actors.catalog.clients import ClientDirectory
from actors.framing.transport import Transport
from actors.protocol import codec
from actors.protocol.codec import clip, is_id, shown
from actors.protocol.envelopes import Ask, Call, Cancel, Mail, Reply, ReplySlot, Withdraw, next_call_id
from actors.protocol.errors import (
    BACKEND_UNAVAILABLE,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    URL_ELICITATION_REQUIRED,
    BackendError,
    BackendExitedError,
    MessageError,
    MessageTooLargeError,
)
from actors.protocol.messages import (
    Batch,
    ErrorResponse,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    RpcError,
)
from actors.runtime.log import RateLimiter

GARBAGE_LOG_RATE: Final = 5.0  # dropped-frame warnings per second, per backend
CLIENT_METHODS: Final = frozenset({"sampling/createMessage", "elicitation/create", "roots/list"})
MAX_ELICITATIONS: Final = 1024  # URL elicitations remembered per run, awaiting their completion notice


class BackendRequestError(BackendError):
    """The backend answered one of the gateway's own requests with a JSON-RPC error."""

    def __init__(self, method: str, error: RpcError) -> None:
        super().__init__(f"{method} failed: {clip(error.message)} (code {error.code})")
        self.error = error


def unavailable(backend: str, reason: str) -> RpcError:
    return RpcError(
        BACKEND_UNAVAILABLE,
        f"backend '{backend}' is unavailable: {reason}",
        {"backend": backend, "reason": reason},
    )


def answer(call: Call | Ask, reply: Reply) -> None:
    """Deliver the one reply of a call (or of a backend's request for a client). Never blocks."""
    call.reply_to.fill(reply)


@attrs.define
class BackendLink:
    name: str
    transport: Transport
    on_notification: Callable[[Notification], None]
    cancel_scope: trio.CancelScope
    inflight: dict[int, Call] = attrs.field(factory=dict)
    lost: BackendError | None = None
    clients: ClientDirectory | None = None  # sessions a request for the client may go to
    roots: str | tuple[str, ...] = "client"  # who answers its roots/list: nobody, the one client, the config
    asked_roots: bool = False  # it has asked for roots in this run, so it wants to hear of changes
    _asked: dict[RequestId, tuple[int, trio.MemorySendChannel[Mail], trio.CancelScope]] = attrs.field(
        factory=dict
    )
    _elicitations: OrderedDict[str, trio.MemorySendChannel[Mail]] = attrs.field(factory=OrderedDict)
    _garbage: RateLimiter = attrs.field(factory=lambda: RateLimiter(GARBAGE_LOG_RATE))

    def lose(self, error: BackendError) -> None:
        """End this run: remember the first reason and cancel the run's scope."""
        if self.lost is None:
            self.lost = error
        self.cancel_scope.cancel()

    def fail_all(self, reason: str) -> None:
        """Answer every call still in flight with an error naming this backend, and withdraw its requests
        to clients. Synchronous: nothing can slip in between."""
        calls, self.inflight = self.inflight, {}
        error = unavailable(self.name, reason)
        for call in calls.values():
            answer(call, Reply(error=error))
        asked, self._asked = self._asked, {}
        for ask_id, target, _ in asked.values():  # its questions to clients will never be wanted now
            with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                target.send_nowait(Withdraw(ask_id, f"backend '{self.name}' is unavailable: {reason}"))

    async def send(self, message: Request | Notification | Response | ErrorResponse) -> None:
        await self.send_frames([codec.encode(message)])

    async def send_frames(self, frames: list[bytes]) -> None:
        try:
            await self.transport.send_many(frames)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.lose(BackendExitedError(f"connection lost while writing: {exc or type(exc).__name__}"))
            await trio.sleep_forever()  # the scope is cancelled; this only waits for it

    async def forward(self, call: Call) -> None:
        await self.send_frames([self.frame_for(call)])

    def frame_for(self, call: Call) -> bytes:
        """The request frame of a call, which is in flight from now on."""
        self.inflight[call.call_id] = call
        return codec.encode(Request(call.call_id, call.method, call.params))

    def cancel_frame(self, cancel: Cancel) -> bytes | None:
        """The notifications/cancelled frame for a call still in flight (which is forgotten), else None."""
        if self.inflight.pop(cancel.call_id, None) is None:
            return None
        params = {"requestId": cancel.call_id, "reason": cancel.reason}
        return codec.encode(Notification("notifications/cancelled", params))

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """The gateway's own request to this backend; returns the result or raises BackendRequestError."""
        call = Call(next_call_id(), method, params, "gateway", ReplySlot())
        await self.forward(call)
        try:
            reply = await call.reply_to.wait()
        finally:
            self.inflight.pop(call.call_id, None)
        if reply.error is not None:
            raise BackendRequestError(method, reply.error)
        return reply.result

    async def read(self, nursery: trio.Nursery) -> None:
        """Read frames until the stream ends, then lose the link."""
        while True:
            try:
                frame = await self.transport.receive()
            except MessageTooLargeError as exc:
                self._too_large(exc)
                continue
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                frame = None
            if frame is None:
                self.fail_all("its connection closed")
                self.lose(BackendExitedError("connection closed"))
                return
            try:
                message = codec.decode(frame)
            except MessageError as exc:
                self.drop(f"dropped a frame that is not JSON-RPC ({clip(str(exc))}): {shown(frame)}")
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
        match message:
            case Response(id=request_id, result=result):
                self._settle(request_id, Reply(result=result))
            case ErrorResponse(id=request_id, error=error):
                self._settle(request_id, Reply(error=error))
            case Notification(method="notifications/progress", params=params):
                self._progress(params)
            case Notification(method="notifications/cancelled", params=params):
                self._withdraw(params)
            case Notification(method="notifications/elicitation/complete", params=params):
                self._elicitation_complete(params)
            case Notification():
                self.on_notification(message)
            case Request(id=request_id, method="ping"):
                nursery.start_soon(self.send, Response(request_id, {}))
            case Request(method="roots/list"):
                self._answer_roots(message, nursery)
            case Request(method=method) if method in CLIENT_METHODS:
                self._ask_client(message, nursery)
            case Request(id=request_id, method=method):
                error = RpcError(METHOD_NOT_FOUND, f"the gateway does not forward {clip(method)} to clients")
                nursery.start_soon(self.send, ErrorResponse(request_id, error))

    def _settle(self, request_id: int | str | None, reply: Reply) -> None:
        call = self.inflight.pop(request_id, None) if _is_call_id(request_id) else None
        if call is None:
            self.drop(f"dropped a response to unknown or cancelled request id {shown(request_id)}")
            return
        if reply.error is None and not isinstance(reply.result, dict):  # every MCP result is an object
            self.drop(f"answered {call.method} with a result that is not an object: {shown(reply.result)}")
            message = f"backend '{self.name}' answered {call.method} with a result that is not an object"
            reply = Reply(error=RpcError(INTERNAL_ERROR, message, {"backend": self.name}))
        if reply.error is not None and reply.error.code == URL_ELICITATION_REQUIRED and call.asks_to:
            # The client is to open a URL; the backend's notice that it is done goes to the same session.
            data = reply.error.data if isinstance(reply.error.data, dict) else {}
            elicitations = data.get("elicitations")
            for elicitation in elicitations if isinstance(elicitations, list) else ():
                if isinstance(elicitation, dict):
                    self._remember_elicitation(elicitation.get("elicitationId"), call.asks_to)
        answer(call, reply)

    def _too_large(self, exc: MessageTooLargeError) -> None:
        """A response too large to take answers its caller with an error; anything else is dropped."""
        call = self.inflight.pop(exc.request_id, None) if _is_call_id(exc.request_id) else None
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

    # -- requests from the backend for a client ---------------------------------------------------------

    def _addressee(self, method: str) -> tuple[trio.MemorySendChannel[Mail] | None, str]:
        """The session a backend's request is for. roots/list: only a session that is alone, since the
        backend's roots are every session's. Else the one whose calls are in flight here; with none, the only
        session connected. Never a guess between two sessions: a sampling or elicitation request shown to
        the wrong user is worse than an error."""
        only = self.clients.only() if self.clients is not None else None
        connected = len(self.clients) if self.clients is not None else 0
        if method == "roots/list":
            if only is not None:
                return only, ""
            return None, (
                "no client session is connected"
                if connected == 0
                else f"{connected} client sessions are connected and roots come only from a client alone"
            )
        callers = {id(c.asks_to): c.asks_to for c in self.inflight.values() if c.asks_to is not None}
        if len(callers) == 1:
            return next(iter(callers.values())), ""
        if len(callers) > 1:
            return None, f"calls from {len(callers)} client sessions are in progress on it; it is ambiguous"
        if only is not None:
            return only, ""
        return None, (
            "no client session is connected"
            if connected == 0
            else f"no call is in progress on it and {connected} client sessions are connected"
        )

    def _answer_roots(self, request: Request, nursery: trio.Nursery) -> None:
        """roots/list by the backend's `roots` key: refused ("none", the capability was not offered), the
        operator's URIs, or the one client session's answer ("client")."""
        self.asked_roots = True
        if isinstance(self.roots, tuple):
            nursery.start_soon(self.send, Response(request.id, {"roots": fixed_roots(self.roots)}))
        elif self.roots == "client":
            self._ask_client(request, nursery)
        else:
            logger.debug("refused its roots/list: the gateway offers it no roots")
            error = RpcError(METHOD_NOT_FOUND, "the gateway offers no roots to this server")
            nursery.start_soon(self.send, ErrorResponse(request.id, error))

    def _ask_client(self, request: Request, nursery: trio.Nursery) -> None:
        if request.params is not None and not isinstance(request.params, dict):
            self._refuse(request, "its params are not an object", nursery, INVALID_PARAMS)
            return
        params = request.params
        problem = elicitation_problem(params or {}) if request.method == "elicitation/create" else None
        if problem is not None:
            self._refuse(request, problem, nursery, INVALID_PARAMS)
            return
        if request.id in self._asked:
            self._refuse(request, f"its id {shown(request.id)} is in use by its request pending", nursery)
            return
        target, why_not = self._addressee(request.method)
        if target is None:
            self._refuse(request, why_not, nursery)
            return
        ask = Ask(next_call_id(), self.name, request.method, params, ReplySlot())
        try:
            target.send_nowait(ask)
        except trio.WouldBlock:
            self._refuse(request, "the client session has too many requests pending", nursery)
            return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._refuse(request, "the client session has ended", nursery)
            return
        if request.method == "elicitation/create" and params and params.get("mode") == "url":
            self._remember_elicitation(params.get("elicitationId"), target)
        scope = trio.CancelScope()
        self._asked[request.id] = (ask.ask_id, target, scope)
        nursery.start_soon(self._relay_answer, request, ask.reply_to, scope)

    async def _relay_answer(self, request: Request, slot: ReplySlot, scope: trio.CancelScope) -> None:
        """The client's answer (or the session's error) back to the backend under the backend's own id."""
        with scope:
            reply = await slot.wait()
            self._asked.pop(request.id, None)
            if reply.error is not None:
                await self.send(ErrorResponse(request.id, reply.error))
            else:
                await self.send(Response(request.id, reply.result))

    def _refuse(
        self, request: Request, why_not: str, nursery: trio.Nursery, code: int = METHOD_NOT_FOUND
    ) -> None:
        # Servers ask for roots on their own (right after initialize, say): no client to ask is normal.
        level = "INFO" if request.method == "roots/list" else "WARNING"
        self.drop(f"refused its {request.method}: {why_not}", level)
        message = f"the gateway cannot pass {request.method} to a client: {why_not}"
        nursery.start_soon(self.send, ErrorResponse(request.id, RpcError(code, message)))

    def _withdraw(self, params: Any) -> None:
        """The backend cancelled one of its requests: tell the session, and stop waiting for its answer."""
        request_id = params.get("requestId") if isinstance(params, dict) else None
        asked = self._asked.pop(request_id, None) if is_id(request_id) else None  # type: ignore[arg-type]
        if asked is None:
            logger.debug("ignored a cancellation of unknown request {}", shown(request_id))
            return
        ask_id, target, scope = asked
        scope.cancel()
        reason = params.get("reason")
        reason = clip(reason) if isinstance(reason, str) else "cancelled by the server"
        with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            target.send_nowait(Withdraw(ask_id, reason))

    def _remember_elicitation(self, elicitation_id: object, target: trio.MemorySendChannel[Mail]) -> None:
        if is_name(elicitation_id):
            self._elicitations[elicitation_id] = target
            while len(self._elicitations) > MAX_ELICITATIONS:
                self._elicitations.popitem(last=False)

    def _elicitation_complete(self, params: Any) -> None:
        elicitation_id = params.get("elicitationId") if isinstance(params, dict) else None
        target = self._elicitations.pop(elicitation_id, None) if isinstance(elicitation_id, str) else None
        if target is None:
            self.drop(f"dropped an elicitation/complete for unknown id {shown(elicitation_id)}")
            return
        notification = Notification("notifications/elicitation/complete", {"elicitationId": elicitation_id})
        with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            target.send_nowait(notification)

    def drop(self, text: str, level: str = "WARNING") -> None:
        """Log what was dropped or refused of what the backend sent, rate-limited."""
        self._garbage.log(level, "{}", text)


def _is_call_id(value: object) -> bool:
    """An id the gateway could have given one of its requests (an int, never a bool)."""
    return type(value) is int


def fixed_roots(uris: tuple[str, ...]) -> list[dict[str, str]]:
    """The operator's roots as roots/list lists them, each named by its last path segment."""
    roots = []
    for uri in uris:
        name = unquote(urlsplit(uri).path.rstrip("/").rpartition("/")[2])
        roots.append({"uri": uri, "name": name} if name else {"uri": uri})
    return roots
