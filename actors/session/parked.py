"""The gateway's parked calls: the table of every BridgedCall (session/bridge.py) waiting for a modern
client's retry, the key their requestStates are sealed with, and the timers of their gathering and their
expiry, and the ids of the states spent already. One per gateway, shared by every session: a modern HTTP
client's retry is a POST, a session of its own, so such states are bound to its principal; any other
session's states are good in that session alone."""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import attrs
import orjson
import trio
from loguru import logger

from actors.protocol.eras import MRTR_METHODS
from actors.protocol.errors import rpc_error
from actors.protocol.messages import RpcError
from actors.protocol.request_state import RequestStateError, RequestStateKey
from actors.session.bridge import BridgedCall, Target
from actors.session.budget import OVER_BUDGET, ByteBudget, client_of
from actors.session.rounds import CallRound, SpentStates

if TYPE_CHECKING:
    from actors.session.modern import ModernCall

GATHER_S: Final = 0.05  # how long asks are gathered before the client is asked (D5)
TTL_S: Final = 300.0  # how long a parked call waits for the client's retry
MAX_PARKED: Final = 1024  # calls bridged at once, gateway-wide; past it the biggest holder's oldest goes
MAX_PARKED_PER_CLIENT: Final = 256  # of those, one client's (its principal, else its session): not all
MAX_PARKED_PER_SESSION: Final = 64  # of those, one session's: a principal's many connections share 256
DROPPED: Final = "dropped to make room: the gateway's table of parked calls was full"


@attrs.define(eq=False, kw_only=True)
class Bridges:
    """Owns: the gateway's parked calls, by handle, and the key their states are signed with.
    Receives: new bridged calls (`open`), retries (`resume`).
    Sends: timers to the nursery the gateway gives it (without one, as in unit tests: at once); each timer
        runs under a scope its call cancels when it ends, so an ended call leaves no task behind.
    Stops when: the gateway does; parked calls then end with their backends."""

    key: RequestStateKey = attrs.field(factory=RequestStateKey)
    gather_s: float = GATHER_S
    ttl_s: float = TTL_S
    nursery: trio.Nursery | None = None
    calls: dict[str, BridgedCall] = attrs.field(factory=dict)  # oldest first
    opened_by: Counter[str] = attrs.field(factory=Counter)  # client -> its calls in `calls`
    spent: SpentStates = attrs.field(factory=SpentStates)  # wrapped states retried already, until they expire
    opened_in: Counter[str] = attrs.field(factory=Counter)  # session -> its calls in `calls`
    budget: ByteBudget = attrs.field(factory=ByteBudget)  # the gateway's: parked calls' kept bytes count

    def open(
        self,
        *,
        method: str,
        params: dict[str, Any],
        principal: str | None,
        capabilities: dict[str, Any],
        responses: dict[str, Any],
        target: Target,
        session: str = "",
        bound: str | None = None,
        call_round: CallRound | None = None,
    ) -> BridgedCall | RpcError:
        """A call to bridge, or the refusal of a client (the principal when there is one, its calls may come
        on many connections, else `session`) or a session that has as many bridged as it may. When the
        table is full, the oldest call of the client holding the most is dropped to make room. The states it
        hands out are good in session `bound` alone (None: a stateless request's, bound to its principal
        only); `call_round` is the call and round it serves."""
        client = client_of(principal, session)
        if self.opened_by[client] >= MAX_PARKED_PER_CLIENT:
            return too_many_parked("this client", "MAX_PARKED_PER_CLIENT", MAX_PARKED_PER_CLIENT)
        if self.opened_in[session] >= MAX_PARKED_PER_SESSION:
            return too_many_parked("this session", "MAX_PARKED_PER_SESSION", MAX_PARKED_PER_SESSION)
        while len(self.calls) >= MAX_PARKED:
            self._drop_oldest_of_biggest()
        call = BridgedCall(
            table=self,
            handle=secrets.token_urlsafe(12),
            method=method,
            name=subject_of(method, params),
            digest=digest_of(params),
            principal=principal,
            capabilities=capabilities,
            target=target,
            client=client,
            bound=bound,
            call_round=call_round if call_round is not None else CallRound(),
            session=session,
        )
        call.keep_answers(responses)
        self.calls[call.handle] = call
        self.opened_by[client] += 1
        self.opened_in[session] += 1
        return call

    def _drop_oldest_of_biggest(self) -> None:
        """Room in a full table: the oldest call of the client with the most goes (a parked one's retry then
        starts over; a request waiting on it gets the error)."""
        biggest = max(self.opened_by, key=self.opened_by.__getitem__)
        oldest = next(call for call in self.calls.values() if call.client == biggest)
        logger.warning("dropped a bridged {} of {}: {}", oldest.method, biggest, DROPPED)
        oldest.fail(too_many_parked("the gateway", "MAX_PARKED", MAX_PARKED), DROPPED)

    def forget(self, call: BridgedCall) -> None:
        """An ended call leaves the table (BridgedCall.close)."""
        if self.calls.pop(call.handle, None) is call:
            _uncount(self.opened_by, call.client)
            _uncount(self.opened_in, call.session)

    def open_for(
        self,
        call: ModernCall,
        principal: str | None,
        target: Target,
        session: str = "",
        bound: str | None = None,
    ) -> BridgedCall | RpcError | None:
        """The bridge of a modern call that may need the client's input (tools/call, prompts/get,
        resources/read): the reply-to and the place for asks of its call to the backend; its refusal when
        its client or session has too many; None for other methods."""
        if call.method not in MRTR_METHODS:
            return None
        return self.open(
            method=call.method,
            params=call.params,
            principal=principal,
            capabilities=call.envelope.client_capabilities,
            responses=call.responses,
            target=target,
            session=session,
            bound=bound,
            call_round=call.round,
        )

    def resume(
        self,
        *,
        method: str,
        params: dict[str, Any],
        state: object,
        principal: str | None,
        capabilities: dict[str, Any],
        responses: dict[str, Any],
        target: Target,
        bound: str | None = None,
    ) -> BridgedCall | RpcError:
        """The parked call a retry continues (now attached to `target`), or why the retry is refused."""
        opened = self._opened(method, params, state, principal, bound)
        if isinstance(opened, RpcError):
            return opened
        payload, _ = opened
        call = self.calls.get(str(payload.get("h")))
        if call is None:
            return RequestStateError("not this request's").to_rpc_error()
        if payload.get("r") != call.round or call.target is not None:
            return RequestStateError("used already").to_rpc_error()
        error = call.attach(target, responses, capabilities)
        return call if error is None else error

    def end(
        self,
        *,
        method: str,
        params: dict[str, Any],
        state: object,
        principal: str | None,
        reason: str,
        bound: str | None = None,
    ) -> None:
        """The parked call a refused retry names (the policy denied it) ends now: its backend is told, its
        asks are refused, it leaves the table with its timers."""
        opened = self._opened(method, params, state, principal, bound)
        call = None if isinstance(opened, RpcError) else self.calls.get(str(opened[0].get("h")))
        if call is not None and call.target is None:
            call.cancel_at_backend(reason)
            call.close(reason)

    def unwrap(
        self,
        *,
        method: str,
        params: dict[str, Any],
        state: object,
        principal: str | None,
        client: str,
        bound: str | None = None,
    ) -> Unwrapped | RpcError | None:
        """A retry of a modern backend's round, its state now spent (counted for `client`, whom the spent
        table caps: Caller.key, its principal or else its address); None when the state is a parked call's;
        the refusal when it is neither, not this request's or this session's, or spent already."""
        opened = self._opened(method, params, state, principal, bound)
        if isinstance(opened, RpcError):
            return opened
        payload, expiry = opened
        if "x" in payload:
            return Unwrapped("", None)  # after URL elicitations: the call is made again, as new
        if "b" not in payload:
            return None
        state_id, call_id, number = payload.get("i"), payload.get("c"), payload.get("k")
        if not isinstance(state_id, str) or not isinstance(call_id, str) or type(number) is not int:
            return RequestStateError("bad format").to_rpc_error()
        refused = self.spent.spend(state_id, client=client, session=bound, expiry=expiry, now=time.time())
        if refused is not None:
            return RequestStateError(refused).to_rpc_error()
        answers = payload.get("g")
        return Unwrapped(
            str(payload["b"]),
            payload.get("w"),
            CallRound(call_id, number),
            answers if isinstance(answers, dict) else {},
        )

    def session_ended(self, session: str | None) -> None:
        """The states bound to an ended session are worth nothing now: their spent ids are forgotten."""
        if session is not None:
            self.spent.forget_session(session)
        self.spent.sweep(time.time())  # and those that expired meanwhile, whoever's

    def _opened(
        self, method: str, params: dict[str, Any], state: object, principal: str | None, bound: str | None
    ) -> tuple[dict[str, Any], float] | RpcError:
        """A state's payload and expiry, when this gateway sealed it, in time, for this very request,
        principal and session."""
        try:
            payload, expiry = self.key.open_expiring(state, now=time.time())
        except RequestStateError as exc:
            return exc.to_rpc_error()
        expected = (method, subject_of(method, params), digest_of(params), principal)
        if (payload.get("m"), payload.get("n"), payload.get("a"), payload.get("p")) != expected:
            return RequestStateError("not this request's").to_rpc_error()
        if payload.get("s") != bound:
            return RequestStateError("not this session's").to_rpc_error()
        return payload, expiry

    def after(self, delay_s: float, action: Callable[[], None]) -> trio.CancelScope:
        """Run `action` after `delay_s`, unless the scope returned is cancelled first."""
        scope = trio.CancelScope()
        if self.nursery is None:
            if delay_s < self.ttl_s:
                action()
        else:
            self.nursery.start_soon(_later, delay_s, action, scope)
        return scope


