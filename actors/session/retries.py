"""A modern client's retry of a tool call (it carries a requestState) on a session with middleware: the
retry of a modern backend's round is the call's next round, through the chain like the first; the retry of
a call parked on a legacy backend's asks continues that call (its backend acts once: the middleware saw it
when it came)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.protocol.messages import ErrorResponse, Message, Params, Request, RequestId, RpcError
from actors.session import modern, tools

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher


async def retry_through_middleware(d: Dispatcher, request_id: RequestId, params: Params) -> Message:
    entry = d.inflight.get(request_id)
    assert entry is not None and entry.modern is not None
    call = entry.modern
    unwrapped = modern.unwrap(d, call)
    if unwrapped is None:
        return await modern.resumed(d, Request(request_id, call.method, params), call, entry)
    if isinstance(unwrapped, RpcError):
        return ErrorResponse(request_id, unwrapped)
    if not unwrapped.backend:  # the user has opened the URLs: the call, made again as new
        return await tools.call_through_middleware(d, request_id, params)
    return await tools.call_through_middleware(
        d, request_id, params, lambda routed: modern.retried(request_id, call, routed, unwrapped)
    )
