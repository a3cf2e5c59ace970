"""A modern backend whose roots are the config's (`roots = [...]` or "none") asking for roots the 2026-07-28
way: a roots/list among the inputRequests of an `input_required` result. The config answers it, in every
era, as it answers a legacy backend's roots/list; the client is never asked. A backend whose roots are
not in the config ("none" only because the gateway listens on a network) leaves the ask to the call's own
client: that round is one client's, so the ambiguity the default guards against is not there.

Fixed roots: when roots/list is all the round asks, the backend is called again at once with the answer
(the client never sees the round); else the round goes on without its roots requests and carries the
gateway's answers under GATEWAY_ANSWERS, which whoever lives out the round takes (the bridge seals them into
the state it hands a modern client, the shim adds them to a legacy client's answers). "none": the call
fails, naming why, as a legacy backend's roots/list is refused. A backend that asks again for roots it was
just given fails its call rather than loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from actors.backends.client_requests import fixed_roots
from actors.protocol.envelopes import Call, Reply
from actors.protocol.errors import INTERNAL_ERROR, rpc_error
from actors.protocol.modern_results import GATEWAY_ANSWERS, INPUT_REQUIRED

if TYPE_CHECKING:
    from actors.backends.connection import BackendLink


def answered_by_config(link: BackendLink, call: Call, reply: Reply) -> Reply | Call:
    """The reply the call's caller gets, or the call to send again at once (roots were all it asked)."""
    result = reply.result
    if reply.error is not None or not isinstance(result, dict):
        return reply
    if GATEWAY_ANSWERS in result:  # the gateway's key, never a backend's to set
        result = {key: value for key, value in result.items() if key != GATEWAY_ANSWERS}
        reply = Reply(result=result)
    requests = result.get("inputRequests")
    if (
        link.envelope is None
        or not link.roots_chosen
        or link.roots == "client"
        or result.get("resultType") != INPUT_REQUIRED
    ):
        return reply
    keys = [
        key for key, asked in (requests.items() if isinstance(requests, dict) else ()) if _is_roots(asked)
    ]
    if not keys:
        return reply
    if not isinstance(link.roots, tuple):
        message = f"backend '{link.name}' asked for roots, and the gateway offers it none (roots = \"none\")"
        return Reply(error=rpc_error(INTERNAL_ERROR, message, backend=link.name))
    ours = {"roots": fixed_roots(link.roots)}
    given = (call.params or {}).get("inputResponses")
    given = given if isinstance(given, dict) else {}
    rest = {key: asked for key, asked in requests.items() if key not in keys}
    if any(key in given for key in keys) or (not rest and given and all(v == ours for v in given.values())):
        message = f"backend '{link.name}' asked again for the roots it was given"  # rather than loop
        return Reply(error=rpc_error(INTERNAL_ERROR, message, backend=link.name))
    answers: dict[str, Any] = dict.fromkeys(keys, ours)
    if rest:
        return Reply(result={**result, "inputRequests": rest, GATEWAY_ANSWERS: answers})
    params = {**(call.params or {}), "inputResponses": {**given, **answers}}
    if "requestState" in result:
        params["requestState"] = result["requestState"]
    else:
        params.pop("requestState", None)
    return attrs.evolve(call, params=params)


def _is_roots(asked: object) -> bool:
    return isinstance(asked, dict) and asked.get("method") == "roots/list"