@attrs.frozen(slots=True)
class Unwrapped:
    """A retry of a modern backend's round: the backend that asked, its own state (byte for byte), the call
    and round the retry is, and the answers the gateway gave on the client's behalf (configured roots)."""

    backend: str  # "" after URL elicitations: the call is made again, as new
    state: Any
    round: CallRound = attrs.field(factory=CallRound)
    answers: dict[str, Any] = attrs.field(factory=dict)


async def _later(delay_s: float, action: Callable[[], None], scope: trio.CancelScope) -> None:
    with scope:
        await trio.sleep(delay_s)
        action()


def _uncount(counts: Counter[str], key: str) -> None:
    counts[key] -= 1
    if counts[key] <= 0:
        del counts[key]


def too_many_parked(whose: str, cap: str, limit: int) -> RpcError:
    """A call that would be one too many for a client, a session or the gateway: refused, never let through
    with its state unsealed."""
    message = f"Request refused: {whose} has {limit} calls waiting for input ({cap}); answer or cancel some"
    return rpc_error(OVER_BUDGET, message, budget=cap, limit=limit, used=limit)


def subject_of(method: str, params: dict[str, Any]) -> str:
    value = params.get("uri" if method == "resources/read" else "name")
    return value if isinstance(value, str) else ""


def digest_of(params: dict[str, Any]) -> str:
    arguments = params.get("arguments")
    encoded = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS) if arguments is not None else b"null"
    return hashlib.sha256(encoded).hexdigest()[:32]
