"""The era bridge, modern backend to legacy client: a 2026-07-28 backend's `input_required` result, lived
out with a client of the handshake era, which knows only real server-to-client requests.

The legacy client's call stays in flight while the rounds run, each in this session's task: the round's
input requests are checked (kind, params, the client's initialize capabilities) before anything is sent,
sent to the client together as real requests (sampling/createMessage, elicitation/create, roots/list), and
once all are answered the backend is called again with the same params, those answers as `inputResponses`
and its `requestState` byte for byte. A round with only a state waits a moment and retries. Past
MAX_ROUNDS, or when a leg fails or times out, the call fails: a tool call with an error result saying why
(what a tool's user reads), a prompt or a resource read with -32603. A cancel reaches every leg.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio
from loguru import logger

from actors.protocol.capabilities import missing_capability
from actors.protocol.envelopes import Ask, ReplySlot, Withdraw, next_call_id
from actors.protocol.errors import INTERNAL_ERROR
from actors.protocol.messages import ErrorResponse, Message, RequestId, Response, RpcError
from actors.protocol.modern_results import GATEWAY_ANSWERS, INPUT_REQUIRED
from actors.session import guard
from actors.session.forward import SHUTTING_DOWN, Forward

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher
    from actors.session.inflight import InFlight

MAX_INPUT_REQUESTS: Final = 64  # a round asking for more is a backend's bug or an attack: the call fails
MAX_ROUNDS: Final = 8  # the backend's rounds one legacy call may take (its client holds a request open)
LEG_TIMEOUT_S: Final = 600.0  # one request to the client, answered within
STATE_ONLY_WAIT_S: Final = 0.25  # a round that asks nothing, only hands back a state, waits this long
NextRound = Callable[[dict[str, Any], int], Awaitable[Message]]  # (inputResponses and state, round number)
KINDS: Final = frozenset({"sampling/createMessage", "elicitation/create", "roots/list"})
URL_ELICITATION_VERSION: Final = "2025-11-25"  # the legacy version whose URL elicitations need an id


class RoundFailed(Exception):
    """A round that cannot be lived out with this client; the message says why."""


def needs_input(result: object) -> bool:
    return isinstance(result, dict) and result.get("resultType") == INPUT_REQUIRED


async def complete(
    d: Dispatcher,
    request_id: RequestId,
    forward: Forward,
    result: dict[str, Any],
    entry: InFlight | None,
    send: NextRound | None = None,
) -> Message:
    """The legacy client's answer to a call whose backend asked for input: the rounds, then the result.
    `send` makes each round after the first (through the session's middleware, when it has some); without
    it, each goes straight to the backend."""

    async def straight(extra: dict[str, Any], number: int) -> Message:
        """A round judged by the rules in force, then straight to the backend that asked."""
        refused = guard.refuse_round(d, request_id, forward.target) if forward.target else None
        if refused is not None:
            return refused  # a modern backend keeps nothing between rounds: there is nothing to cancel
        params = {**forward.params, **extra}
        again = Forward(forward.backend, forward.method, params, forward.rewrite, forward.target)
        return await d.forwarder.wait(again, request_id, entry)

    # its asks to the client join the request's trace (the span of each, ClientAsks, is a child of it)
    carrier = entry.span.traceparent() if entry is not None and entry.span is not None else None
    for number in range(2, MAX_ROUNDS + 2):
        try:
            answers = await _round(d, forward.backend.name, result, carrier)
        except RoundFailed as exc:
            logger.info("{} of backend {} failed: {}", forward.method, forward.backend.name, exc)
            return _failure(request_id, forward.method, str(exc))
        given = result.get(GATEWAY_ANSWERS)  # the gateway's own (configured roots): never the client's
        extra: dict[str, Any] = {"inputResponses": {**answers, **(given if isinstance(given, dict) else {})}}
        if "requestState" in result:
            extra["requestState"] = result["requestState"]
        answer = await (send or straight)(extra, number)
        if not isinstance(answer, Response) or not needs_input(answer.result):
            return answer
        result = answer.result
    reason = f"the backend still required input after {MAX_ROUNDS} rounds"
    return _failure(request_id, forward.method, reason)


async def _round(d: Dispatcher, backend: str, result: dict[str, Any], carrier: str | None) -> dict[str, Any]:
    requests = result.get("inputRequests", {})
    if not isinstance(requests, dict) or (not requests and "requestState" not in result):
        raise RoundFailed("its input_required result has neither inputRequests nor requestState")
    if len(requests) > MAX_INPUT_REQUESTS:
        raise RoundFailed(f"it asked for {len(requests)} inputs in one round (at most {MAX_INPUT_REQUESTS})")
    asks = {key: _ask_for(d, backend, key, request, carrier) for key, request in requests.items()}
    if not asks:
        await trio.sleep(STATE_ONLY_WAIT_S)
        return {}
    legs = Legs()
    async with trio.open_nursery() as nursery:
        legs.scope = nursery.cancel_scope
        for key, ask in asks.items():
            nursery.start_soon(legs.run, d, key, ask)
    if legs.failure is not None:
        raise RoundFailed(legs.failure)
    return legs.answers


def _ask_for(d: Dispatcher, backend: str, key: str, request: object, carrier: str | None = None) -> Ask:
    """A round's input request as a request to this client, checked first: nothing is sent for a round
    that has a bad entry or asks what the client did not declare."""
    if not isinstance(request, dict) or request.get("method") not in KINDS:
        raise RoundFailed(f"input request {key!r} is not a sampling, elicitation or roots request")
    method, params = request["method"], request.get("params", {})
    if not isinstance(params, dict) or (method != "roots/list" and not params):
        raise RoundFailed(f"input request {key!r} ({method}) has no params")
    missing = missing_capability(method, params, d.client_asks.capabilities)
    if missing is not None:
        raise RoundFailed(f"the client did not declare {', '.join(sorted(missing))}, which {method} needs")
    if (
        method == "elicitation/create"
        and params.get("mode") == "url"
        and d.version == URL_ELICITATION_VERSION
    ):
        params = {**params, "elicitationId": str(uuid.uuid4())}  # that version's URL mode needs one
    if carrier is not None:
        meta = params.get("_meta")
        params = {**params, "_meta": {**(meta if isinstance(meta, dict) else {}), "traceparent": carrier}}
    return Ask(next_call_id(), backend, method, params, ReplySlot())


@attrs.define
class Legs:
    """One round's requests to the client, run together: their answers, or the first failure (which ends
    the others, each withdrawn from the client)."""

    answers: dict[str, Any] = attrs.field(factory=dict)
    failure: str | None = None
    scope: trio.CancelScope | None = None

    async def run(self, d: Dispatcher, key: str, ask: Ask) -> None:
        await d.client_asks.take(ask, True)
        try:
            with trio.move_on_after(LEG_TIMEOUT_S):
                reply = await ask.reply_to.wait()
                if reply.error is None:
                    self.answers[key] = reply.result
                    return
                self._fail(f"the client refused {ask.method}: {reply.error.message}")
                return
            self._fail(f"the client did not answer {ask.method} within {LEG_TIMEOUT_S}s")
        finally:
            if key not in self.answers:
                with trio.CancelScope(shield=True):
                    await d.client_asks.take(Withdraw(ask.ask_id, "the request no longer needs it"), True)

    def _fail(self, reason: str) -> None:
        if self.failure is None:
            self.failure = reason
        assert self.scope is not None
        self.scope.cancel()


def _failure(request_id: RequestId, method: str, reason: str) -> Message:
    if method == "tools/call":
        text = f"The tool needed input the gateway could not get from this client: {reason}"
        return Response(request_id, {"content": [{"type": "text", "text": text}], "isError": True})
    return ErrorResponse(request_id, RpcError(INTERNAL_ERROR, f"Internal error: {reason}"))


async def forwarded(
    d: Dispatcher, forward: Forward, request_id: RequestId, entry: InFlight | None
) -> Message:
    """Forward and wait (in the request's task); a modern backend's rounds lived out with a legacy client."""
    answer = await d.forwarder.wait(forward, request_id, entry)
    if entry is not None and entry.modern is not None:
        return answer
    if isinstance(answer, Response) and needs_input(answer.result):
        return await complete(d, request_id, forward, answer.result, entry)
    return answer


def start_rounds(d: Dispatcher, entry: InFlight, result: dict[str, Any]) -> None:
    """A call forwarded at once whose backend wants input a legacy client can only give to real requests:
    the rounds run in a task of their own, the call in flight meanwhile (a cancel ends the task)."""
    entry.scope = trio.CancelScope()
    d.background.start_soon(_rounds, d, entry, result)


async def _rounds(d: Dispatcher, entry: InFlight, result: dict[str, Any]) -> None:
    assert entry.scope is not None and entry.forward is not None
    answer: Message | None = None
    with entry.scope:
        answer = await complete(d, entry.request_id, entry.forward, result, entry)
    if entry.scope.cancelled_caught:
        answer = None if entry.silent else ErrorResponse(entry.request_id, SHUTTING_DOWN)
    entry.answered(answer)
    d.inflight.remove(entry)
    if answer is not None:
        d.answers.deliver(answer)
