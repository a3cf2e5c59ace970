"""Asking the user to approve a call, in the client's era, and reading the answer.

A legacy client that declared elicitation gets a real `elicitation/create` during its tools/call, through
the session's ClientAsks (the table, ids and fleet routing backends' asks use): it answers within the
approval's TTL or the question is withdrawn (`notifications/cancelled`) and the call ends unapproved; a
cancel of the call or the session's end withdraws it too. A 2026-07-28 client gets the question as an
`input_required` round: one elicitation under APPROVAL_KEY and a requestState sealed by the gateway's key,
bound to the call (method, public name, arguments, principal, session), to the approval digest, and good
until the TTL. Nothing is parked: the retry carries the answer and the state, which is spent on first use
(the gateway's spent-state table, capped per client), so a replayed answer is refused.
"""

from __future__ import annotations

import math
import secrets
import time
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio
from loguru import logger

from actors.policy.approval import Need, shown, summary
from actors.protocol.envelopes import Ask, Reply, ReplySlot, Withdraw, next_call_id
from actors.protocol.errors import INVALID_PARAMS, rpc_error
from actors.protocol.messages import RpcError
from actors.protocol.modern_results import INPUT_REQUIRED
from actors.protocol.request_state import RequestStateError
from actors.session.parked import Unwrapped, digest_of
from actors.session.rounds import CallRound

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher
    from actors.session.modern import ModernCall

APPROVAL_KEY: Final = "mcp-gateway/approval"  # the inputRequests key of the gateway's own question
FOR_SESSION: Final = "for_session"  # the form's one field: the answer covers the tool until the session ends
ACTIONS: Final = frozenset({"accept", "decline", "cancel"})
WITHDRAW_S: Final = 1.0  # how long a withdrawal may wait for room in the outbox of a session ending
ACCEPTED: Final = "accepted"
ACCEPTED_FOR_SESSION: Final = "accepted_for_session"
EXPIRED: Final = "expired"


@attrs.frozen(slots=True)
class Question:
    """One approval to ask: why, of what, and what the user is shown."""

    need: Need
    backend: str
    tool: str  # the public name the client called
    digest: str
    params: dict[str, Any]  # elicitation/create's
    offers_session: bool  # whether the form offers "for this session"


@attrs.frozen(slots=True)
class Verdict:
    """The user's answer: accepted, accepted_for_session, declined, cancelled or expired (or `failed`, with
    why the client could not answer), and the digest of the call it approves."""

    word: str
    digest: str
    why: str = ""

    @property
    def approved(self) -> bool:
        return self.word in (ACCEPTED, ACCEPTED_FOR_SESSION)


def question(
    need: Need, backend: str, tool: str, arguments: object, digest: str, *, offers_session: bool, modern: bool
) -> Question:
    """The elicitation that asks the user (form mode: accept or decline, and "for this session" when there
    is a session to remember it in)."""
    lines = [
        f"Allow the tool '{shown(tool)}' of backend '{shown(backend)}' to run?",
        f"Arguments: {summary(arguments)}",
        f"Asked by the gateway: {need.reason} ({shown(need.rule)}).",
    ]
    properties: dict[str, Any] = {}
    if offers_session:
        properties[FOR_SESSION] = {
            "type": "boolean",
            "title": "Allow this tool for the rest of this session",
            "description": "With any arguments, until this session ends; otherwise for this call only.",
            "default": False,
        }
    params: dict[str, Any] = {
        "message": "\n".join(lines),
        "requestedSchema": {"type": "object", "properties": properties},
    }
    if modern:
        params = {"mode": "form", **params}
    return Question(need, backend, tool, digest, params, offers_session)


def read_answer(result: object, question_digest: str, offers_session: bool) -> Verdict | RpcError:
    """An elicitation result as a verdict; the -32602 a malformed one earns."""
    if not isinstance(result, dict) or result.get("action") not in ACTIONS:
        reason = "must be an object whose action is accept, decline or cancel"
        return rpc_error(INVALID_PARAMS, f"Invalid params: the approval answer {reason}", field=APPROVAL_KEY)
    action = result["action"]
    if action != "accept":
        return Verdict("declined" if action == "decline" else "cancelled", question_digest)
    content = result.get("content")
    for_session = offers_session and isinstance(content, dict) and content.get(FOR_SESSION) is True
    return Verdict(ACCEPTED_FOR_SESSION if for_session else ACCEPTED, question_digest)


# --- a legacy client: a real request ------------------------------------------------------------------


