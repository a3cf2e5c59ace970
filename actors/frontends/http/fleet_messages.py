"""With [fleet]: what a legacy HTTP client POSTs that is no request, served on whichever replica it lands on
(no balancer stickiness needed).

An answer to a request of the gateway (elicitation, sampling, roots/list) belongs to the replica that sent
that request, which its id names (fleet/ask_ids.py): forwarded to it over the internal hop (fleet_hop.py)
when that is another replica, and its status relayed; at most one hop (a replica whose registered URL
reaches another is refused, not looped). An id no replica of this fleet sent to this session (forged,
altered, another session's, a bare number) is refused with 400 and reaches no session. An answer for this
replica whose copy of the session has ended here is taken and dropped (202), as an answer to a withdrawn
request is: nothing waits for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from loguru import logger

from actors.frontends.auth import Principal, Refused
from actors.frontends.http.fleet_hop import passed_on, relay_post
from actors.frontends.http.responses import respond
from actors.frontends.http.sessions import SESSION_HEADER
from actors.frontends.http.sse import Send
from actors.protocol.messages import ErrorResponse, Message, Response

if TYPE_CHECKING:
    from actors.fleet.sessions import FleetSessions
    from actors.fleet.states import FleetStates
    from actors.frontends.http.sessions import HttpSessions

NOT_ASKED: Final = "this answers no request the gateway sent in this session"


async def served_in_fleet(
    sessions: HttpSessions,
    headers: dict[str, str],
    principal: Principal | None,
    message: Message,
    frame: bytes,
    send: Send,
) -> bool:
    """True when `message` was answered here (forwarded, refused, or taken with no copy of its session
    here); False when this replica's copy of the session takes it, as without a fleet."""
    fleet, states = sessions.fleet, sessions.fleet_states
    session_id = headers.get(SESSION_HEADER)
    if fleet is None or states is None or not session_id:
        return False
    if isinstance(message, Response | ErrorResponse):
        return await _answer(sessions, fleet, states, session_id, headers, message, frame, send)
    return False


async def _answer(
    sessions: HttpSessions,
    fleet: FleetSessions,
    states: FleetStates,
    session_id: str,
    headers: dict[str, str],
    answer: Response | ErrorResponse,
    frame: bytes,
    send: Send,
) -> bool:
    """The client's answer to a request a replica of the fleet sent it, to that replica."""
    from actors.fleet.states import FORWARDED_HEADER

    asker = fleet.asker(session_id, answer.id)
    if asker is None:
        raise Refused(400, NOT_ASKED)
    if asker == fleet.replica:
        if session_id in sessions:
            return False
        logger.info("an answer for a copy of its session that has ended here: nothing waits for it")
        await respond(send, 202, b"", [])
        return True
    if states.forwarded(headers.get(FORWARDED_HEADER), frame):
        raise Refused(502, f"forwarded once already, yet replica {asker} sent this request; not forwarded")
    url = await states.owner_url(asker)
    if url is None:
        raise Refused(502, f"replica {asker}, which sent this request, cannot be reached; nothing takes this")
    passed = {**passed_on(headers), FORWARDED_HEADER: states.sign(frame)}
    if await relay_post(url, passed, frame, send, asker) is None:
        raise Refused(502, f"replica {asker}, which sent this request, did not answer; nothing takes this")
    return True
