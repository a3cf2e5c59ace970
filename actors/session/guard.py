"""The gateway's [policy] and [limits] where a session names a target.

A denied request is refused before anything reaches a backend, with the answer the target would get if it
did not exist (as peers do for hidden tools: nothing tells a caller what it may not see): -32602 "Unknown
tool/prompt" for tools/call and prompts/get (and completion's prompt refs), resource-not-found for
resources/read and subscriptions, -32602 for a completion's template ref. Lists are filtered per caller,
each item as if it were called (its mcp.method is the call's), and paged over the filtered list.
A tools/call over a limit gets a tool result with isError: "rate limited, retry in N s".

What is judged is the one canonical target a request reaches, never the client's spelling of it: the
backend and, for a resource, the public form of the URI that backend is sent (`resource_target`; the
router also takes `backend+uri` for a URI published bare), for a tool or prompt its public name (the
routes map each backend's name from one public name: `named_target`). Rules match the public forms users
see in the lists, and every spelling that reaches the same backend URI gets the same decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from loguru import logger

from actors.catalog import Route
from actors.catalog.resource_routes import public_uri, resource_route, template_owner
from actors.catalog.view import CatalogView
from actors.limits import Refusal
from actors.policy import Decision, Target
from actors.protocol.codec import clip
from actors.protocol.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND, rpc_error
from actors.protocol.messages import ErrorResponse, RequestId
from actors.session.fields import held_error

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher

Item = Mapping[str, Any]
CALL_OF: dict[str, str] = {  # a list's items are judged as the call that would use them
    "tools": "tools/call",
    "prompts": "prompts/get",
    "resources": "resources/read",
    "resourceTemplates": "resources/read",
}


def decide(d: Dispatcher, target: Target) -> Decision | None:
    """The policy's decision, or None without a [policy]. A denial is logged (never with claims)."""
    gate = d.settings.policy
    if gate is None or gate.policy is None:
        return None
    decision = gate.decide(d.caller, target)
    if not decision.allowed:
        logger.info(
            "policy denied {} {} for {}: {} ({})",
            target.method,
            clip(target.tool or target.prompt or target.uri or target.backend),
            d.caller.subject or d.caller.address,
            decision.rule,
            decision.reason,
        )
    return decision


def resource_target(view: CatalogView, method: str, route: Route, spelled: str | None = None) -> Target:
    """What a request reaching a backend's URI (as `spelled`, when known) is judged as: that backend and
    the URI's public form."""
    return Target(method, route.backend, uri=public_uri(view, route, spelled))


def named_target(view: CatalogView, method: str, kind: str, name: str, route: Route | None) -> Target:
    """What a request naming a tool or prompt by its public name is judged as (the name is the only
    spelling the routes take to that backend's tool or prompt; a route's rename of a tool is judged as
    the catalog's name it shows, so no rule keyed by that name is walked past through a route)."""
    backend = route.backend if route is not None else ""
    if kind == "tool":
        return Target(method, backend, tool=view.public_tool(name))
    return Target(method, backend, prompt=name)


def unknown(request_id: RequestId, kind: str, name: str) -> ErrorResponse:
    shown = clip(name)
    return ErrorResponse(request_id, rpc_error(INVALID_PARAMS, f"Unknown {kind}: {shown}", **{kind: shown}))


def mark(d: Dispatcher, request_id: RequestId, event: str, **attributes: str | float) -> None:
    """An event on the request's SERVER span, when tracing is on: what the gateway decided and why."""
    if d.settings.tracing is not None:
        entry = d.inflight.get(request_id)
        if entry is not None and entry.span is not None:
            entry.span.event(event, attributes)


def denied(d: Dispatcher, request_id: RequestId, decision: Decision | None) -> bool:
    """Whether the policy denied the request (its span is told which rule did)."""
    if decision is None or decision.allowed:
        return False
    mark(d, request_id, "mcp.gateway.policy_denied", rule=decision.rule, reason=decision.reason)
    return True


def refuse_target(
    d: Dispatcher, request_id: RequestId, kind: str, name: str, target: Target
) -> ErrorResponse | None:
    """tools/call, prompts/get: refused as unknown when the policy denies it."""
    gate = d.settings.policy
    if gate is None or gate.policy is None:
        return None  # no [policy]: nothing to decide (the forwarding path's common case)
    decision = decide(d, target)
    return unknown(request_id, kind, name) if denied(d, request_id, decision) else None


def refuse_uri(
    d: Dispatcher, request_id: RequestId, method: str, route: Route, spelled: str
) -> ErrorResponse | None:
    """resources/read and subscribe (and a listen's subscriptions): refused as not found, under the URI
    as the client `spelled` it, when the policy denies the backend's URI it reaches."""
    gate = d.settings.policy
    if gate is None or gate.policy is None:
        return None  # no [policy]: nothing to decide (no canonical form to work out either)
    decision = decide(d, resource_target(d.catalog.value, method, route, spelled))
    if not denied(d, request_id, decision):
        return None
    message = f"Resource not found: {clip(spelled)}"
    return ErrorResponse(request_id, rpc_error(RESOURCE_NOT_FOUND, message, uri=spelled))


def refuse_completion(d: Dispatcher, request_id: RequestId, target: Target) -> ErrorResponse | None:
    decision = decide(d, target)
    if not denied(d, request_id, decision):
        return None
    message = "Invalid params: completion/complete needs a ref to a known prompt or resource template"
    return ErrorResponse(request_id, rpc_error(INVALID_PARAMS, message))


