"""Requests of the 2026-07-28 era on a session: each one stands alone.

A request whose `params._meta` holds the protocolVersion key is modern, whatever else the connection has
said: it needs no initialize, and it is answered from what it carries itself (its version, its client's
capabilities and identity, its log level). An initialize on the same connection starts a legacy session
beside it; neither era pins the other. The envelope is checked first (-32602 naming the key, -32022 for a
version not served), then the method (a removed or unknown one is -32601); what the handlers then see is
the request without its envelope, as a legacy backend may be given it. Answers gain what the era asks of a
result (`resultType`, caching hints, the server's identity) in `ModernCall.encode`, and a resource the
gateway cannot find is -32602 with its URI (the era retired -32002).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import attrs
import trio
from loguru import logger

from actors import __version__
from actors.middleware import ClientInfo
from actors.middleware.chain import MiddlewareChain
from actors.protocol.capabilities import missing_capability
from actors.protocol.codec import clip
from actors.protocol.envelopes import Ask, Mail, Reply, ReplySlot, answer
from actors.protocol.eras import (
    MODERN_CLIENT_METHODS,
    MODERN_VERSIONS,
    MRTR_METHODS,
    ModernEnvelope,
    is_modern_request,
    missing_capability_error,
    parse_envelope,
    resource_not_found_error,
    without_envelope,
)
from actors.protocol.errors import METHOD_NOT_FOUND, RESOURCE_NOT_FOUND, rpc_error
from actors.protocol.messages import (
    ErrorResponse,
    Message,
    Notification,
    Params,
    Request,
    RequestId,
    Response,
    RpcError,
)
from actors.protocol.modern_results import PRIVATE, cache_hint_of, merge_cache_hints, modern_result
from actors.protocol.request_state import RequestStateError
from actors.session import approval_asks
from actors.session.bridge import MAX_INPUT_RESPONSES, Target, too_many_responses
from actors.session.discover import undeclared
from actors.session.fields import invalid_field, meta_error
from actors.session.forward import Forward
from actors.session.handlers import MODERN_NOW, RESUME, Resume
from actors.session.inflight import Answers, InFlight
from actors.session.logs import LOG_SEVERITY
from actors.session.parked import Unwrapped
from actors.session.rounds import CallRound

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher

MRTR_FIELDS: Final = ("inputResponses", "requestState")
MAX_CHAINS: Final = 16  # middleware chains kept per session, one per client name its requests give


@attrs.frozen(slots=True, kw_only=True)
class ModernCall:
    """One modern request, checked: what its handler is given and how its answer is encoded."""

    method: str
    envelope: ModernEnvelope
    params: Params  # without the envelope
    server_info: dict[str, Any]
    chain: MiddlewareChain | None = None  # the session's middleware, for this request's client
    log_rank: int | None = None  # the least severe log level it wants; None: no notifications/message
    asks: RefusedAsks = attrs.field(factory=lambda: RefusedAsks())
    answers: Answers | None = None  # the session's way to its client, for the call's log messages
    legacy_ready: trio.Event | None = None  # set once the connection's legacy session is ready
    responses: dict[str, Any] = attrs.field(factory=dict)  # inputResponses (tools/call, prompts/get, read)
    state: object = None  # requestState: a retry continues a parked call (None: a call of its own)
    round: CallRound = attrs.field(factory=CallRound)  # the call this request is a round of, and which

    def log(self, notification: Notification) -> None:
        """A backend's log message while this call was its one call in flight: to the client, when the
        request asked for that level. A connection with a ready legacy session hears it that way instead."""
        if self.log_rank is None or self.answers is None:
            return
        if self.legacy_ready is not None and self.legacy_ready.is_set():
            return
        params = notification.params if isinstance(notification.params, dict) else {}
        if LOG_SEVERITY.get(params.get("level"), 0) >= self.log_rank:  # type: ignore[arg-type]
            self.answers.deliver(notification)

    def result(self, result: object, hint: tuple[int, str] | None = None) -> dict[str, Any]:
        """`hint`: the caching hints of a list the gateway built (list_hint); a read keeps its owner's."""
        if hint is None and self.method == "resources/read":  # a legacy owner gives none: 0, private
            ttl_ms, scope = cache_hint_of(result)
            hint = (ttl_ms or 0, scope or PRIVATE)
        ttl_ms, scope = hint if hint is not None else (0, PRIVATE)
        return modern_result(
            self.method, result, ttl_ms=ttl_ms, cache_scope=scope, server_info=self.server_info
        )

    def error(self, error: RpcError) -> RpcError:
        """A backend's or the gateway's error as this era says it."""
        if error.code == RESOURCE_NOT_FOUND and self.method == "resources/read":
            uri = self.params.get("uri")
            return resource_not_found_error(uri if isinstance(uri, str) else "")
        return error

    def encode(self, message: Message, hint: tuple[int, str] | None = None) -> Message:
        if isinstance(message, Response):
            return Response(message.id, self.result(message.result, hint))
        if isinstance(message, ErrorResponse):
            return ErrorResponse(message.id, self.error(message.error))
        return message


