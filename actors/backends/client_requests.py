"""A backend's requests for a client (sampling/createMessage, elicitation/create, roots/list), and what
comes after them: the client's answer relayed back under the backend's own id, the backend's withdrawals,
and the completion notices of URL elicitations.

A request goes to the call it belongs to (ask_owner.py), else, when it is no call's, to the only session
connected; never a guess between two clients (roots/list: a modern call's own, else a session alone).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote, urlsplit

import attrs
import trio
from loguru import logger

from actors.backends.ask_owner import can_ask, owner_of
from actors.backends.input import elicitation_problem, is_name
from actors.catalog.clients import ClientDirectory
from actors.protocol.codec import clip, is_id, shown
from actors.protocol.envelopes import Ask, Call, MailTarget, ReplySlot, Withdraw, next_call_id
from actors.protocol.errors import INVALID_PARAMS, METHOD_NOT_FOUND
from actors.protocol.messages import ErrorResponse, Notification, Request, RequestId, Response, RpcError

if TYPE_CHECKING:
    from actors.backends.connection import BackendLink

MAX_ELICITATIONS: Final = 1024  # URL elicitations remembered per run, awaiting their completion notice
MAX_ENDED_TRACES: Final = 1024  # trace ids of ended calls remembered per run (about 60 KB)
# A call the gateway gave up (cancelled, timed out) may still run at its backend and ask: for this long it
# still owns what nothing else names, so such a request is refused rather than given to another client
LINGER_S: Final = 30.0
MAX_LINGERING: Final = 256  # given-up calls remembered per run; past it the oldest is forgotten


@attrs.define(eq=False)
class ClientRequests:
    """Owns: one run's requests of a backend that wait for a client's answer, and its URL elicitations.
    Receives: the backend's requests for a client, its notifications/cancelled, elicitation/complete.
    Sends: Ask, Withdraw and elicitation/complete to the session's mailbox; the answers to the backend.
    Stops when: the run ends (`withdraw_all`).
    Errors: a request that no session can take is refused with a JSON-RPC error to the backend."""

    link: BackendLink
    clients: ClientDirectory | None = None  # sessions a request for the client may go to
    roots: str | tuple[str, ...] = "client"  # who answers its roots/list: nobody, the one client, the config
    asked_roots: bool = False  # it has asked for roots in this run, so it wants to hear of changes
    _asked: dict[RequestId, tuple[int, MailTarget, trio.CancelScope]] = attrs.field(factory=dict)
    _elicitations: OrderedDict[str, MailTarget] = attrs.field(factory=OrderedDict)
    _ended: OrderedDict[str, None] = attrs.field(factory=OrderedDict)  # trace ids of calls ended lately
    _lingering: OrderedDict[int, tuple[Call, float]] = attrs.field(factory=OrderedDict)  # id -> (call, until)

    def given_up(self, call: Call) -> None:
        """The gateway gave up a call its backend may still be working on (a cancel, a timeout): for LINGER_S
        it still owns what the backend asks (ask_owner.py), unless the backend answers it first."""
        if can_ask(call):
            self._lingering[call.call_id] = (call, trio.current_time() + LINGER_S)
            while len(self._lingering) > MAX_LINGERING:
                self._lingering.popitem(last=False)

    def answered_late(self, call_id: object) -> None:
        """The backend answered a call the gateway had given up: it is done there."""
        if type(call_id) is int:
            self._lingering.pop(call_id, None)  # type: ignore[call-overload]

    def _still_lingering(self) -> list[Call]:
        now = trio.current_time()
        while self._lingering and next(iter(self._lingering.values()))[1] <= now:
            self._lingering.popitem(last=False)  # insertion order is deadline order: one LINGER_S for all
        return [call for call, _ in self._lingering.values()]

    def call_ended(self, call: Call) -> None:
        """A call left the in-flight table: a request naming its trace from now on is refused, never given to
        another call's client. The last MAX_ENDED_TRACES are remembered."""
        if call.trace is not None:
            self._ended[call.trace] = None
            if len(self._ended) > MAX_ENDED_TRACES:
                self._ended.popitem(last=False)

    def take(self, request: Request, nursery: trio.Nursery, streamed_on: object = None) -> None:
        """A backend's request for a client; `streamed_on`: the id of the call on whose response stream it
        came (HTTP), else None."""
        if request.method == "roots/list":
            self._answer_roots(request, nursery, streamed_on)
        else:
            self._ask_client(request, nursery, streamed_on)

    def withdraw_all(self, reason: str) -> None:
        """The run is over: its questions to clients will never be wanted now."""
        asked, self._asked = self._asked, {}
        for ask_id, target, _ in asked.values():
            with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                target.send_nowait(Withdraw(ask_id, f"backend '{self.link.name}' is unavailable: {reason}"))

    def _addressee(self, request: Request, streamed_on: object = None) -> tuple[MailTarget | None, str]:
        """Where a backend's request goes: the place for asks of the call it belongs to (ask_owner.py),
        even when that call's client is gone (the request is then refused there, never rerouted). A request
        that is no call's goes to the only session connected. roots/list is the exception: the backend's
        roots are every session's, so unless it belongs to a modern call (which asks its own client, for
        itself), only a session that is alone answers it."""
        owner = owner_of(
            request.params, self.link.inflight, streamed_on, self._ended, self._still_lingering()
        )
        if request.method == "roots/list":
            if owner.call is not None and owner.call.own_asks:
                return owner.call.asks_to, ""
            alone = "{} client sessions are connected and roots come only from a client alone"
            return self._only_session(alone)
        if owner.call is not None:
            return owner.call.asks_to, ""
        if owner.why_not:
            return None, owner.why_not
        return self._only_session("no call is in progress on it and {} client sessions are connected")

    def _only_session(self, why_not_many: str) -> tuple[MailTarget | None, str]:
        """The only session connected, or why there is none to take the request (`why_not_many` with the
        number of sessions connected, when there are several)."""
        only = self.clients.only() if self.clients is not None else None
        if only is not None:
            return only, ""
        connected = len(self.clients) if self.clients is not None else 0
        if connected == 0:
            return None, "no client session is connected"
        return None, why_not_many.format(connected)

    def _answer_roots(self, request: Request, nursery: trio.Nursery, streamed_on: object) -> None:
        """roots/list by the backend's `roots` key: refused ("none", the capability was not offered), the
        operator's URIs, or the one client session's answer ("client")."""
        self.asked_roots = True
        if isinstance(self.roots, tuple):
            nursery.start_soon(self.link.send, Response(request.id, {"roots": fixed_roots(self.roots)}))
        elif self.roots == "client":
            self._ask_client(request, nursery, streamed_on)
        else:
            logger.debug("refused its roots/list: the gateway offers it no roots")
            error = RpcError(METHOD_NOT_FOUND, "the gateway offers no roots to this server")
            nursery.start_soon(self.link.send, ErrorResponse(request.id, error))

    def _ask_client(self, request: Request, nursery: trio.Nursery, streamed_on: object) -> None:
        if request.params is not None and not isinstance(request.params, dict):
            self._refuse(request, "its params are not an object", nursery, INVALID_PARAMS)
            return
        params = request.params
        problem = elicitation_problem(params or {}) if request.method == "elicitation/create" else None
        if problem is not None:
            self._refuse(request, problem, nursery, INVALID_PARAMS)
            return
        if request.id in self._asked:
            self._refuse(request, f"its id {shown(request.id)} is in use by its request pending", nursery)
            return
        target, why_not = self._addressee(request, streamed_on)
        if target is None:
            self._refuse(request, why_not, nursery)
            return
        ask = Ask(next_call_id(), self.link.name, request.method, params, ReplySlot(), request.id)
        try:
            target.send_nowait(ask)
        except trio.WouldBlock:
            self._refuse(request, "the client session has too many requests pending", nursery)
            return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._refuse(request, "the client session has ended", nursery)
            return
        if request.method == "elicitation/create" and params and params.get("mode") == "url":
            self.remember_elicitation(params.get("elicitationId"), target)
        scope = trio.CancelScope()
        self._asked[request.id] = (ask.ask_id, target, scope)
        nursery.start_soon(self._relay_answer, request, ask.reply_to, scope)

    async def _relay_answer(self, request: Request, slot: ReplySlot, scope: trio.CancelScope) -> None:
        """The client's answer (or the session's error) back to the backend under the backend's own id."""
        with scope:
            reply = await slot.wait()
            self._asked.pop(request.id, None)
            if reply.error is not None:
                await self.link.send(ErrorResponse(request.id, reply.error))
            else:
                await self.link.send(Response(request.id, reply.result))

    def _refuse(
        self, request: Request, why_not: str, nursery: trio.Nursery, code: int = METHOD_NOT_FOUND
    ) -> None:
        # Servers ask for roots on their own (right after initialize, say): no client to ask is normal.
        level = "INFO" if request.method == "roots/list" else "WARNING"
        self.link.drop(f"refused its {request.method}: {why_not}", level)
        message = f"the gateway cannot pass {request.method} to a client: {why_not}"
        nursery.start_soon(self.link.send, ErrorResponse(request.id, RpcError(code, message)))

    def withdraw(self, params: Any) -> None:
        """The backend cancelled one of its requests: tell the session, and stop waiting for its answer."""
        request_id = params.get("requestId") if isinstance(params, dict) else None
        asked = self._asked.pop(request_id, None) if is_id(request_id) else None  # type: ignore[arg-type]
        if asked is None:
            logger.debug("ignored a cancellation of unknown request {}", shown(request_id))
            return
        ask_id, target, scope = asked
        scope.cancel()
        reason = params.get("reason")
        reason = clip(reason) if isinstance(reason, str) else "cancelled by the server"
        with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            target.send_nowait(Withdraw(ask_id, reason))

    def remember_elicitation(self, elicitation_id: object, target: MailTarget) -> None:
        if is_name(elicitation_id):
            self._elicitations[elicitation_id] = target
            while len(self._elicitations) > MAX_ELICITATIONS:
                self._elicitations.popitem(last=False)

    def elicitation_complete(self, params: Any) -> None:
        elicitation_id = params.get("elicitationId") if isinstance(params, dict) else None
        target = self._elicitations.pop(elicitation_id, None) if isinstance(elicitation_id, str) else None
        if target is None:
            self.link.drop(f"dropped an elicitation/complete for unknown id {shown(elicitation_id)}")
            return
        notification = Notification("notifications/elicitation/complete", {"elicitationId": elicitation_id})
        with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            target.send_nowait(notification)


def fixed_roots(uris: tuple[str, ...]) -> list[dict[str, str]]:
    """The operator's roots as roots/list lists them, each named by its last path segment."""
    roots = []
    for uri in uris:
        name = unquote(urlsplit(uri).path.rstrip("/").rpartition("/")[2])
        roots.append({"uri": uri, "name": name} if name else {"uri": uri})
    return roots
