"""completion/complete, routed by its ref: a prompt by public name, a resource template by its published
form."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.catalog import Route
from actors.catalog.resource_routes import held_template, template_owner
from actors.policy import Target
from actors.protocol.errors import INVALID_PARAMS, rpc_error
from actors.protocol.messages import ErrorResponse, Message, Params, RequestId
from actors.session import guard
from actors.session.fields import backend_down, held_error, invalid_field
from actors.session.forward import Forward

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher


def complete(d: Dispatcher, request_id: RequestId, params: Params) -> Message | Forward:
    ref, argument = params.get("ref"), params.get("argument")
    if not isinstance(ref, dict):
        return ErrorResponse(request_id, invalid_field("ref", "an object"))
    if argument is not None and not isinstance(argument, dict):
        return ErrorResponse(request_id, invalid_field("argument", "an object"))
    view = d.catalog.value
    route: Route | None = None
    kind, name, uri = ref.get("type"), ref.get("name"), ref.get("uri")
    if kind == "ref/prompt":
        if not isinstance(name, str):
            return ErrorResponse(request_id, invalid_field("ref.name", "a string"))
        route = view.prompt_routes.get(name)
        own_ref = {**ref, "name": route.own} if route else ref
    elif kind == "ref/resource":
        if not isinstance(uri, str):
            return ErrorResponse(request_id, invalid_field("ref.uri", "a string"))
        route, own = template_owner(view, uri)
        own_ref = {**ref, "uri": own}
    else:
        return ErrorResponse(request_id, invalid_field("ref.type", '"ref/prompt" or "ref/resource"'))
    status = view.backends.get(route.backend) if route is not None else None
    if route is None or status is None:
        message = "Invalid params: completion/complete needs a ref to a known prompt or resource template"
        return ErrorResponse(request_id, rpc_error(INVALID_PARAMS, message))
    target = (  # a prompt by its one public name; a template by its published form, the only one taken
        guard.named_target(view, "completion/complete", "prompt", name, route)
        if kind == "ref/prompt"
        else Target("completion/complete", route.backend, uri=uri)
    )
    refused = guard.refuse_completion(d, request_id, target)
    if refused is not None:
        return refused
    why = (
        view.held_prompts.get(str(name))
        if kind == "ref/prompt"
        else held_template(view, route, template=True)
        if view.held_templates
        else None
    )
    if why is not None:
        return ErrorResponse(request_id, held_error(why, route.backend, "ref", str(name or uri)))
    if not status.ready:
        return ErrorResponse(request_id, backend_down(str(name or uri), status, "ref"))
    return Forward(status, "completion/complete", {**params, "ref": own_ref})
