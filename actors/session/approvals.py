"""Approval before side effects: a tools/call that an `approve` rule or `approve_destructive` marks runs
only after the user at the client says yes, and the backend never sees one that was not approved.

Judged after the [policy] allowed the call and the [limits] counted it, at the call's first round (a modern
client's retry carrying the answer is that round again; the rounds a backend asks for later are not judged
again): the call's approval digest (actors/policy/approval.py) binds the answer to this principal, route,
tool and these arguments. Then, in order: a modern retry's verdict (approval_asks.retried) is used once; a
tool the user approved "for this session" runs (the session remembers at most MAX_SESSION_APPROVALS,
forgotten with it); a client that cannot be asked (no form elicitation) is refused with a tool error naming
the rule, or runs unasked with `when_unasked = "allow"`; any other is asked, in its era. Declined,
dismissed, expired or unanswerable: a tool error saying so. Each step is a span event and a log line (never
argument values); with middleware, each question and answer is a round of the call that the audit records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import attrs
import trio
from loguru import logger

from actors.middleware import CallOutcome, ToolCall
from actors.middleware.chain import MiddlewareChain
from actors.policy import Decision, Target
from actors.policy.approval import DEFAULT_ROUTE, Need, approval_digest, shown
from actors.policy.rules import DESTRUCTIVE_RULE, Unasked
from actors.protocol.capabilities import missing_capability
from actors.protocol.codec import clip
from actors.protocol.messages import ErrorResponse, Message, Params, RequestId, Response, RpcError
from actors.protocol.request_state import RequestStateError
from actors.session import guard
from actors.session.approval_asks import (
    APPROVAL_KEY,
    Question,
    Verdict,
    ask_legacy,
    modern_round,
    question,
)
from actors.session.forward import SHUTTING_DOWN, Forward
from actors.session.rounds import CallRound

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher
    from actors.session.inflight import InFlight

MAX_SESSION_APPROVALS: Final = 256  # tools one session may hold approved "for this session"
META_KEY: Final = "mcp-gateway/approval"  # in a refused call's result: the outcome and the rule, for programs
SessionKey = tuple[str, str, str]  # (route, backend, the backend's tool name)


@attrs.frozen(slots=True)
class Approval:
    """What the gateway did about a call that needs approval (`word`: asked, session, accepted,
    accepted_for_session, declined, cancelled, expired, failed, unasked, unasked_allowed): run it (`answer`
    and `asked` None), answer the client with `answer` instead, or ask a legacy client `asked` now."""

    word: str
    need: Need
    digest: str
    answer: dict[str, Any] | None = None
    asked: Question | None = None
    ttl_s: float = 0.0


@attrs.frozen(slots=True)
class AskFirst:
    """A handler's decision: this legacy call goes to its backend only once the user approves it (a task
    asks: `start_asking`)."""

    forward: Forward
    approval: Approval


def asks(d: Dispatcher) -> bool:
    """Whether the rules in force may ask approval of some call (else nothing here runs)."""
    gate = d.settings.policy
    return gate is not None and gate.policy is not None and gate.policy.asks


def needed(d: Dispatcher, name: str, backend: str, arguments: object) -> Need | Decision | None:
    """Why this call needs approval, or the denial of an approve rule that failed, or None."""
    gate = d.settings.policy
    policy = gate.policy if gate is not None else None
    if gate is None or policy is None or not policy.asks:
        return None
    if policy.approves:
        target = Target("tools/call", backend, tool=d.catalog.value.public_tool(name), arguments=arguments)
        decision = gate.approval(d.caller, target)
        if decision is not None:
            return Need(decision.rule, "an approve rule holds") if decision.allowed else decision
    if policy.approve_destructive and name in d.settings.destructive.names(d.catalog.value.tools):
        return Need(DESTRUCTIVE_RULE, "the tool is marked destructive")
    return None


def judge(
    d: Dispatcher,
    request_id: RequestId,
    params: Params,
    backend: str,
    own: str,
    call_round: CallRound | None,
) -> Approval | RpcError | None:
    """What a routed tools/call gets from the approval rules (None: it needs none, or it is a later round
    of a call judged at its first: a modern client's retry of its backend's round or a parked call)."""
    entry = d.inflight.get(request_id)
    modern = entry.modern if entry is not None else None
    verdict = call_round.verdict if call_round is not None else None
    if modern is not None and modern.state is not None and verdict is None:
        return None
    name, arguments = params["name"], params.get("arguments")
    need = needed(d, name, backend, arguments)
    if need is None:
        return None
    if isinstance(need, Decision):  # an approve rule that failed denies, as any rule's error does
        who = d.caller.subject or d.caller.address
        logger.info("policy denied tools/call {} for {}: {} ({})", clip(name), who, need.rule, need.reason)
        guard.denied(d, request_id, need)
        return guard.unknown(request_id, "tool", name).error
    gate = d.settings.policy
    assert gate is not None and gate.policy is not None
    policy = gate.policy
    caller = d.caller
    digest = approval_digest(
        [caller.issuer, caller.subject] if caller.subject else None, backend, own, arguments
    )
    if verdict is not None:
        call_round.verdict = None  # type: ignore[union-attr]  # used once
        if verdict.digest != digest:
            return RequestStateError(
                "it approved another call (its tool or arguments changed)"
            ).to_rpc_error()
        return _after(d, request_id, verdict, need, name, (backend, own))
    if (DEFAULT_ROUTE, backend, own) in d.approved_tools:
        return _noted(d, request_id, Approval("session", need, digest), name, backend)
    capabilities = modern.envelope.client_capabilities if modern is not None else d.client_asks.capabilities
    if missing_capability("elicitation/create", {"mode": "form"}, capabilities) is not None:
        if policy.when_unasked is Unasked.ALLOW:
            return _noted(d, request_id, Approval("unasked_allowed", need, digest), name, backend)
        return _noted(d, request_id, Approval("unasked", need, digest, _unasked(need, name)), name, backend)
    offers = d.bound is not None and len(d.approved_tools) < MAX_SESSION_APPROVALS
    asked = question(need, backend, name, arguments, digest, offers_session=offers, modern=modern is not None)
    if modern is not None:
        assert call_round is not None
        answer = modern_round(d, asked, params, call_round, policy.approval_ttl_s)
        return _noted(d, request_id, Approval("asked", need, digest, answer), name, backend)
    asking = Approval("asked", need, digest, asked=asked, ttl_s=policy.approval_ttl_s)
    return _noted(d, request_id, asking, name, backend)


def _after(
    d: Dispatcher, request_id: RequestId, verdict: Verdict, need: Need, name: str, target: tuple[str, str]
) -> Approval:
    """What the user's answer means for the call: it runs, or it ends as a tool error saying why."""
    backend, own = target
    answer = None if verdict.approved else _unapproved(verdict, need, name)
    remembered = d.bound is not None and len(d.approved_tools) < MAX_SESSION_APPROVALS
    if verdict.word == "accepted_for_session" and remembered:
        d.approved_tools.add((DEFAULT_ROUTE, backend, own))
    return _noted(d, request_id, Approval(verdict.word, need, verdict.digest, answer), name, backend)


