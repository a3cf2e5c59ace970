"""tools/list and tools/call, through the session's middleware when there is some.

With middleware, every round of a call passes it: the first request, a modern client's retry of a modern
backend's round, and each round the shim makes for a legacy client. Each round is a ToolCall of its own
(before_call sees the client's arguments again, so a rewrite applies to every round; after_call sees the
round's result) with the call's id and the round's number. A call that needs the user's approval
(session/approvals.py) is judged last, after the [policy] and the [limits]: its question and the answer are
rounds too."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from actors.catalog import Route
from actors.middleware import CallOutcome, ToolCall
from actors.middleware.chain import MiddlewareChain
from actors.protocol.codec import writable
from actors.protocol.errors import INTERNAL_ERROR, rpc_error
from actors.protocol.messages import ErrorResponse, Message, Params, RequestId, Response, RpcError, Tool
from actors.protocol.pages import page
from actors.routes.view import fixed_arguments
from actors.session import approvals, discovery_calls, guard, shim
from actors.session.approvals import AskFirst
from actors.session.fields import held_error, named_error
from actors.session.forward import Forward
from actors.session.rounds import CallRound
from actors.session.routing import forward_named

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher
    from actors.session.inflight import InFlight

Shape = Callable[[Forward], "Message | Forward"]  # what a round adds to the routed call (or its refusal)


def list_tools(d: Dispatcher, request_id: RequestId, params: Params) -> Message:
    tools, version = exposure(d, request_id)
    if isinstance(tools, RpcError):
        return ErrorResponse(request_id, tools)
    tools = discovery_calls.listed(d, tools)  # [discovery]: in search mode, pins and three tools
    return page(request_id, params, "tools", tools, version, d.settings.page_size)


def exposure(d: Dispatcher, request_id: RequestId) -> tuple[tuple[Tool, ...] | RpcError, int]:
    """The tools this caller may see, and the version its cursors carry."""
    view = d.catalog.value
    chain = d.chain_of(request_id)
    tools, version = guard.visible(d, "tools", view.tools, view.tools_version)  # the policy's, then
    tools = tools if chain is None else chain.tools(version, tools)  # the middleware's filter
    if isinstance(tools, RpcError):
        return tools, version
    if d.forwarder.results is not None:  # limits told, apps this caller may not read unnamed
        tools = d.forwarder.results.listed(tools, view.routes)
    return tools, version


def _discovered(
    d: Dispatcher, request_id: RequestId, params: Params
) -> Message | discovery_calls.Unwrapped | None:
    """[discovery]'s search mode: search_tools and get_tool_schema answered, call_tool unwrapped."""
    if d.settings.search is None:
        return None

    def shown() -> tuple[Tool, ...]:
        tools = exposure(d, request_id)[0]
        return () if isinstance(tools, RpcError) else tools

    return discovery_calls.intercept(d, request_id, params, shown)


def call_tool(d: Dispatcher, request_id: RequestId, params: Params) -> Message | Forward | AskFirst:
    """Without middleware: forwarded at once, when the [policy] and the [limits] let it go and the user
    approved it where a rule says so (a legacy client's question is asked in a task: AskFirst)."""
    discovered = _discovered(d, request_id, params) if d.settings.search is not None else None
    if isinstance(discovered, discovery_calls.Unwrapped):  # call_tool: the named tool's own call
        params = discovered.params
        entry = d.inflight.get(request_id)
        if entry is not None:
            entry.on_error = discovery_calls.schema_adder(discovered.tool)
    elif discovered is not None:
        return discovered
    view = d.catalog.value
    if view.fixed:  # [[routes]]: a route's fixed arguments
        params = fixed_arguments(view, request_id, params)
        if isinstance(params, ErrorResponse):
            return params
    outcome = forward_named(d, request_id, params, "tools/call", "tool", d.catalog.value.routes)
    if not isinstance(outcome, Forward):
        return outcome
    if _new_call(d, request_id):
        refusal = guard.limit_call(d, request_id, outcome.backend.name, params["name"])
        if refusal is not None:
            return Response(request_id, guard.limited_result(refusal))
    return approvals.check(d, request_id, params, outcome) if approvals.asks(d) else outcome


def _new_call(d: Dispatcher, request_id: RequestId) -> bool:
    """Not a retry round of a call already counted (rounds are judged by the policy, not counted again)."""
    entry = d.inflight.get(request_id)
    return entry is None or entry.modern is None or entry.modern.state is None


