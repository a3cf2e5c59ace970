"""resources/list, resources/templates/list, resources/read, resources/subscribe and unsubscribe.

A resource's URI is routed to its owner and given to it in the owner's form; what comes back names it as
the client wrote it."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Final

from actors.catalog import BackendStatus, Route
from actors.catalog.resource_routes import resource_route, with_public_uri
from actors.protocol.codec import clip
from actors.protocol.errors import RESOURCE_NOT_FOUND, rpc_error
from actors.protocol.messages import ErrorResponse, Message, Params, RequestId, Response
from actors.protocol.pages import page
from actors.session import guard
from actors.session.fields import backend_down, invalid_field
from actors.session.forward import Forward
from actors.session.settings import TOO_MANY_REQUESTS

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher

MAX_URI_CHARS: Final = 8192  # a longer URI is refused before any resource template is matched against it
MAX_SUBSCRIPTIONS: Final = 1024  # resources one session may be subscribed to (the table is the gateway's)


def list_resources(d: Dispatcher, request_id: RequestId, params: Params) -> Message:
    view = d.catalog.value
    resources, version = guard.visible(d, "resources", view.resources, view.resources_version)
    return page(request_id, params, "resources", resources, version, d.settings.page_size)


def list_templates(d: Dispatcher, request_id: RequestId, params: Params) -> Message:
    view = d.catalog.value
    templates, version = guard.visible(d, "resourceTemplates", view.templates, view.resources_version)
    return page(request_id, params, "resourceTemplates", templates, version, d.settings.page_size)


def read_resource(d: Dispatcher, request_id: RequestId, params: Params) -> Message | Forward:
    routed = owner(d, request_id, params, "resources/read")
    if isinstance(routed, ErrorResponse):
        return routed
    status, own, uri = routed
    rewrite = partial(with_public_uri, own=own, public=uri) if own != uri else None
    target = guard.resource_target(d.catalog.value, "resources/read", Route(status.name, own), uri)
    return Forward(status, "resources/read", {**params, "uri": own}, rewrite, target)


async def subscribe(d: Dispatcher, request_id: RequestId, params: Params) -> Message:
    """The first session to subscribe to a URI subscribes the gateway at the owner; the others join once the
    owner has said yes. This session then gets notifications/resources/updated for it, under the form it
    used."""
    routed = owner(d, request_id, params, "resources/subscribe")
    if isinstance(routed, ErrorResponse):
        return routed
    status, own, uri = routed
    # Counted in the shared table from the moment a subscribe is asked for, across the session's listens
    # too: subscribes sent together cannot all pass one check.
    if (status.name, own) not in d.subscriptions and watched(d) >= MAX_SUBSCRIPTIONS:
        message = f"Too many subscriptions: this session has {MAX_SUBSCRIPTIONS}; unsubscribe from some"
        return ErrorResponse(request_id, rpc_error(TOO_MANY_REQUESTS, message, limit=MAX_SUBSCRIPTIONS))
    forward = Forward(status, "resources/subscribe", {**params, "uri": own})
    ask = partial(d.forwarder.wait, forward, request_id, d.inflight.get(request_id))
    answer = await d.settings.subscriptions.subscribe(
        status.name, own, d.session, ask, lambda answer: isinstance(answer, Response)
    )
    if answer is not None and not isinstance(answer, Response):
        return answer
    d.subscriptions[(status.name, own)] = uri
    return Response(request_id, {}) if answer is None else answer


async def unsubscribe(d: Dispatcher, request_id: RequestId, params: Params) -> Message:
    """This session stops getting the updates; the last session to leave unsubscribes the gateway."""
    routed = owner(d, request_id, params)
    if isinstance(routed, ErrorResponse):
        return routed
    status, own, _ = routed
    d.subscriptions.pop((status.name, own), None)
    if d.settings.subscriptions.remove(status.name, own, d.session):
        forward = Forward(status, "resources/unsubscribe", {**params, "uri": own})
        return await d.forwarder.wait(forward, request_id, d.inflight.get(request_id))
    return Response(request_id, {})


def watched(d: Dispatcher) -> int:
    """The resources this session watches or is asking to, through resources/subscribe and every listen
    (each counted in the shared table from the moment it is asked for)."""
    table = d.settings.subscriptions
    return table.held_by(d.session) + sum(table.held_by(holder) for holder in d.listen_holders)


def release_subscriptions(d: Dispatcher, holder: str | None = None) -> None:
    """At the end of the session (or of one of its listens, `holder`): what nobody else wants is unsubscribed
    at its backend, at once or, when its inbox is full, by the gateway's task (catalog/subscriptions.py)."""
    d.settings.subscriptions.release(holder or d.session, d.catalog.value)


def owner(
    d: Dispatcher, request_id: RequestId, params: Params, method: str | None = None
) -> tuple[BackendStatus, str, str] | ErrorResponse:
    """The ready backend that owns params.uri, its form of the URI, and the URI as the client wrote it;
    with `method`, only when the [policy] lets this caller reach that backend's URI, however it is spelled
    (else it is not found)."""
    uri = params.get("uri")
    if not isinstance(uri, str):
        return ErrorResponse(request_id, invalid_field("uri", "a string"))
    if len(uri) > MAX_URI_CHARS:
        return ErrorResponse(request_id, invalid_field("uri", f"at most {MAX_URI_CHARS} characters long"))
    view = d.catalog.value
    route = resource_route(view, uri)
    status = view.backends.get(route.backend) if route is not None else None
    if route is None or status is None:
        return ErrorResponse(
            request_id, rpc_error(RESOURCE_NOT_FOUND, f"Resource not found: {clip(uri)}", uri=uri)
        )
    refused = guard.refuse_uri(d, request_id, method, route, uri) if method else None
    if refused is not None:
        return refused
    if not status.ready:
        return ErrorResponse(request_id, backend_down(uri, status, "resource"))
    return status, route.own, uri
