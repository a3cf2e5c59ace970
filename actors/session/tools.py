"""tools/list and tools/call, through the session's middleware when there is some."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from actors.middleware import CallOutcome, ToolCall
from actors.protocol.codec import writable
from actors.protocol.errors import INTERNAL_ERROR, rpc_error
from actors.protocol.messages import ErrorResponse, Message, Params, RequestId, Response, RpcError
from actors.protocol.pages import page
from actors.session import guard, shim
from actors.session.fields import named_error
from actors.session.forward import Forward
from actors.session.routing import forward_named

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher


def list_tools(d: Dispatcher, request_id: RequestId, params: Params) -> Message:
    view = d.catalog.value
    chain = d.chain_of(request_id)
    tools, version = guard.visible(d, "tools", view.tools, view.tools_version)  # the policy's, then
    tools = tools if chain is None else chain.tools(version, tools)  # the middleware's filter
    if isinstance(tools, RpcError):
        return ErrorResponse(request_id, tools)
    return page(request_id, params, "tools", tools, version, d.settings.page_size)


def call_tool(d: Dispatcher, request_id: RequestId, params: Params) -> Message | Forward:
    """Without middleware: forwarded at once, when the [policy] and the [limits] let it go."""
    outcome = forward_named(d, request_id, params, "tools/call", "tool", d.catalog.value.routes)
    if isinstance(outcome, Forward) and _new_call(d, request_id):
        refusal = guard.limit_call(d, request_id, outcome.backend.name, params["name"])
        if refusal is not None:
            return Response(request_id, guard.limited_result(refusal))
    return outcome


def _new_call(d: Dispatcher, request_id: RequestId) -> bool:
    """Not a retry round of a call already counted (rounds are judged by the policy, not counted again)."""
    entry = d.inflight.get(request_id)
    return entry is None or entry.modern is None or entry.modern.state is None


async def call_through_middleware(d: Dispatcher, request_id: RequestId, params: Params) -> Message:
    """With middleware: its before_call and after_call around the call, in the request's task."""
    chain = d.chain_of(request_id)
    assert chain is not None
    view = d.catalog.value
    error = named_error(params)  # before the middleware sees the call
    if error is not None:
        return ErrorResponse(request_id, error)
    name: str = params["name"]
    routes, route = view.routes, view.routes.get(name)
    refused = None
    decision = guard.decide(d, guard.named_target("tools/call", "tool", name, route)) if route else None
    if decision is not None and not decision.allowed:  # the audit names the rule; the client, no tool
        refused = CallOutcome(error=guard.unknown(request_id, "tool", name).error, rejected=True)
    else:
        visible, version = guard.visible(d, "tools", view.tools, view.tools_version)
        if chain.hides(version, visible, name):
            routes = {}  # filtered out for this client: as unknown as a name nobody has
        route = routes.get(name)
    if refused is None and route is not None and _new_call(d, request_id):
        refusal = guard.limit_call(d, request_id, route.backend, name)
        if refusal is not None:
            refused = CallOutcome(result=guard.limited_result(refusal), rejected=True)
    call = ToolCall(
        chain.client,
        name,
        route.backend if route else None,
        route.own if route else None,
        params.get("arguments"),
        time.time(),
        decision=decision.word if decision is not None else None,
        rule=decision.rule if decision is not None else None,
    )
    entry = d.inflight.get(request_id)

    async def forward(call: ToolCall) -> Message:
        forwarded = params
        if call.arguments is not params.get("arguments"):
            if not isinstance(call.arguments, dict | None) or not writable(call.arguments):
                message = "Internal error: middleware changed the arguments into something not a JSON object"
                return ErrorResponse(request_id, rpc_error(INTERNAL_ERROR, message))
            forwarded = {**params, "arguments": call.arguments}
        outcome = forward_named(
            d, request_id, forwarded, "tools/call", "tool", routes, policy_checked=decision is not None
        )
        return (
            await shim.forwarded(d, outcome, request_id, entry) if isinstance(outcome, Forward) else outcome
        )

    return await chain.call(request_id, call, forward, refused)
