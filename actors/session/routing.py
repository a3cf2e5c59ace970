"""Which ready backend a request names, by a tool's or prompt's public name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from actors.catalog import Route
from actors.protocol.messages import ErrorResponse, Params, RequestId
from actors.session import guard
from actors.session.fields import backend_down, held_error, named_error
from actors.session.forward import Forward

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher


def forward_named(
    d: Dispatcher,
    request_id: RequestId,
    params: Params,
    method: str,
    kind: str,
    routes: Mapping[str, Route],
    *,
    policy_checked: bool = False,
) -> Forward | ErrorResponse:
    """A request naming a tool or prompt by its public name: to the owner, under the owner's name, when
    the [policy] lets this caller (unless `policy_checked` already) and its trust does not hold it."""
    error = named_error(params)
    if error is not None:
        return ErrorResponse(request_id, error)
    name: str = params["name"]
    route = routes.get(name)
    view = d.catalog.value
    status = view.backends.get(route.backend) if route is not None else None
    if route is None or status is None:
        return guard.unknown(request_id, kind, name)
    target = guard.named_target(view, method, kind, name, route)  # each later round is judged by it
    refused = None if policy_checked else guard.refuse_target(d, request_id, kind, name, target)
    if refused is not None:
        return refused
    held = view.held if kind == "tool" else view.held_prompts
    if held and name in held:  # held for review: one look-up, and only while anything is held
        return ErrorResponse(request_id, held_error(held[name], route.backend, kind, name))
    if not status.ready:
        return ErrorResponse(request_id, backend_down(name, status, kind))
    return Forward(
        status, method, params if route.own == name else {**params, "name": route.own}, None, target
    )