async def ask_legacy(d: Dispatcher, asked: Question, ttl_s: float, carrier: str | None = None) -> Verdict:
    """The question as elicitation/create to this session's client, answered within `ttl_s` (else expired
    and withdrawn); a cancel of the call withdraws it too, and the session's end fails it. `carrier`: the
    call's trace context when traced (the question's span joins the call's trace)."""
    params = asked.params if carrier is None else {**asked.params, "_meta": {"traceparent": carrier}}
    ask = Ask(next_call_id(), asked.backend, "elicitation/create", params, ReplySlot())
    await d.client_asks.take(ask, True)
    reply: Reply | None = None
    try:
        with trio.move_on_after(ttl_s):
            reply = await ask.reply_to.wait()
    finally:
        if reply is None:  # expired, or the call cancelled: the client stops showing it
            with trio.CancelScope(shield=True), trio.move_on_after(WITHDRAW_S):
                await d.client_asks.take(Withdraw(ask.ask_id, "the approval is no longer needed"), True)
    if reply is None:
        return Verdict(EXPIRED, asked.digest)
    if reply.error is not None:
        return Verdict("failed", asked.digest, f"the client could not answer: {reply.error.message}")
    verdict = read_answer(reply.result, asked.digest, asked.offers_session)
    if isinstance(verdict, RpcError):
        logger.info("the client's answer to an approval was malformed: {}", verdict.message)
        return Verdict("failed", asked.digest, "the client's answer was not accept, decline or cancel")
    return verdict


# --- a modern client: an input_required round ---------------------------------------------------------


def modern_round(
    d: Dispatcher, asked: Question, params: dict[str, Any], call_round: CallRound, ttl_s: float
) -> dict[str, Any]:
    """The input_required result that asks a modern client, its state sealed and bound to this call."""
    payload = {
        "ap": asked.digest,
        "fs": asked.offers_session,
        "i": secrets.token_urlsafe(12),
        "c": call_round.call_id,
        "k": call_round.number + 1,
        **binding(d, params),
    }
    state = d.settings.bridges.key.seal(payload, ttl_s=ttl_s, now=time.time())
    request = {"method": "elicitation/create", "params": asked.params}
    return {"resultType": INPUT_REQUIRED, "inputRequests": {APPROVAL_KEY: request}, "requestState": state}


def binding(d: Dispatcher, params: dict[str, Any]) -> dict[str, Any]:
    """What a state is good for, as every requestState the gateway seals says it (session/parked.py): the
    method, the name, the arguments' digest, the principal, the session (None: a stateless request's)."""
    name = params.get("name")
    return {
        "m": "tools/call",
        "n": name if isinstance(name, str) else "",
        "a": digest_of(params),
        "p": d.subject,
        "s": d.bound,
    }


def retried(d: Dispatcher, call: ModernCall) -> Unwrapped | RpcError | None:
    """A retry answering the gateway's question: None when its state is not an approval's. Else its state
    checked (this gateway's seal, this very request, principal and session), its answer read and the state
    spent; the retry is made again as the call's next round, whose CallRound holds the verdict for the
    call's handler. An expired state is not spent: its verdict is `expired`."""
    if call.method != "tools/call" or not isinstance(call.state, str):
        return None
    bridges = d.settings.bridges
    try:  # its own expiry is read below: an expired approval is a declined call, not a bad state
        payload, expiry = bridges.key.open_expiring(call.state, now=-math.inf)
    except RequestStateError:
        return None  # not the gateway's: the bridges refuse it as they refuse any such state
    digest = payload.get("ap")
    if not isinstance(digest, str):
        return None
    if {key: payload.get(key) for key in ("m", "n", "a", "p", "s")} != binding(d, call.params):
        return RequestStateError("not this request's").to_rpc_error()
    state_id, call_id, number = payload.get("i"), payload.get("c"), payload.get("k")
    if not isinstance(state_id, str) or not isinstance(call_id, str) or type(number) is not int:
        return RequestStateError("bad format").to_rpc_error()
    now = time.time()
    if now >= expiry:
        verdict: Verdict | RpcError = Verdict(EXPIRED, digest)
    else:
        verdict = read_answer(call.responses.get(APPROVAL_KEY), digest, payload.get("fs") is True)
        if isinstance(verdict, RpcError):
            return verdict  # not spent: the client may answer properly with the same state
        refused = bridges.spent.spend(state_id, client=d.caller.key, session=d.bound, expiry=expiry, now=now)
        if refused is not None:
            return RequestStateError(refused).to_rpc_error()
    call.responses.pop(APPROVAL_KEY, None)  # the gateway's: no backend's ask may take it as its answer
    call.round.call_id, call.round.number, call.round.verdict = call_id, number, verdict
    return Unwrapped("", None, call.round)
