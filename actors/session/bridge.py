"""The era bridge, legacy backend to modern client: a backend's requests for the client (sampling,
elicitation, roots) while it serves a 2026-07-28 call become that era's multi round-trip requests.

A modern client takes no requests from servers. So while a legacy backend works on a modern client's
tools/call, prompts/get or resources/read, the call's reply-to is a BridgedCall: the backend's asks are
gathered for a moment (so asks sent together go out together) and the client's call is answered with
`input_required`, each ask under the backend's own request id as its key, with a `requestState` the
gateway signed. The backend's call stays open, parked. The client's retry (a new request: same method and
params, plus `inputResponses` and that state) is checked (signature, expiry, method, name, arguments,
principal, round), its responses answer the asks they name, and the retry takes the parked call's place: the
backend's answer, or its next asks, go to it. A retry that never comes is given up after `ttl_s`: the
backend's call is cancelled and its asks refused. A state is good for one round, in the session it was
handed out in (a stateless HTTP request's: for its principal); the table is the process's, so a retry after
a restart is refused cleanly, never misrouted.
"""

from __future__ import annotations

import contextlib
import secrets
import sys
import time
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs
import orjson
import trio
from loguru import logger

from actors.catalog import BackendStatus
from actors.protocol.capabilities import missing_capability
from actors.protocol.codec import compact
from actors.protocol.envelopes import Ask, Cancel, Reply, Withdraw, answer
from actors.protocol.eras import missing_capability_error
from actors.protocol.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    URL_ELICITATION_REQUIRED,
    rpc_error,
)
from actors.protocol.messages import RpcError
from actors.protocol.modern_results import GATEWAY_ANSWERS, INPUT_REQUIRED
from actors.session.rounds import CallRound

if TYPE_CHECKING:
    from actors.session.parked import Bridges
    from actors.telemetry.tracing import CallSpan, Tracing

MAX_PENDING: Final = 64  # a call's asks awaiting the client at once; past it a backend's ask is refused
# inputResponses one request may carry: a round asks at most MAX_PENDING things of a legacy backend's (a
# modern backend's own round, a few); each entry costs ~100 bytes held however small its text
MAX_INPUT_RESPONSES: Final = 256
ANSWER_FIELD: Final = {
    "elicitation/create": "action",
    "sampling/createMessage": "content",
    "roots/list": "roots",
}


class Target(Protocol):
    """Who waits for the call's answer now: a request's table entry, or a task's reply slot."""

    def fill(self, reply: Reply) -> None: ...