@attrs.frozen(slots=True)
class RefusedAsks:
    """Where a legacy backend's requests for the client (sampling, elicitation, roots) go while it serves a
    modern call. That era has no server-to-client requests, so none reaches the client as one: each is
    refused, with the capability it would need named when the client did not declare it."""

    capabilities: dict[str, Any] = attrs.field(factory=dict)

    def send_nowait(self, item: Mail) -> None:
        if not isinstance(item, Ask):
            return  # withdrawals and notices of asks never made
        missing = missing_capability(item.method, item.params, self.capabilities)
        if missing is not None:
            error = missing_capability_error(missing)
        else:
            error = rpc_error(
                METHOD_NOT_FOUND,
                f"the gateway does not pass {item.method} to a client of protocol {MODERN_VERSIONS[0]}",
            )
        logger.info("refused {} from backend {}: {}", item.method, item.backend, error.message)
        answer(item, Reply(error=error))


def accept(d: Dispatcher, request: Request, entry: InFlight) -> ErrorResponse | None:
    """A modern request's envelope and method checked, kept on its entry; the error it earns if bad (None
    for a legacy request, which the dispatcher's state machine serves)."""
    if not is_modern_request(request.params):
        return None
    call = classify(d, request)
    if isinstance(call, RpcError):
        return ErrorResponse(request.id, call)
    entry.modern = call
    return None


def classify(d: Dispatcher, request: Request) -> ModernCall | RpcError:
    """A modern request checked: its envelope, its method, the rest of its `_meta`."""
    envelope = parse_envelope(request.params)
    if isinstance(envelope, RpcError):
        return envelope
    method = request.method
    if method not in MODERN_CLIENT_METHODS:
        return rpc_error(METHOD_NOT_FOUND, f"Method not found: {clip(method)}")
    params = without_envelope(request.params) or {}
    error = meta_error(params)
    if error is not None:
        return error
    responses: Any = {}
    state = None
    if method in MRTR_METHODS:  # the multi round-trip fields are the gateway's, never a legacy backend's
        responses, state = params.get("inputResponses"), params.get("requestState")
        params = {key: value for key, value in params.items() if key not in MRTR_FIELDS}
        if responses is None:
            responses = {}
        if not isinstance(responses, dict):
            return invalid_field("inputResponses", "an object")
        if len(responses) > MAX_INPUT_RESPONSES:
            return too_many_responses(len(responses))
        if "requestState" in request.params and not isinstance(state, str):  # type: ignore[operator]
            return invalid_field("requestState", "a string")
    if d.on_ready is not None and not d.spoke:
        d.on_ready()  # a network client that speaks MCP: no initialize deadline
    d.spoke = True
    return ModernCall(
        method=method,
        envelope=envelope,
        params=params,
        server_info={"name": d.settings.server_name, "version": __version__},
        chain=chain_for(d, envelope) if d.settings.middleware else None,
        log_rank=None if envelope.log_level is None else LOG_SEVERITY[envelope.log_level],
        asks=RefusedAsks(envelope.client_capabilities),
        answers=d.answers,
        legacy_ready=d.client_ready,
        responses=responses,
        state=state,
    )


def resume(
    d: Dispatcher, request_id: RequestId, call: ModernCall, target: Target, entry: InFlight | None = None
) -> Message | None:
    """A retry carrying a requestState: attached to the call it continues (None), or its refusal. The retry's
    entry (`target` itself, or `entry` when a task waits for it) ends the call when it is stopped."""
    outcome = d.settings.bridges.resume(
        method=call.method,
        params=call.params,
        state=call.state,
        principal=d.subject,
        capabilities=call.envelope.client_capabilities,
        responses=call.responses,
        target=target,
        bound=d.bound,
    )
    if isinstance(outcome, RpcError):
        return call.encode(ErrorResponse(request_id, outcome))
    holder = target if isinstance(target, InFlight) else entry
    if holder is not None and not holder.done:
        holder.bridge = outcome  # a cancel of the retry ends the call
        if holder is target and outcome.backend is not None:
            holder.forwarded = (outcome.backend, outcome.call_id)  # and reaches the backend
    return None


def chain_for(d: Dispatcher, envelope: ModernEnvelope) -> MiddlewareChain:
    """The session's middleware for the client a modern request names (by clientInfo.name), kept per name so
    filtered lists are computed once per catalog version."""
    info = envelope.client_info or {}
    name = info.get("name") if isinstance(info.get("name"), str) else None
    chain = d.modern_chains.get(name)
    if chain is None:
        chain = MiddlewareChain(d.settings.middleware, ClientInfo(d.session, d.subject, name))
        if len(d.modern_chains) < MAX_CHAINS:
            d.modern_chains[name] = chain
    return chain


