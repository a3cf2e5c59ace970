"""subscriptions/listen (MCP 2026-07-28): a modern client's standing request for the notifications it opts
into, in place of the legacy session's list_changed and resources/subscribe.

The request stays in flight for as long as the client listens. Its first message is
notifications/subscriptions/acknowledged with the subset the gateway honours: a list's changes when some
ready backend offers that feature (tools always), and each resource whose owner took the subscription (the
gateway subscribes at the owner through the table every session shares, under a holder of its own per
listen). Every later notification carries the listen's id as `_meta.subscriptionId`. The client ends it with
notifications/cancelled (no answer then); the gateway, when the session ends, with the graceful result.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from actors.catalog.resource_routes import resource_route
from actors.protocol.envelopes import next_call_id
from actors.protocol.eras import SUBSCRIPTION_ID_KEY
from actors.protocol.errors import rpc_error
from actors.protocol.messages import ErrorResponse, Message, Notification, Params, RequestId, Response
from actors.session import guard
from actors.session.fields import invalid_field
from actors.session.forward import Forward
from actors.session.resources import MAX_SUBSCRIPTIONS, MAX_URI_CHARS, release_subscriptions, watched
from actors.session.settings import TOO_MANY_REQUESTS

if TYPE_CHECKING:
    from actors.protocol.envelopes import BackendEvent
    from actors.session.dispatcher import Dispatcher

MAX_LISTENS: Final = 64  # open listen requests per session
MAX_RESOURCES: Final = 1024  # resources one listen may watch
LISTS: Final = {
    "toolsListChanged": "tools",
    "promptsListChanged": "prompts",
    "resourcesListChanged": "resources",
}


@attrs.define(eq=False, kw_only=True)
class Listen:
    """One open listen: what it asked for and was granted, and the list versions it was last told of."""

    request_id: RequestId
    holder: str  # its name in the gateway's subscription table
    lists: frozenset[str]  # "tools", "prompts", "resources"
    resources: dict[tuple[str, str], str]  # (backend, its URI) -> the URI as the client wrote it
    announced: dict[str, int] = attrs.field(factory=dict)

    def notification(self, method: str, params: dict[str, Any] | None = None) -> Notification:
        return Notification(method, {**(params or {}), "_meta": {SUBSCRIPTION_ID_KEY: self.request_id}})


async def listen(d: Dispatcher, request_id: RequestId, params: Params) -> Message:
    """Acknowledge, then stay in flight, telling the client of what it asked for, until it cancels."""
    wanted = params.get("notifications", {})
    problem = _problem(wanted)
    if problem is not None:
        return ErrorResponse(request_id, problem)
    # Counted from the start (no await between the check and the count): listens sent together cannot
    # all pass a check made before any of them is counted.
    if len(d.listen_holders) >= MAX_LISTENS:
        message = f"Too many listens: this session has {MAX_LISTENS} open; cancel some"
        return ErrorResponse(request_id, rpc_error(TOO_MANY_REQUESTS, message, limit=MAX_LISTENS))
    asked = len(dict.fromkeys(wanted.get("resourceSubscriptions", [])))
    if asked and watched(d) + asked > MAX_SUBSCRIPTIONS:
        message = (
            f"Too many resource subscriptions: a session may watch at most {MAX_SUBSCRIPTIONS} resources, "
            f"across its listens and resources/subscribe; it watches {watched(d)}"
        )
        return ErrorResponse(request_id, rpc_error(TOO_MANY_REQUESTS, message, limit=MAX_SUBSCRIPTIONS))
    view = d.catalog.value
    offered = {"tools"} | {
        feature
        for status in view.backends.values()
        if status.ready
        for feature in ("prompts", "resources")
        if feature in status.capabilities
    }
    lists = frozenset(kind for flag, kind in LISTS.items() if wanted.get(flag) is True and kind in offered)
    entry = Listen(
        request_id=request_id, holder=f"{d.session}#listen-{next_call_id()}", lists=lists, resources={}
    )
    d.listen_holders.add(entry.holder)
    try:
        for uri in wanted.get("resourceSubscriptions", []):
            await _subscribe(d, entry, uri)
        granted: dict[str, Any] = {flag: True for flag, kind in LISTS.items() if kind in lists}
        if entry.resources:
            granted["resourceSubscriptions"] = list(dict.fromkeys(entry.resources.values()))
        entry.announced = _versions(d)
        await d.send(
            entry.notification("notifications/subscriptions/acknowledged", {"notifications": granted})
        )
        d.listens[request_id] = entry
        await announce(d, entry)  # what changed while it was being acknowledged
        await trio.sleep_forever()
    finally:
        if d.listens.get(request_id) is entry:  # not closed already (a later listen may reuse its id)
            del d.listens[request_id]
        d.listen_holders.discard(entry.holder)
        release_subscriptions(d, entry.holder)  # its own holder: a second release finds nothing
    raise AssertionError("unreachable")  # pragma: no cover


def close(d: Dispatcher, request_id: RequestId) -> None:
    """The listen is over: nothing more goes to it, and its resources are released at once (before the
    requests that follow its cancel are served)."""
    entry = d.listens.pop(request_id, None)
    if entry is not None:
        release_subscriptions(d, entry.holder)


def end_all(d: Dispatcher) -> None:
    """The client's stream ended: every listen ends now, with its graceful result."""
    for request_id in list(d.listens):
        entry = d.inflight.get(request_id)
        if entry is not None:
            d.forwarder.stop(entry, "the client's stream ended")


