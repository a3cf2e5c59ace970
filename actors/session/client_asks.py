"""One session's side of backends' requests for its client (sampling, elicitation, roots).

A backend's request reaches the session as an Ask with a gateway-wide unique `ask_id`, which is also the id
the client sees (through `AskIds`: in a fleet, a legacy HTTP client sees it sealed, naming the replica that
asked: fleet/ask_ids.py), so answers from the client map back without a second table. Every Ask is answered
exactly once: with the client's answer, at once with an error when the client did not declare the
capability, or with an error when the session ends first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs
import trio
from loguru import logger

from actors.protocol.codec import json_type
from actors.protocol.envelopes import Ask, Mail, Reply, ToClient, Withdraw, answer
from actors.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND
from actors.protocol.messages import (
    ErrorResponse,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    RpcError,
)

if TYPE_CHECKING:
    from actors.telemetry.tracing import CallSpan, Tracing


def refusal(method: str, params: dict[str, Any] | None, capabilities: dict[str, Any]) -> RpcError | None:
    """Why this client cannot take a request, going by the capabilities it declared; None when it can.
    Reads params of any shape without raising: what it cannot read counts as absent."""
    params = params if isinstance(params, dict) else {}
    match method:
        case "sampling/createMessage":
            sampling = capabilities.get("sampling")
            if not isinstance(sampling, dict):
                return _missing("sampling", method)
            if params.get("tools") and "tools" not in sampling:
                return _missing("sampling.tools", method)
        case "elicitation/create":
            elicitation = capabilities.get("elicitation")
            if not isinstance(elicitation, dict):
                return _missing("elicitation", method)
            mode = params.get("mode", "form")
            # An empty elicitation capability is the 2025-06-18 form: form mode only.
            modes = set(elicitation) & {"form", "url"} or {"form"}
            if not isinstance(mode, str) or mode not in modes:
                message = (
                    f"the client session does not accept {mode!r} elicitation (it accepts {sorted(modes)})"
                )
                return RpcError(INVALID_PARAMS, message, {"mode": mode})
        case "roots/list":
            if not isinstance(capabilities.get("roots"), dict):
                return _missing("roots", method)
    return None


def _missing(capability: str, method: str) -> RpcError:
    message = f"the client session did not declare the {capability} capability, so it cannot take {method}"
    return RpcError(METHOD_NOT_FOUND, message, {"capability": capability})


class AskIds(Protocol):
    """How a session's client sees the ids of the Asks sent to it, and reads them back."""

    def outward(self, ask_id: int) -> RequestId: ...

    def inward(self, request_id: object) -> int | None:
        """The ask id a client's answer names; None when it names none of this session's."""
        ...


class PlainAskIds:
    """The Ask's own integer, as it is: ids unique in the process, which is all a session reaches."""

    def outward(self, ask_id: int) -> RequestId:
        return ask_id

    def inward(self, request_id: object) -> int | None:
        return request_id if type(request_id) is int else None


PLAIN_ASK_IDS: Final = PlainAskIds()


@attrs.define
class ClientAsks:
    """Owns: the table of Asks sent to this session's client and not yet answered.
    Sends: the Asks as requests, and notifications about them, through `send` (the session's outbox)."""

    send: Callable[[Message], Awaitable[None]]
    capabilities: dict[str, Any] = attrs.field(factory=dict)  # what the client declared at initialize
    tracing: Tracing | None = None  # a CLIENT span per Ask relayed, when tracing is on
    ask_ids: AskIds = PLAIN_ASK_IDS  # the ids its client sees
    _asked: dict[int, Ask] = attrs.field(factory=dict)
    _spans: dict[int, CallSpan] = attrs.field(factory=dict)  # by ask_id: left with its entry in _asked

    async def take(self, item: ToClient, operating: bool) -> None:
        match item:
            case Ask():
                error = (
                    refusal(item.method, item.params, self.capabilities)
                    if operating
                    else RpcError(INTERNAL_ERROR, "the client session has not finished initializing")
                )
                if error is not None:
                    logger.info("refused {} from backend {}: {}", item.method, item.backend, error.message)
                    answer(item, Reply(error=error))
                    return
                params = item.params
                if self.tracing is not None:  # its hop to the client, in the backend's trace
                    self._spans[item.ask_id], params = self.tracing.ask(item.method, params, item.backend)
                self._asked[item.ask_id] = item
                await self.send(Request(self.ask_ids.outward(item.ask_id), item.method, params))
            case Withdraw(ask_id=ask_id, reason=reason):
                ask = self._asked.pop(ask_id, None)
                if ask is not None:
                    self._answer(ask, Reply(error=RpcError(INTERNAL_ERROR, "withdrawn")))  # nobody waits
                    seen_as = self.ask_ids.outward(ask_id)
                    await self.send(
                        Notification("notifications/cancelled", {"requestId": seen_as, "reason": reason})
                    )
            case Notification():
                await self.send(item)

    def settle(self, message: Response | ErrorResponse) -> bool:
        """The client's answer to one of our requests; False when it answers nothing we asked."""
        ask_id = self.ask_ids.inward(message.id)
        ask = self._asked.pop(ask_id, None) if ask_id is not None else None
        if ask is None:
            return False
        if isinstance(message, Response) and not isinstance(message.result, dict):
            # A result is a JSON object (JSON-RPC, MCP): the backend that asked gets an error, not garbage.
            error = f"the client answered {ask.method} with a JSON {json_type(message.result)}, not an object"
            logger.info("{}", error)
            self._answer(ask, Reply(error=RpcError(INTERNAL_ERROR, error)))
        elif isinstance(message, Response):
            self._answer(ask, Reply(result=message.result))
        else:
            self._answer(ask, Reply(error=message.error))
        return True

    def _answer(self, ask: Ask, reply: Reply) -> None:
        """An Ask sent to the client answered (its span, when traced, ends with the reply)."""
        if self._spans:
            span = self._spans.pop(ask.ask_id, None)
            if span is not None:
                span.answered(reply)
        answer(ask, reply)

    def refuse_queued(self, asks: trio.MemoryReceiveChannel[Mail], reason: str) -> None:
        """Answer the Asks still queued for a session that will not read them."""
        while True:
            try:
                item = asks.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return
            if isinstance(item, Ask):
                answer(item, Reply(error=RpcError(INTERNAL_ERROR, reason)))

    def fail_all(self, reason: str) -> None:
        asked, self._asked = self._asked, {}
        for ask in asked.values():
            self._answer(ask, Reply(error=RpcError(INTERNAL_ERROR, reason)))