async def call_through_middleware(
    d: Dispatcher, request_id: RequestId, params: Params, shape: Shape | None = None
) -> Message:
    """With middleware: its before_call and after_call around each round of the call, in the request's
    task. `shape`: what a modern client's retry adds to the call (its answers and the backend's state)."""
    chain = d.chain_of(request_id)
    assert chain is not None
    discovered = _discovered(d, request_id, params)
    if isinstance(discovered, discovery_calls.Unwrapped):  # call_tool: the named tool's own call
        answer = await call_through_middleware(d, request_id, discovered.params, shape)
        return discovery_calls.with_schema(answer, discovered.tool)
    if discovered is not None:
        return discovered
    error = named_error(params)  # before the middleware sees the call
    if error is not None:
        return ErrorResponse(request_id, error)
    fixed = fixed_arguments(d.catalog.value, request_id, params)  # [[routes]]: the middleware sees them
    if isinstance(fixed, ErrorResponse):
        return fixed
    params = fixed
    entry = d.inflight.get(request_id)
    modern = entry.modern if entry is not None else None
    call_round = modern.round if modern is not None else CallRound()
    answer, sent = await _round(d, chain, request_id, params, call_round, entry, shape)
    if modern is not None or sent is None:
        return answer
    if not isinstance(answer, Response) or not shim.needs_input(answer.result):
        return answer

    async def next_round(extra: dict[str, Any], number: int) -> Message:
        """A round the shim makes for this legacy client: to the backend that asked, through the chain."""

        def shaped(routed: Forward) -> Message | Forward:
            if routed.backend.name != sent.backend.name:
                reason = "the tool's backend changed between rounds"
                return ErrorResponse(request_id, rpc_error(INTERNAL_ERROR, f"Internal error: {reason}"))
            params = {**routed.params, **extra}
            return Forward(routed.backend, routed.method, params, routed.rewrite, routed.target)

        round_ = CallRound(call_round.call_id, number + call_round.number - 1)  # after an approval's round
        return (await _round(d, chain, request_id, params, round_, entry, shaped))[0]

    return await shim.complete(d, request_id, sent, answer.result, entry, next_round)


async def _round(
    d: Dispatcher,
    chain: MiddlewareChain,
    request_id: RequestId,
    params: Params,
    call_round: CallRound,
    entry: InFlight | None,
    shape: Shape | None,
) -> tuple[Message, Forward | None]:
    """One round through the chain: judged by the [policy] in force (every round), counted by the [limits]
    (a call's first round only); its answer, and what was forwarded (None: nothing reached a backend)."""
    name = params.get("name")
    name = name if isinstance(name, str) else ""
    view = d.catalog.value
    routes: Mapping[str, Route] = view.routes
    route = routes.get(name)
    refused = None
    target = guard.named_target(view, "tools/call", "tool", name, route) if route else None
    decision = guard.decide(d, target) if target is not None else None
    held = view.held
    if decision is not None and not decision.allowed:  # the audit names the rule; the client, no tool
        refused = CallOutcome(error=guard.unknown(request_id, "tool", name).error, rejected=True)
    elif route is not None and held and name in held:  # its trust holds it (no list shows it, so no
        # middleware's filter of a list can be asked of it): refused as routing refuses it, by name
        refused = CallOutcome(error=held_error(held[name], route.backend, "tool", name), rejected=True)
    else:
        routes = _routes(d, chain, name)
        route = routes.get(name)
    if refused is None and route is not None and call_round.number == 1 and _new_call(d, request_id):
        refusal = guard.limit_call(d, request_id, route.backend, view.public_tool(name))
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
        call_id=call_round.call_id,
        round=call_round.number,
    )
    if refused is None and route is not None and shape is None and approvals.asks(d):
        # a call's approval, asked at its first round (its question and answer are rounds of their own)
        refused = await approvals.in_round(d, chain, request_id, call, params, call_round)
    sent: list[Forward] = []

    async def forward(call: ToolCall) -> Message:
        forwarded = params
        if call.arguments is not params.get("arguments"):
            if not isinstance(call.arguments, dict | None) or not writable(call.arguments):
                message = "Internal error: middleware changed the arguments into something not a JSON object"
                return ErrorResponse(request_id, rpc_error(INTERNAL_ERROR, message))
            forwarded = {**params, "arguments": call.arguments}
        outcome: Message | Forward = forward_named(
            d, request_id, forwarded, "tools/call", "tool", routes, policy_checked=decision is not None
        )
        if isinstance(outcome, Forward) and shape is not None:
            outcome = shape(outcome)
        if not isinstance(outcome, Forward):
            return outcome
        sent.append(outcome)
        return await d.forwarder.wait(outcome, request_id, entry)

    answer = await chain.call(request_id, call, forward, refused)
    return answer, sent[0] if sent else None


def _routes(d: Dispatcher, chain: MiddlewareChain, name: str) -> Mapping[str, Route]:
    view = d.catalog.value
    visible, version = guard.visible(d, "tools", view.tools, view.tools_version)  # the policy's list, then
    if chain.hides(version, visible, name):  # the middleware's filter of it
        return {}  # filtered out for this client: as unknown as a name nobody has
    return view.routes
