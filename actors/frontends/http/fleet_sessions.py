"""With [fleet]: a legacy HTTP session another replica opened, taken up here when its request lands here.

The id is checked first (sealed by the fleet, naming its owner: fleet/session_ids.py), then its facts are
read from Redis for the request's principal (fleet/sessions.py). A local session is opened under the same
id and the client's initialize is replayed into it as the client sent it, its answer kept from the client
(which had it from the owner), then notifications/initialized, then what its client set since and some
replica noted (`note_answered`): its log level and its resource subscriptions, asked again the same way.
The session is then what the owner's is to its client, less what lived only there (open GET streams, the
replay window). An id the fleet does not know for this principal, or no Redis, is 404 like any unknown id:
the client initializes again. Requests for one id that arrive together take it up once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import orjson
import trio
from loguru import logger

from actors.frontends.auth import Principal, Refused

if TYPE_CHECKING:
    from actors.fleet.sessions import FleetSessions
    from actors.frontends.http.sessions import HttpSession, HttpSessions
    from actors.frontends.http.transport import RequestStream
    from actors.protocol.messages import Request
    from actors.routes import RouteState

REPLAY_ID: Final = "gateway-fleet-take-up"  # the replayed initialize's id: its answer goes to nobody
REPLAY_DEADLINE_S: Final = 30.0  # an initialize held while backends start answers within initialize_hold_s
RESTORE_DEADLINE_S: Final = 10.0  # the level and subscriptions asked again: what is not answered by then is
# left out (the client is served meanwhile; its subscriptions stay in Redis for a later take-up)
NOTED: Final = frozenset({"logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
UNKNOWN: Final = "unknown or expired session; initialize a new one"


async def take_up(
    sessions: HttpSessions,
    fleet: FleetSessions,
    session_id: str,
    principal: Principal | None,
    address: str,
    route: RouteState | None = None,
) -> None:
    """`session_id` open here as the fleet knows it; Refused(404) when it does not (429/503 at the limits).
    A request that waited on another's take-up which failed tries its own, for its own answer: the other's
    429 or 503 is no 404 (which would make its client start over, its session lost)."""
    while (pending := sessions.taking_up.get(session_id)) is not None:
        await pending.wait()
        if session_id in sessions:
            return
    sessions.taking_up[session_id] = done = trio.Event()
    try:
        initialize = await fleet.recall(session_id, principal, route.config.name if route else None)
        if initialize is None:
            raise Refused(404, UNKNOWN)
        try:
            _, entry = sessions.open(principal, address, session_id, route)  # the route it was opened on
        except Refused:  # no room for a copy here (429, 503): nothing kept for one
            fleet.dropped(session_id)
            raise
        sessions.enter(entry)
        try:
            with logger.contextualize(session=entry.label):
                await _replay(sessions, session_id, entry, initialize)
                await _restore(fleet, session_id, entry)
                logger.info("session taken up from replica {}", fleet.owner(session_id))
        finally:
            sessions.leave(entry)
    finally:
        del sessions.taking_up[session_id]
        done.set()


async def note_answered(
    fleet: FleetSessions | None, session_id: str, request: Request, stream: RequestStream
) -> None:
    """[fleet]: a logging/setLevel, resources/subscribe or unsubscribe answered with a result is kept for
    a replica that takes the session up (one answered later, after its POST went away, is not)."""
    if fleet is None or request.method not in NOTED or not stream.finished or not stream.events:
        return
    try:
        answer = orjson.loads(stream.events[-1][1])
    except orjson.JSONDecodeError:
        return
    if isinstance(answer, dict) and "result" in answer and answer.get("id") == request.id:
        await fleet.note(session_id, request.method, request.params)


async def _replay(
    sessions: HttpSessions, session_id: str, entry: HttpSession, initialize: dict[str, Any]
) -> None:
    try:
        answer = await _ask(entry, REPLAY_ID, "initialize", initialize, REPLAY_DEADLINE_S)
        if isinstance(answer, dict) and "result" in answer:
            await entry.transport.deliver(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
            return
    except (trio.ClosedResourceError, trio.BrokenResourceError):
        pass
    logger.warning("could not take up the session: its initialize was not answered again")
    sessions.end(session_id, entry)
    raise Refused(404, UNKNOWN)


async def _restore(fleet: FleetSessions, session_id: str, entry: HttpSession) -> None:
    """The log level and the resource subscriptions the client set, asked again in this copy."""
    state = fleet.state_of(session_id)
    asks = [("logging/setLevel", {"level": state.level})] if state.level is not None else []
    asks += [("resources/subscribe", {"uri": uri}) for uri in sorted(state.uris)]
    done = 0
    with trio.move_on_after(RESTORE_DEADLINE_S):
        for number, (method, params) in enumerate(asks):
            try:
                answer = await _ask(entry, f"{REPLAY_ID}-{number}", method, params, RESTORE_DEADLINE_S)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return  # the copy ended meanwhile: its request will be 404
            done += isinstance(answer, dict) and "result" in answer
    if done < len(asks):
        logger.warning("the session's level and subscriptions: {} of {} set again here", done, len(asks))


async def _ask(
    entry: HttpSession, request_id: str, method: str, params: dict[str, Any], deadline_s: float
) -> object:
    """A request of the gateway's own delivered into the session as if its client sent it; its answer (None
    when none came within `deadline_s`), which goes to nobody else."""
    stream = entry.transport.open_request(request_id, None)
    assert stream is not None, "the gateway's own ids are in flight once at a time"
    request = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    try:
        await entry.transport.deliver(orjson.dumps(request))
        with trio.move_on_after(deadline_s):
            while not stream.finished:  # the answer is the stream's last event
                await stream.wait_beyond(stream.last_number)
            return orjson.loads(stream.events[-1][1]) if stream.events else None
        return None
    finally:
        entry.transport.forget(stream)
