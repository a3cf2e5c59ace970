"""tools/list and tools/call, through the session's middleware when there is some."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from actors.middleware import ToolCall
from actors.protocol.codec import writable
from actors.protocol.errors import INTERNAL_ERROR, rpc_error
from actors.protocol.messages import ErrorResponse, Message, Params, RequestId, RpcError
from actors.protocol.pages import page
from actors.session import shim
from actors.session.fields import named_error
from actors.session.forward import Forward
from actors.session.routing import forward_named

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher


def list_tools(d: Dispatcher, request_id: RequestId, params: Params) -> Message:
    view = d.catalog.value
    chain = d.chain_of(request_id)
    tools = view.tools if chain is None else chain.tools(view.tools_version, view.tools)
    if isinstance(tools, RpcError):
        return ErrorResponse(request_id, tools)
    return page(request_id, params, "tools", tools, view.tools_version, d.settings.page_size)


def call_tool(d: Dispatcher, request_id: RequestId, params: Params) -> Message | Forward:
    """Without middleware: forwarded at once."""
    return forward_named(d, request_id, params, "tools/call", "tool", d.catalog.value.routes)


async def call_through_middleware(d: Dispatcher, request_id: RequestId, params: Params) -> Message:
    """With middleware: its before_call and after_call around the call, in the request's task."""
    chain = d.chain_of(request_id)
    assert chain is not None
    view = d.catalog.value
    error = named_error(params)  # before the middleware sees the call
    if error is not None:
        return ErrorResponse(request_id, error)
    name = params.get("name")
    routes = view.routes
    if isinstance(name, str) and chain.hides(view.tools_version, view.tools, name):
        routes = {}  # filtered out for this client: as unknown as a name nobody has
    route = routes.get(name) if isinstance(name, str) else None
    call = ToolCall(
        chain.client,
        name if isinstance(name, str) else "",
        route.backend if route else None,
        route.own if route else None,
        params.get("arguments"),
        time.time(),
    )
    entry = d.inflight.get(request_id)

    async def forward(call: ToolCall) -> Message:
        forwarded = params
        if call.arguments is not params.get("arguments"):
            if not isinstance(call.arguments, dict | None) or not writable(call.arguments):
                message = "Internal error: middleware changed the arguments into something not a JSON object"
                return ErrorResponse(request_id, rpc_error(INTERNAL_ERROR, message))
            forwarded = {**params, "arguments": call.arguments}
        outcome = forward_named(d, request_id, forwarded, "tools/call", "tool", routes)
        return (
            await shim.forwarded(d, outcome, request_id, entry) if isinstance(outcome, Forward) else outcome
        )

    return await chain.call(request_id, call, forward)