@attrs.define(eq=False, kw_only=True)
class BridgedCall:
    """Owns: one modern call to a legacy backend across its rounds: the asks not yet answered, the parked
    answer, the round its state is good for.
    Receives: the backend's Reply (as the call's reply-to), its Asks and Withdraws (as the call's place for
        asks), the client's retries (`Bridges.resume`).
    Sends: input_required or the backend's answer to the current target; the client's answers to the asks;
        a Cancel to the backend when the client is gone for good.
    Stops when: the backend answers a target, the call fails, its client cancels it or its session ends
        while a request of it is in flight (Forwarder.stop), or no retry comes within ttl_s; then it leaves
        the table and its timers are cancelled.
    Errors: an ask the client did not declare the capability for fails the call with -32021 (D7)."""

    table: Bridges
    handle: str
    method: str
    name: str  # the tool's or prompt's name, or the resource's URI: a retry must name the same
    digest: str  # of the arguments: a retry must send the same
    principal: str | None
    capabilities: dict[str, Any]
    kept: dict[str, bytes] = attrs.field(factory=dict)  # answers not used yet, raw: decoded when asked
    kept_bytes: int = 0  # what `kept` counts against the client's budget (Bridges.budget)
    target: Target | None = None
    backend: BackendStatus | None = None
    call_id: int = 0
    pending: dict[str, Ask] = attrs.field(factory=dict)  # asks the client has not answered, by key
    answered: Reply | None = None  # the backend's answer, come while no request waited for it
    round: int = 0  # the round a retry's state must name
    client: str = ""  # whose it is, as Bridges caps calls per client
    bound: str | None = None  # the session its states are good in (None: a stateless request's)
    call_round: CallRound = attrs.field(factory=CallRound)  # the call, and the round this request is
    session: str = ""  # where it was opened, as Bridges caps calls per session
    gathering: bool = False
    closed: bool = False
    _gather: trio.CancelScope | None = None  # the timer of the asks being gathered
    _expiry: trio.CancelScope | None = None  # the timer of the round the client is to retry
    tracing: Tracing | None = None  # a span per ask while it waits for the client's retry, when traced
    _spans: dict[int, CallSpan] = attrs.field(factory=dict)  # by id() of an ask in `pending`

    # --- the backend's side ---------------------------------------------------------------------------

    def fill(self, reply: Reply) -> None:
        if self.closed:
            return
        if reply.error is None and _input_required(reply.result):
            reply = self._wrapped(reply.result)  # a modern backend's own round
        elif reply.error is not None and reply.error.code == URL_ELICITATION_REQUIRED:
            reply = self._url_round(reply)  # the 2025-11-25 way of asking the user to open a URL
        if self.target is None:
            self.answered = reply  # the client is between rounds: its retry gets it
            return
        target, self.target = self.target, None
        target.fill(reply)
        self.close("the call was answered")

    def send_nowait(self, item: object) -> None:
        if self.closed:
            if isinstance(item, Ask):
                answer(item, Reply(error=rpc_error(METHOD_NOT_FOUND, "the client's call has ended")))
            return
        if isinstance(item, Withdraw):
            for key, ask in list(self.pending.items()):
                if ask.ask_id == item.ask_id:
                    del self.pending[key]
                    self._answer(ask, Reply(error=rpc_error(METHOD_NOT_FOUND, "withdrawn")))
        elif isinstance(item, Ask):
            self._take(item)

    def _take(self, ask: Ask) -> None:
        missing = missing_capability(ask.method, ask.params, self.capabilities)
        if missing is not None:
            logger.info("backend {} asked for {}, which the client did not declare", ask.backend, ask.method)
            answer(ask, Reply(error=rpc_error(METHOD_NOT_FOUND, f"the client cannot take {ask.method}")))
            self.fail(missing_capability_error(missing), f"the client cannot take {ask.method}")
            return
        if len(self.pending) >= MAX_PENDING:  # a backend flooding one call with asks gets refusals
            answer(
                ask, Reply(error=rpc_error(METHOD_NOT_FOUND, f"more than {MAX_PENDING} asks for one call"))
            )
            return
        key = self._key_for(ask)
        if key in self.kept:  # answered before it was asked (the client sent it on this request)
            error = self._settle(key, ask, orjson.loads(self.kept[key]))
            if error is not None:
                self.fail(error, "the client's answer was malformed")
            return
        self.pending[key] = ask
        if self.tracing is not None:  # its hop to the client (an input_required round), in the call's trace
            self._spans[id(ask)] = self.tracing.ask(ask.method, ask.params, ask.backend)[0]
        if self.target is not None and not self.gathering:
            self.gathering = True
            self._gather = self.table.after(self.table.gather_s, self._ask_client)

    def _wrapped(self, result: dict[str, Any]) -> Reply:
        """A modern backend's input_required, its requestState sealed inside the gateway's, bound like a
        bridged call's and to this session, and good for one retry: the retry is checked here, then goes to
        the same backend with the backend's exact state (`Bridges.unwrap`), as the next round of the same
        call. A state too large to carry is the backend's fault: an error names it."""
        backend = self.backend.name if self.backend is not None else ""
        answers = result.get(GATEWAY_ANSWERS)  # the gateway's own answers (configured roots): in the seal
        result = {key: value for key, value in result.items() if key != GATEWAY_ANSWERS}
        payload = {
            "w": result.get("requestState"),
            "b": backend,
            "i": secrets.token_urlsafe(12),
            "c": self.call_round.call_id,
            "k": self.call_round.number + 1,
            **({"g": answers} if isinstance(answers, dict) and answers else {}),
            **self._binding(),
        }
        try:
            state = self.table.key.seal(payload, ttl_s=self.table.ttl_s, now=time.time())
        except (ValueError, TypeError) as exc:
            message = f"backend '{backend}' answered with a requestState the gateway cannot carry: {exc}"
            return Reply(error=rpc_error(INTERNAL_ERROR, message, backend=backend))
        return Reply(result={**result, "requestState": state})

    def _url_round(self, reply: Reply) -> Reply:
        """A legacy backend's -32042 (the user must open a URL, then the call may be made again) as the
        modern client's input_required round of URL elicitations; the retry sends the call again."""
        assert reply.error is not None
        data = reply.error.data if isinstance(reply.error.data, dict) else {}
        listed = data.get("elicitations")
        requests: dict[str, Any] = {}
        for n, elicitation in enumerate(listed if isinstance(listed, list) else ()):
            if isinstance(elicitation, dict) and isinstance(elicitation.get("url"), str):
                params = {
                    "mode": "url",
                    "message": str(elicitation.get("message", "")),
                    "url": elicitation["url"],
                }
                requests[str(elicitation.get("elicitationId") or f"url-{n}")] = {
                    "method": "elicitation/create",
                    "params": params,
                }
        if not requests:
            return reply  # nothing a client could open: the error as it is
        missing = missing_capability("elicitation/create", {"mode": "url"}, self.capabilities)
        if missing is not None:
            return Reply(error=missing_capability_error(missing))
        state = self.table.key.seal({"x": 1, **self._binding()}, ttl_s=self.table.ttl_s, now=time.time())
        return Reply(result={"resultType": INPUT_REQUIRED, "inputRequests": requests, "requestState": state})

    def _binding(self) -> dict[str, Any]:
        return {"m": self.method, "n": self.name, "a": self.digest, "p": self.principal, "s": self.bound}

    def _key_for(self, ask: Ask) -> str:
        key = str(ask.request_id if ask.request_id is not None else ask.ask_id)
        return key if key not in self.pending else f"{key}#{ask.ask_id}"

    # --- the client's side ----------------------------------------------------------------------------

    def _ask_client(self) -> None:
        """The gathered asks, to the request waiting now, as input_required; the call stays parked."""
        self.gathering = False
        if self.closed or self.target is None or not self.pending:
            return
        requests = {key: _input_request(ask) for key, ask in self.pending.items()}
        payload = {"h": self.handle, "r": self.round, **self._binding()}
        state = self.table.key.seal(payload, ttl_s=self.table.ttl_s, now=time.time())
        target, self.target = self.target, None
        result = {"resultType": INPUT_REQUIRED, "inputRequests": requests, "requestState": state}
        target.fill(Reply(result=result))
        waited_round = self.round
        if self._expiry is not None:
            self._expiry.cancel()  # the round before: retried, so its timer has nothing left to do
        self._expiry = self.table.after(self.table.ttl_s, lambda: self._expire(waited_round))

    def attach(
        self, target: Target, responses: dict[str, Any], capabilities: dict[str, Any]
    ) -> RpcError | None:
        """A retry takes the parked call's place: its answers settle the asks they name (others are ignored),
        then it gets the parked answer, the asks still open, or whatever the backend does next."""
        self.round += 1
        self.capabilities = capabilities
        settled = [key for key in self.pending if key in responses]
        for key in settled:
            error = self._settle(key, self.pending.pop(key), responses[key])
            if error is not None:
                self.fail(error, "the client's answer was malformed")
                return error
        self.keep_answers({key: value for key, value in responses.items() if key not in settled})
        self.target = target
        if self.answered is not None:
            self.fill(self.answered)
        elif self.pending:
            self._ask_client()  # what it did not answer, at once (a missing answer is asked again)
        return None

    def keep_answers(self, responses: dict[str, Any]) -> None:
        """What the current request answered and no ask has used yet, kept as raw bytes (a decoded tree costs
        ~7-24 times as much) and counted for its client, at what it holds in memory, until the call ends or
        the next round."""
        self._forget_answers()
        self.kept = {key: compact(orjson.dumps(value)) for key, value in responses.items()}
        self.kept_bytes = held_bytes(self.kept)
        self.table.budget.keep(self.client, self.kept_bytes)

    def _answer(self, ask: Ask, reply: Reply) -> None:
        """An ask answered (its span, when traced, ends with the reply)."""
        if self._spans:
            span = self._spans.pop(id(ask), None)
            if span is not None:
                span.answered(reply)
        answer(ask, reply)

    def _forget_answers(self) -> None:
        self.table.budget.release(self.client, self.kept_bytes)
        self.kept, self.kept_bytes = {}, 0

    def _settle(self, key: str, ask: Ask, value: object) -> RpcError | None:
        field = ANSWER_FIELD.get(ask.method)
        if not isinstance(value, dict) or (field is not None and field not in value):
            reason = f"inputResponses.{key} must be an object with {field!r} (the answer to {ask.method})"
            self._answer(ask, Reply(error=rpc_error(INVALID_PARAMS, "the client's answer was malformed")))
            return rpc_error(INVALID_PARAMS, f"Invalid params: {reason}", field=f"inputResponses.{key}")
        self._answer(ask, Reply(result=value))
        return None

    def fail(self, error: RpcError, reason: str) -> None:
        """End the call: the waiting request gets `error`, the backend a cancel, open asks an error."""
        if self.target is not None:
            target, self.target = self.target, None
            target.fill(Reply(error=error))
        self.cancel_at_backend(reason)
        self.close(reason)

    def _expire(self, waited_round: int) -> None:
        if not self.closed and self.target is None and self.round == waited_round:
            logger.info(
                "gave up a parked {} for {}: no retry within {}s", self.method, self.name, self.table.ttl_s
            )
            self.cancel_at_backend("the client did not come back")
            self.close("the client did not come back")

    def cancel_at_backend(self, reason: str) -> None:
        if self.backend is not None and self.backend.calls is not None and self.call_id:
            with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                self.backend.calls.send_nowait(Cancel(self.call_id, reason))

    def close(self, reason: str) -> None:
        """The call is over: open asks are refused, it leaves the table, its timers are cancelled."""
        if self.closed:
            return
        self.closed = True
        self.table.forget(self)
        self._forget_answers()
        for timer in (self._gather, self._expiry):
            if timer is not None:
                timer.cancel()
        for ask in self.pending.values():
            self._answer(ask, Reply(error=rpc_error(METHOD_NOT_FOUND, reason)))
        self.pending.clear()