def ended(request_id: RequestId, server_info: dict[str, Any]) -> Response:
    """The graceful end of a listen the gateway closes (its session is ending)."""
    meta = {SUBSCRIPTION_ID_KEY: request_id, "io.modelcontextprotocol/serverInfo": server_info}
    return Response(request_id, {"resultType": "complete", "_meta": meta})


async def announce(d: Dispatcher, entry: Listen | None = None) -> None:
    """list_changed to each listen (or to `entry`) for each list it follows that changed since it was told."""
    versions = _versions(d)
    for listening in [entry] if entry is not None else list(d.listens.values()):
        for kind in listening.lists:
            if listening.announced.get(kind) != versions[kind]:
                listening.announced[kind] = versions[kind]
                await d.send(listening.notification(f"notifications/{kind}/list_changed"))


async def updated(d: Dispatcher, event: BackendEvent) -> None:
    """A backend's resources/updated, to each listen watching that resource, under the client's URI."""
    params = event.notification.params
    uri = params.get("uri") if isinstance(params, dict) else None
    if event.notification.method != "notifications/resources/updated" or not isinstance(uri, str):
        return
    for listening in list(d.listens.values()):
        public = listening.resources.get((event.backend, uri))
        if public is not None:
            await d.send(listening.notification("notifications/resources/updated", {"uri": public}))


def _versions(d: Dispatcher) -> dict[str, int]:
    return guard.news(d)  # the catalog's news, and under a [policy] what this caller sees


def _problem(wanted: object) -> Any:
    if not isinstance(wanted, dict):
        return invalid_field("notifications", "an object")
    for flag in LISTS:
        if flag in wanted and not isinstance(wanted[flag], bool):
            return invalid_field(f"notifications.{flag}", "a boolean")
    uris = wanted.get("resourceSubscriptions", [])
    if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
        return invalid_field("notifications.resourceSubscriptions", "an array of strings")
    if len(uris) > MAX_RESOURCES:
        return invalid_field("notifications.resourceSubscriptions", f"at most {MAX_RESOURCES} URIs")
    if any(len(uri) > MAX_URI_CHARS for uri in uris):
        return invalid_field(
            "notifications.resourceSubscriptions", f"URIs of at most {MAX_URI_CHARS} characters"
        )
    return None


async def _subscribe(d: Dispatcher, entry: Listen, uri: str) -> None:
    """Watch `uri` if its owner is up and takes subscriptions; a refusal leaves it out of what is granted."""
    view = d.catalog.value
    route = resource_route(view, uri)
    status = view.backends.get(route.backend) if route is not None else None
    if route is None or status is None or not status.ready:
        return
    if guard.refuse_uri(d, entry.request_id, "resources/subscribe", route, uri) is not None:
        return  # denied by the [policy]: left out of what is granted, as a URI nobody owns
    resources = status.capabilities.get("resources")
    if not (isinstance(resources, dict) and resources.get("subscribe") is True):
        return
    if (status.name, route.own) in entry.resources:
        return
    forward = Forward(status, "resources/subscribe", {"uri": route.own})
    ask = partial(d.forwarder.wait, forward, entry.request_id, None)
    answer = await d.settings.subscriptions.subscribe(
        status.name, route.own, entry.holder, ask, lambda answer: isinstance(answer, Response)
    )
    if answer is None or isinstance(answer, Response):
        entry.resources[(status.name, route.own)] = uri
