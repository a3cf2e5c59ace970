"""With [fleet]: a legacy HTTP session another replica opened, taken up here when its request lands here.

The id is checked first (sealed by the fleet, naming its owner: fleet/session_ids.py), then its facts are
read from Redis for the request's principal (fleet/sessions.py). A local session is opened under the same
id and the client's initialize is replayed into it as the client sent it, its answer kept from the client
(which had it from the owner), then notifications/initialized: the session is then what the owner's is to
its client, less what lived only there (a log level set, resource subscriptions, open GET streams). An id
the fleet does not know for this principal, or no Redis, is 404 like any unknown id: the client
initializes again. Requests for one id that arrive together take it up once.
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

REPLAY_ID: Final = "gateway-fleet-take-up"  # the replayed initialize's id: its answer goes to nobody
REPLAY_DEADLINE_S: Final = 30.0  # an initialize held while backends start answers within initialize_hold_s
UNKNOWN: Final = "unknown or expired session; initialize a new one"


async def take_up(
    sessions: HttpSessions, fleet: FleetSessions, session_id: str, principal: Principal | None, address: str
) -> None:
    """`session_id` open here as the fleet knows it; Refused(404) when it does not (429/503 at the limits)."""
    pending = sessions.taking_up.get(session_id)
    if pending is not None:
        await pending.wait()
        return
    sessions.taking_up[session_id] = done = trio.Event()
    try:
        initialize = await fleet.recall(session_id, principal)
        if initialize is None:
            raise Refused(404, UNKNOWN)
        _, entry = sessions.open(principal, address, session_id)
        sessions.enter(entry)
        try:
            with logger.contextualize(session=entry.label):
                await _replay(sessions, session_id, entry, initialize)
                logger.info("session taken up from replica {}", fleet.owner(session_id))
        finally:
            sessions.leave(entry)
    finally:
        del sessions.taking_up[session_id]
        done.set()


async def _replay(
    sessions: HttpSessions, session_id: str, entry: HttpSession, initialize: dict[str, Any]
) -> None:
    stream = entry.transport.open_request(REPLAY_ID, None)
    assert stream is not None, "a session just opened has no request in flight"
    request = {"jsonrpc": "2.0", "id": REPLAY_ID, "method": "initialize", "params": initialize}
    answer = None
    try:
        await entry.transport.deliver(orjson.dumps(request))
        with trio.move_on_after(REPLAY_DEADLINE_S):
            await stream.wait_beyond(0)
            answer = orjson.loads(stream.events[0][1]) if stream.events else None
        if isinstance(answer, dict) and "result" in answer:
            await entry.transport.deliver(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
            return
    except (trio.ClosedResourceError, trio.BrokenResourceError):
        pass
    finally:
        entry.transport.forget(stream)
    logger.warning("could not take up the session: its initialize was not answered again")
    sessions.end(session_id, entry)
    raise Refused(404, UNKNOWN)
