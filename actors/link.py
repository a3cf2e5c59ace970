"""One run of a backend connection: the transport, the in-flight table, and the frames read from it.

Transport-agnostic: a stdio process, and later a WebSocket or HTTP backend, share this code. The in-flight
table maps backend-side id -> Call; every Call put in it is answered exactly once, by the backend's response
or by `fail_all` when the run ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Final

import attrs
import trio
from loguru import logger

from actors import codec
from actors.envelopes import Call, Cancel, Reply, next_call_id
from actors.errors import (
    BACKEND_UNAVAILABLE,
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    BackendError,
    BackendExitedError,
    MessageError,
    MessageTooLargeError,
)
from actors.log import RateLimiter
from actors.messages import Batch, ErrorResponse, Message, Notification, Request, Response, RpcError
from actors.transports.base import Transport

GARBAGE_LOG_RATE: Final = 5.0  # dropped-frame warnings per second, per backend
PREVIEW_CHARS: Final = 200  # how much of a bad frame the log shows


class BackendRequestError(BackendError):
    """The backend answered one of the gateway's own requests with a JSON-RPC error."""

    def __init__(self, method: str, error: RpcError) -> None:
        super().__init__(f"{method} failed: {error.message} (code {error.code})")
        self.error = error


def unavailable(backend: str, reason: str) -> RpcError:
    return RpcError(
        BACKEND_UNAVAILABLE,
        f"backend '{backend}' is unavailable: {reason}",
        {"backend": backend, "reason": reason},
    )


def answer(call: Call, reply: Reply) -> None:
    """Deliver the one reply of a call. Never blocks: reply_to has room for exactly this one item."""
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock):
        call.reply_to.send_nowait(reply)
    call.reply_to.close()


@attrs.define
class BackendLink:
    name: str
    transport: Transport
    on_notification: Callable[[Notification], None]
    cancel_scope: trio.CancelScope
    inflight: dict[int, Call] = attrs.field(factory=dict)
    lost: BackendError | None = None
    _garbage: RateLimiter = attrs.field(factory=lambda: RateLimiter(GARBAGE_LOG_RATE))

    def lose(self, error: BackendError) -> None:
        """End this run: remember the first reason and cancel the run's scope."""
        if self.lost is None:
            self.lost = error
        self.cancel_scope.cancel()

    def fail_all(self, reason: str) -> None:
        """Answer every call still in flight with an error naming this backend. Synchronous: nothing can
        slip in between."""
        calls, self.inflight = self.inflight, {}
        error = unavailable(self.name, reason)
        for call in calls.values():
            answer(call, Reply(error=error))

    async def send(self, message: Request | Notification | Response | ErrorResponse) -> None:
        try:
            await self.transport.send(codec.encode(message))
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.lose(BackendExitedError(f"connection lost while writing: {exc or type(exc).__name__}"))
            await trio.sleep_forever()  # the scope is cancelled; this only waits for it

    async def forward(self, call: Call) -> None:
        self.inflight[call.call_id] = call
        await self.send(Request(call.call_id, call.method, call.params))

    async def cancel(self, cancel: Cancel) -> None:
        if self.inflight.pop(cancel.call_id, None) is not None:
            params = {"requestId": cancel.call_id, "reason": cancel.reason}
            await self.send(Notification("notifications/cancelled", params))

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """The gateway's own request to this backend; returns the result or raises BackendRequestError."""
        reply_to, reply_from = trio.open_memory_channel[Reply](1)
        call = Call(next_call_id(), method, params, "gateway", reply_to)
        with reply_from:
            await self.forward(call)
            try:
                reply = await reply_from.receive()
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
                self._drop(f"dropped a frame that is not JSON-RPC ({exc}): {frame[:PREVIEW_CHARS]!r}")
                continue
            self._dispatch_any(message, nursery)

    def _dispatch_any(self, message: Message, nursery: trio.Nursery) -> None:
        if isinstance(message, Batch):
            self._drop("dropped a JSON-RPC batch: backends must send one message per line")
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
            case Notification():
                self.on_notification(message)
            case Request(id=request_id, method="ping"):
                nursery.start_soon(self.send, Response(request_id, {}))
            case Request(id=request_id, method=method):
                error = RpcError(METHOD_NOT_FOUND, f"the gateway does not forward {method} to clients")
                nursery.start_soon(self.send, ErrorResponse(request_id, error))

    def _settle(self, request_id: int | str | None, reply: Reply) -> None:
        call = self.inflight.pop(request_id, None) if isinstance(request_id, int) else None
        if call is None:
            self._drop(f"dropped a response to unknown or cancelled request id {request_id!r}")
            return
        answer(call, reply)

    def _too_large(self, exc: MessageTooLargeError) -> None:
        """A response too large to take answers its caller with an error; anything else is dropped."""
        call = self.inflight.pop(exc.request_id, None) if isinstance(exc.request_id, int) else None
        if call is None:
            self._drop(f"dropped a frame: {exc}")
            return
        logger.warning("answer to {} was too large: {}", call.method, exc)
        message = f"backend '{self.name}' answered {call.method} with a {exc}"
        data = {"backend": self.name, "size": exc.size, "limit": exc.limit}
        answer(call, Reply(error=RpcError(INTERNAL_ERROR, message, data)))

    def _progress(self, params: Any) -> None:
        """Progress goes back to the session whose call it is, under the token that session chose."""
        token = params.get("progressToken") if isinstance(params, dict) else None
        call = self.inflight.get(token) if isinstance(token, int) else None
        if call is None or call.notify_to is None or call.progress_token is None:
            self._drop(f"dropped progress for unknown token {token!r}")
            return
        try:
            call.notify_to.send_nowait(
                Notification("notifications/progress", {**params, "progressToken": call.progress_token})
            )
        except trio.WouldBlock:
            logger.debug("session={} is not keeping up; dropped a progress notification", call.session)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    def _drop(self, text: str) -> None:
        suppressed = self._garbage.suppressed
        if self._garbage.allow():
            more = f" ({suppressed} more not logged)" if suppressed else ""
            logger.warning("{}{}", text, more)
