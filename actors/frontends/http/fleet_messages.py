"""With [fleet]: what a legacy HTTP client POSTs that is no request, served on whichever replica it lands on
(no balancer stickiness needed).

- An answer to a request of the gateway (elicitation, sampling, roots/list) belongs to the replica that sent
  that request, which its id names (fleet/ask_ids.py): forwarded to it over the internal hop (fleet_hop.py)
  when that is another replica, and its status relayed; at most one hop (a replica whose registered URL
  reaches another is refused, not looped). An id no replica of this fleet sent to this session (forged,
  altered, another session's, a bare number) is refused with 400 and reaches no session. An answer for this
  replica whose copy of the session has ended here is taken and dropped (202), as an answer to a withdrawn
  request is: nothing waits for it.
- A notification goes to this replica's copy of the session when there is one, as without a fleet, and the
  copies on other replicas are told what they may need (`tell_other_copies`; fleet/relay.py TOLD): a cancel
  (its request runs where its POST landed), initialized when another replica opened the session (its copy
  waits for it: copies taken up elsewhere had theirs replayed), roots/list_changed (every copy's backends).
  A notification makes no copy here: with none, the session is checked in Redis for the request's
  principal (404 when the fleet does not hold it for them), told to the others and answered 202.
- A copy here gets what it is told from elsewhere (`told_here`), at most MAX_TOLD_WAITING at a time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import orjson
import trio
from loguru import logger

from actors.frontends.auth import Principal, Refused
from actors.frontends.http.fleet_hop import at_path, passed_on, relay_post
from actors.frontends.http.fleet_sessions import UNKNOWN
from actors.frontends.http.responses import respond
from actors.frontends.http.sessions import SESSION_HEADER
from actors.frontends.http.sse import Send
from actors.protocol.messages import ErrorResponse, Message, Notification, Response

if TYPE_CHECKING:
    from actors.fleet.sessions import FleetSessions
    from actors.fleet.states import FleetStates
    from actors.frontends.http.sessions import HttpSession, HttpSessions
    from actors.routes import RouteState

MAX_TOLD_WAITING: Final = 16  # notifications from other replicas waiting for room in one copy's inbound
# queue (transport.INBOUND_SIZE): past it, dropped and logged, rather than tasks without bound
INITIALIZED: Final = "notifications/initialized"
CANCELLED: Final = "notifications/cancelled"
NOT_ASKED: Final = "this answers no request the gateway sent in this session"


async def served_in_fleet(
    sessions: HttpSessions,
    headers: dict[str, str],
    principal: Principal | None,
    message: Message,
    frame: bytes,
    send: Send,
    route: RouteState | None = None,
) -> bool:
    """True when `message` was answered here (forwarded, refused, or taken with no copy of its session
    here); False when this replica's copy of the session takes it, as without a fleet."""
    fleet, states = sessions.fleet, sessions.fleet_states
    session_id = headers.get(SESSION_HEADER)
    if fleet is None or states is None or not session_id:
        return False
    if isinstance(message, Response | ErrorResponse):
        path = route.config.paths[0] if route is not None and route.config.paths else None
        return await _answer(sessions, fleet, states, session_id, headers, message, frame, send, path)
    if not isinstance(message, Notification) or session_id in sessions or session_id in sessions.taking_up:
        return False  # a request; or a copy here (or being made) takes the notification: `tell_other_copies`
    if not await fleet.known(session_id, principal, route.config.name if route is not None else None):
        raise Refused(404, UNKNOWN)
    fleet.tell_others(session_id, message.method, message.params)
    await respond(send, 202, b"", [])
    return True


def tell_other_copies(sessions: HttpSessions, session_id: str, message: Message) -> None:
    """[fleet]: a notification this replica's copy of the session was given, told to its other copies."""
    fleet = sessions.fleet
    if fleet is None or not isinstance(message, Notification):
        return
    if message.method == INITIALIZED and fleet.opened_here(session_id):
        return  # the copy waiting for it is this one
    fleet.tell_others(session_id, message.method, message.params)


def told_here(sessions: HttpSessions, session_id: str, method: str, params: dict[str, Any]) -> None:
    """A notification the client of `session_id` sent to another replica, given to the copy here: a cancel
    ends its request's stream here at once (as when the client sends it here); the session hears each."""
    entry = sessions.get(session_id)
    if entry is None or sessions.fleet is None:
        return
    if method == INITIALIZED and not sessions.fleet.opened_here(session_id):
        return  # a copy taken up here had its own initialized replayed
    if entry.told_waiting >= MAX_TOLD_WAITING:
        with logger.contextualize(session=entry.label):
            logger.warning("dropped a {} told by another replica: {} wait already", method, MAX_TOLD_WAITING)
        return
    if method == CANCELLED:
        entry.transport.cancelled(params)
    frame = orjson.dumps({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})
    entry.told_waiting += 1
    sessions.nursery.start_soon(_give, entry, frame)


async def _give(entry: HttpSession, frame: bytes) -> None:
    try:
        await entry.transport.deliver(frame)
    except (trio.ClosedResourceError, trio.BrokenResourceError):
        pass  # the copy ended meanwhile: nothing of it waits for the notification
    finally:
        entry.told_waiting -= 1


async def _answer(
    sessions: HttpSessions,
    fleet: FleetSessions,
    states: FleetStates,
    session_id: str,
    headers: dict[str, str],
    answer: Response | ErrorResponse,
    frame: bytes,
    send: Send,
    path: str | None = None,
) -> bool:
    """The client's answer to a request a replica of the fleet sent it, to that replica (at `path`, the
    route's, when it came at one)."""
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
    if await relay_post(at_path(url, path), passed, frame, send, asker) is None:
        raise Refused(502, f"replica {asker}, which sent this request, did not answer; nothing takes this")
    return True