def _noted(d: Dispatcher, request_id: RequestId, approval: Approval, name: str, backend: str) -> Approval:
    """The step on the request's span and in the log (who, which tool, the rule: never the arguments)."""
    event = "mcp.gateway.approval_asked" if approval.word == "asked" else "mcp.gateway.approval_answered"
    if approval.word != "asked":
        guard.mark(d, request_id, event, outcome=approval.word, rule=approval.need.rule)
    else:
        guard.mark(d, request_id, event, rule=approval.need.rule, reason=approval.need.reason)
    who = d.caller.subject or d.caller.address
    logger.info(
        "approval {} for tool {} of backend {} ({}) for {}",
        approval.word,
        clip(name),
        backend,
        approval.need.rule,
        who,
    )
    return approval


def _result(text: str, outcome: str, rule: str) -> dict[str, Any]:
    """A tool error the model reads, with the outcome and the rule under META_KEY for programs."""
    return {
        "content": [{"type": "text", "text": text}],
        "isError": True,
        "_meta": {META_KEY: {"outcome": outcome, "rule": rule}},
    }


def _unapproved(verdict: Verdict, need: Need, name: str) -> dict[str, Any]:
    tool = f"'{shown(clip(name))}'"
    if verdict.word == "declined":
        text = f"The user declined this call of the tool {tool}; it was not run."
    elif verdict.word == "cancelled":
        text = f"The user dismissed the approval of this call of the tool {tool}; it was not run."
    elif verdict.word == "expired":
        text = f"The user did not approve this call of the tool {tool} in time; it was not run."
    else:
        text = f"The gateway could not get the user's approval of the tool {tool} ({verdict.why}); not run."
    return _result(f"{text} Approval is required by {shown(need.rule)}.", verdict.word, need.rule)


def _unasked(need: Need, name: str) -> dict[str, Any]:
    text = (
        f"This call of the tool '{shown(clip(name))}' needs the user's approval ({need.reason}: "
        f"{shown(need.rule)}), and this client cannot be asked: it did not declare the elicitation "
        "capability (form mode). It was not run."
    )
    return _result(text, "unasked", need.rule)