def refuse_round(d: Dispatcher, request_id: RequestId, target: Target) -> ErrorResponse | None:
    """A later round of a call (a legacy client's, lived out by the gateway): judged by the rules in force,
    refused as the first round would have been."""
    decision = decide(d, target)
    if not denied(d, request_id, decision):
        return held_round(d, request_id, target)
    if target.tool or target.prompt:
        kind = "tool" if target.tool else "prompt"
        return unknown(request_id, kind, target.tool or target.prompt)
    message = f"Resource not found: {clip(target.uri)}"
    return ErrorResponse(request_id, rpc_error(RESOURCE_NOT_FOUND, message, uri=target.uri))


def held_round(d: Dispatcher, request_id: RequestId, target: Target) -> ErrorResponse | None:
    """A later round of a call whose tool or prompt its backend's trust holds now (it changed mid-call):
    refused as the first round would be."""
    view = d.catalog.value
    kind, name = ("tool", target.tool) if target.tool else ("prompt", target.prompt)
    held = view.held if kind == "tool" else view.held_prompts
    if not (held and name and name in held):
        return None
    return ErrorResponse(request_id, held_error(held[name], target.backend, kind, name))


def visible(d: Dispatcher, key: str, items: tuple[Item, ...], version: int) -> tuple[tuple[Item, ...], int]:
    """The items of a list this caller may see, and the version its cursors carry."""
    gate = d.settings.policy
    if gate is None or gate.policy is None:
        return items, version
    view = d.catalog.value
    method = CALL_OF[key]

    def target_of(item: Item) -> Target | None:
        return _item_target(view, key, method, item)

    return gate.visible(d.caller, key, version, items, target_of), gate.version(version)


def news(d: Dispatcher) -> dict[str, int]:
    """What a session tells its client of each list (list_changed, listens): the catalog's news of it, and
    with a [policy] also which items this caller sees, so a reload that changes them is news and one that
    does not, is not."""
    view = d.catalog.value
    told = dict(view.news)
    gate = d.settings.policy
    if gate is None or gate.policy is None:
        return told
    lists = {
        "tools": (view.tools, view.tools_version),
        "prompts": (view.prompts, view.prompts_version),
        "resources": (view.resources + view.templates, view.resources_version),
    }
    return {kind: told[kind] + (_shown(d, kind, *lists[kind]) << 32) for kind in told}


def _shown(d: Dispatcher, kind: str, items: tuple[Item, ...], version: int) -> int:
    """Which items of a list this caller sees, as one number."""
    gate = d.settings.policy
    assert gate is not None
    view = d.catalog.value
    method = CALL_OF[kind]

    def target_of(item: Item) -> Target | None:
        return _item_target(view, kind if kind != "resources" else _key_of(item), method, item)

    # tools and prompts: the very lists their list handlers filter, so this pass warms their cache
    shown = gate.visible(
        d.caller, "seen:resources" if kind == "resources" else kind, version, items, target_of
    )
    return hash(tuple(item.get("name") or item.get("uri") or item.get("uriTemplate") for item in shown))


def _key_of(item: Item) -> str:
    """A resource's or a template's list, from its shape (they are announced together)."""
    return "resourceTemplates" if "uriTemplate" in item else "resources"


def _item_target(view: CatalogView, key: str, method: str, item: Item) -> Target | None:
    if key == "tools" or key == "prompts":
        name = item.get("name")
        routes = view.routes if key == "tools" else view.prompt_routes
        route = routes.get(name) if isinstance(name, str) else None
        return (
            named_target(view, method, key[:-1], name, route)
            if route is not None and isinstance(name, str)
            else None
        )
    if key == "resources":
        uri = item.get("uri")
        route = resource_route(view, uri) if isinstance(uri, str) else None
        return resource_target(view, method, route, uri) if route is not None else None
    template = item.get("uriTemplate")
    owner, _ = template_owner(view, template) if isinstance(template, str) else (None, "")
    return (
        Target(method, owner.backend, uri=template)
        if owner is not None and isinstance(template, str)
        else None
    )


def limit_call(d: Dispatcher, request_id: RequestId, backend: str, tool: str) -> Refusal | None:
    """A new tools/call counted against the caller's limits (its in-flight slot freed when the request's
    entry leaves the table, however it ends), or why it may not go now."""
    limiter = d.settings.limiter
    if limiter is None or not limiter.active:
        return None
    admitted = limiter.admit(d.caller.key, backend, tool)
    if isinstance(admitted, Refusal):
        logger.info(
            "limits refused tools/call {} for {}: {}",
            clip(tool),
            d.caller.subject or d.caller.address,
            admitted.kind,
        )
        mark(d, request_id, "mcp.gateway.rate_limited", kind=admitted.kind, retry_s=admitted.retry_after_s)
        return admitted
    entry = d.inflight.get(request_id)
    if entry is None:
        admitted()
    else:
        entry.release = admitted
    return None


def limited_result(refusal: Refusal) -> dict[str, Any]:
    """What a model reads when a call is over a limit: a tool result it can act on."""
    return {
        "content": [{"type": "text", "text": refusal.message}],
        "isError": True,
        "_meta": {"retryAfterSeconds": refusal.retry_after_s},
    }