def decide(d: Dispatcher, request: Request, call: ModernCall) -> Message | Forward | Resume | None:
    """What a modern request gets at once: its answer (encoded for its era), a forward, a retry's resume;
    None while the catalog's first settle is not over (it then waits in a task)."""
    if not d.settings.first_settle.over:
        if not d.catalog.value.settled:
            return None
        d.settings.first_settle.over = True
    handler = MODERN_NOW.get(request.method)
    if handler is None:
        error = rpc_error(METHOD_NOT_FOUND, f"Method not found: {clip(request.method)}")
        return ErrorResponse(request.id, error)
    error = undeclared(d.catalog.value, request.method)
    if error is not None:
        return ErrorResponse(request.id, error)
    if call.state is None:
        outcome = handler(d, request.id, call.params)
        if isinstance(outcome, Forward):
            return outcome
        return call.encode(outcome, list_hint(d, request.method) if request.method in LIST_KINDS else None)
    unwrapped = unwrap(d, call)
    if unwrapped is None:
        gate = d.settings.policy
        if gate is not None and gate.policy is not None:  # every round is judged by the rules in force
            routed = handler(d, request.id, call.params)
            if isinstance(routed, ErrorResponse):
                d.settings.bridges.end(
                    method=call.method,
                    params=call.params,
                    state=call.state,
                    principal=d.subject,
                    reason="the gateway's policy refused the retry",
                    bound=d.bound,
                )
                return call.encode(routed)
        return RESUME  # a retry: it continues a call parked on a legacy backend's asks
    if isinstance(unwrapped, RpcError):
        return call.encode(ErrorResponse(request.id, unwrapped))
    routed = handler(d, request.id, call.params)
    if not unwrapped.backend:  # the user has opened the URLs: the call, made again as new
        return routed if isinstance(routed, Forward) else call.encode(routed)
    return retried(request.id, call, routed, unwrapped)


def unwrap(d: Dispatcher, call: ModernCall) -> Unwrapped | RpcError | None:
    """A retry's state opened and spent (see Bridges.unwrap; an answer to the gateway's own approval
    question: approval_asks.retried); the call learns which call and round it is."""
    approved = approval_asks.retried(d, call)
    if approved is not None:
        return approved  # the call made again as its next round, the user's verdict in hand
    unwrapped = d.settings.bridges.unwrap(
        method=call.method,
        params=call.params,
        state=call.state,
        principal=d.subject,
        client=d.caller.key,  # a principal on all its sessions, else an address: no one fills the table
        bound=d.bound,
    )
    if isinstance(unwrapped, Unwrapped) and unwrapped.backend:
        call.round.call_id, call.round.number = unwrapped.round.call_id, unwrapped.round.number
    return unwrapped


def retried(
    request_id: RequestId, call: ModernCall, routed: Message | Forward, unwrapped: Unwrapped
) -> Message | Forward:
    """A modern backend's round retried: to the backend that asked, with its answers (and those the gateway
    gave on the client's behalf, which win) and its exact state."""
    if not isinstance(routed, Forward):
        return call.encode(routed)
    if routed.backend.name != unwrapped.backend:  # the name moved to another backend: that one never asked
        refused = RequestStateError("its backend no longer serves this request").to_rpc_error()
        return call.encode(ErrorResponse(request_id, refused))
    responses = {**call.responses, **unwrapped.answers}
    params = {**routed.params, "inputResponses": responses, "requestState": unwrapped.state}
    return attrs.evolve(routed, params=params)


# The lists the gateway builds from its backends: method -> (the kind a backend lists, the capability)
LIST_KINDS: Final = {
    "tools/list": ("tools", "tools"),
    "prompts/list": ("prompts", "prompts"),
    "resources/list": ("resources", "resources"),
    "resources/templates/list": ("templates", "resources"),
}


def list_hint(d: Dispatcher, method: str) -> tuple[int, str]:
    """How long, and for whom, a list the gateway built may be kept: the shortest ttl of the backends that
    contribute to it, public only when every one of them said public and no per-caller policy (a token's
    subject, middleware) could shape the answer."""
    kind, feature = LIST_KINDS[method]
    hints = [
        status.list_hints.get(kind, (None, None))
        for status in d.catalog.value.backends.values()
        if status.ready and (feature in status.capabilities or kind == "tools")
    ]
    gate = d.settings.policy
    shaped = (
        d.subject is not None or bool(d.settings.middleware) or (gate is not None and gate.policy is not None)
    )
    return merge_cache_hints(hints, per_caller_policy=shaped)


async def resumed(
    d: Dispatcher, request: Request, call: ModernCall, entry: InFlight | None = None
) -> Message:
    """A retry served in a task: attached to its parked call through a slot, then its answer. Its entry (the
    request's, in flight) ends the call when it is stopped."""
    slot = ReplySlot()
    refused = resume(d, request.id, call, slot, entry)
    if refused is not None:
        return refused
    reply = await slot.wait()
    if reply.error is not None:
        return call.encode(ErrorResponse(request.id, reply.error))
    return call.encode(Response(request.id, reply.result))