# --- a call without middleware ------------------------------------------------------------------------


def check(
    d: Dispatcher, request_id: RequestId, params: Params, forward: Forward
) -> Message | Forward | AskFirst:
    """call_tool's last step: the routed call as it is, refused, answered with the modern client's
    question, or held for a legacy client's (AskFirst)."""
    entry = d.inflight.get(request_id)
    call_round = entry.modern.round if entry is not None and entry.modern is not None else None
    judged = judge(d, request_id, params, forward.backend.name, forward.params["name"], call_round)
    if isinstance(judged, RpcError):
        return ErrorResponse(request_id, judged)
    if judged is None or (judged.answer is None and judged.asked is None):
        return forward
    if judged.asked is not None:
        return AskFirst(forward, judged)
    assert judged.answer is not None
    return Response(request_id, judged.answer)


def start_asking(d: Dispatcher, entry: InFlight, first: AskFirst) -> None:
    """A legacy call held for the user's answer: asked in a task of its own, the call in flight meanwhile
    (a cancel of it, or the session's end, ends the task and withdraws the question)."""
    entry.scope = trio.CancelScope()
    d.background.start_soon(_ask_then_go, d, entry, first)


async def _ask_then_go(d: Dispatcher, entry: InFlight, first: AskFirst) -> None:
    assert entry.scope is not None
    outcome: Message | Forward | None = None
    with entry.scope:
        outcome = await settle(d, entry.request_id, first)
    if entry.scope.cancelled_caught:
        outcome = None if entry.silent else ErrorResponse(entry.request_id, SHUTTING_DOWN)
    entry.scope = None
    if isinstance(outcome, Forward):
        if not entry.done:
            d.forwarder.now(entry, outcome)  # the backend answers the entry, as for any call
        return
    entry.answered(outcome)
    d.inflight.remove(entry)
    if outcome is not None:
        d.answers.deliver(outcome)


async def settle(d: Dispatcher, request_id: RequestId, first: AskFirst) -> Message | Forward:
    """Ask, and the call to forward once approved, else the tool error the client gets."""
    approval = await _asked(d, request_id, first.approval, first.forward.params["name"])
    return first.forward if approval.answer is None else Response(request_id, approval.answer)


async def _asked(d: Dispatcher, request_id: RequestId, approval: Approval, own: str) -> Approval:
    asked = approval.asked
    assert asked is not None
    entry = d.inflight.get(request_id)
    carrier = entry.span.traceparent() if entry is not None and entry.span is not None else None
    verdict = await ask_legacy(d, asked, approval.ttl_s, carrier)
    return _after(d, request_id, verdict, approval.need, asked.tool, (asked.backend, own))


# --- a call through middleware: each question and answer a round the audit records ------------------


async def in_round(
    d: Dispatcher,
    chain: MiddlewareChain,
    request_id: RequestId,
    call: ToolCall,
    params: Params,
    call_round: CallRound,
) -> CallOutcome | None:
    """A round of a call through the middleware, judged: None when it runs (`call` notes the approval),
    else how it ends instead. A legacy client is asked here: the question is a round of its own (its
    input_required outcome through every after_call), and the call goes on as the next round."""
    assert call.backend is not None and call.backend_tool is not None
    judged = judge(d, request_id, params, call.backend, call.backend_tool, call_round)
    if judged is None:
        return None
    if isinstance(judged, RpcError):
        return CallOutcome(error=judged, rejected=True)
    _note(call, judged)
    if judged.asked is not None:
        asked_round = attrs.evolve(call)
        request = {"method": "elicitation/create", "params": judged.asked.params}
        shown_result = {"resultType": "input_required", "inputRequests": {APPROVAL_KEY: request}}
        await chain.call(request_id, asked_round, _never, CallOutcome(result=shown_result))
        judged = await _asked(d, request_id, judged, call.backend_tool)
        call.round += 1
        call_round.number += 1  # the call's later rounds (a modern backend's) count on from here
        _note(call, judged)
    if judged.answer is None:
        return None
    if judged.word == "asked":
        return CallOutcome(result=judged.answer)  # a modern client's question: input_required
    return CallOutcome(result=judged.answer, rejected=True)


def _note(call: ToolCall, approval: Approval) -> None:
    call.decision, call.rule = "approve", approval.need.rule
    call.approval, call.approval_digest = approval.word, approval.digest


async def _never(call: ToolCall) -> Message:
    raise AssertionError("a refused round is never forwarded")