def held_bytes(kept: dict[str, bytes]) -> int:
    """What `kept` holds in memory: its table, and each key and value object (not only their text)."""
    if not kept:
        return 0
    return sys.getsizeof(kept) + sum(sys.getsizeof(key) + sys.getsizeof(raw) for key, raw in kept.items())


def too_many_responses(count: int) -> RpcError:
    """The -32602 of a request carrying more inputResponses than any round asks for."""
    message = (
        f"Invalid params: inputResponses has {count} entries, over MAX_INPUT_RESPONSES "
        f"({MAX_INPUT_RESPONSES}): answer the inputRequests of one round"
    )
    return rpc_error(INVALID_PARAMS, message, field="inputResponses", limit=MAX_INPUT_RESPONSES)


def _input_request(ask: Ask) -> dict[str, Any]:
    """An ask as an InputRequest: its method and params, with no id (and no URL elicitation's id, which the
    era dropped)."""
    params = dict(ask.params or {})
    if ask.method == "elicitation/create":
        params.pop("elicitationId", None)
    request: dict[str, Any] = {"method": ask.method}
    if params or ask.method != "roots/list":
        request["params"] = params
    return request


def _input_required(result: object) -> bool:
    return isinstance(result, dict) and result.get("resultType") == INPUT_REQUIRED
