"""With [fleet]: a modern retry (a POST carrying a requestState) claimed fleet-wide before it is served, and
forwarded to the replica its parked call lives on (fleet/states.py says why and how). The owner's answer,
JSON or an SSE stream, is relayed to the client as it comes; an owner that is gone or does not answer gives
the spec's start-over error (-32602 Invalid requestState), in band as every modern refusal of a state.
A claimed retry refused before any session saw it (429, 503 with Retry-After, here or at the owner) has its
claim released: the retry the client is told to make is served."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from actors.frontends.http.fleet_hop import at_path, passed_on, relay_post
from actors.frontends.http.responses import JSON_HEADERS, EdgeRefusal, respond
from actors.frontends.http.sse import Send
from actors.protocol.messages import Request
from actors.protocol.request_state import RequestStateError
from actors.session.parked import digest_of, subject_of

if TYPE_CHECKING:
    from actors.fleet.states import FleetStates

TRY_AGAIN: Final = (429, 503)  # refusals before any session saw the request, with Retry-After


class Retry(enum.Enum):
    """What the fleet did with a modern POST before it is served here."""

    ANSWERED = "answered"  # refused (used already, its owner gone), or forwarded and the answer relayed
    CLAIMED = "claimed"  # its state claimed for it: serve it here (`release` it when refused before)
    NOT_CLAIMED = "not claimed"  # no state of the fleet's, or claimed by the replica that forwarded it


async def served_by_fleet(
    states: FleetStates,
    headers: Mapping[str, str],
    frame: bytes,
    request: Request,
    send: Send,
    principal: str | None = None,
    path: str | None = None,
) -> Retry:
    """The retry answered here (refused, or forwarded and relayed), or to be served locally; `principal`:
    the subject of the request's token, which a state names; `path`: its route's, when it came at one."""
    from actors.fleet.states import FORWARDED_HEADER

    state = _state_of(request)
    if state is None:
        return Retry.NOT_CLAIMED
    payload = states.payload_of(state)
    if payload is None or states.forwarded(headers.get(FORWARDED_HEADER), frame):
        # not the fleet's (the session refuses it), or claimed already by the replica that sent it
        return Retry.NOT_CLAIMED
    if not _made_for(payload, request, principal):
        # not this request's (other arguments, another principal, a session's): the session refuses it as
        # a gateway alone does, and the state stays good for the retry it was made for
        return Retry.NOT_CLAIMED
    if not await states.claim(state):
        await _start_over(send, request, "used already")
        return Retry.ANSWERED
    owner = states.owner_elsewhere(payload)
    if owner is None:
        return Retry.CLAIMED
    url = await states.owner_url(owner)
    if url is None:
        await _start_over(send, request, "its call was parked on a replica that is gone; start the call over")
        return Retry.ANSWERED
    passed = {**passed_on(headers), FORWARDED_HEADER: states.sign(frame)}
    status = await relay_post(at_path(url, path), passed, frame, send, owner)
    if status is None:
        await _start_over(send, request, "its call was parked on a replica that did not answer; start over")
    elif status in TRY_AGAIN:
        await states.release(state)
    return Retry.ANSWERED


async def release(states: FleetStates, request: Request) -> None:
    """A retry claimed here (Retry.CLAIMED) refused before any session saw it: its state may be used again."""
    state = _state_of(request)
    if state is not None:
        await states.release(state)


def _made_for(payload: Mapping[str, object], request: Request, principal: str | None) -> bool:
    """Whether a state was sealed for this very request (method, tool or URI, arguments) and principal, and
    for no session: what the parked call's table checks before it continues one (session/parked.py)."""
    params = request.params if isinstance(request.params, dict) else {}
    expected = (request.method, subject_of(request.method, params), digest_of(params), principal)
    return (payload.get("m"), payload.get("n"), payload.get("a"), payload.get("p")) == expected and (
        payload.get("s") is None
    )


def _state_of(request: Request) -> str | None:
    state = request.params.get("requestState") if isinstance(request.params, dict) else None
    return state if isinstance(state, str) else None


async def _start_over(send: Send, request: Request, reason: str) -> None:
    await respond(
        send, 200, EdgeRefusal(request.id, RequestStateError(reason).to_rpc_error()).body(), JSON_HEADERS
    )
