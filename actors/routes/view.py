"""A route's view: the catalog snapshot as one route shows it, a pure function of the two.

Sessions of a route route with this view as others do with the catalog's: tools/list, tools/call, search,
schemas, prompts and resources all read it, so a name the route does not show is as unknown through it as a
name nobody has, whatever path asks (a renamed tool's catalog name included). Versions and news carry the
route's revision, so a reload that changes the route alone is news to its sessions only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from actors.catalog import CatalogView
from actors.catalog.naming import Route
from actors.config.route_schema import RouteConfig, ToolOverride
from actors.protocol.errors import INVALID_PARAMS, rpc_error
from actors.protocol.messages import ErrorResponse, Params, RequestId

Tool = dict[str, Any]
REVISION_SHIFT: Final = 40  # a route's revision, above any catalog version or news count


def route_view(view: CatalogView, route: RouteConfig, revision: int) -> CatalogView:
    """`view` as `route` shows it; `revision` (above 0, unique per route and definition) moves every
    version and news count, so no cache keyed by a version takes this view for another."""
    names = _public_names(view, route)  # catalog name -> the name this route shows
    tools = tuple(
        _shown(tool, route.tools.get(tool["name"]), names[tool["name"]])
        for tool in view.tools
        if tool.get("name") in names
    )
    routes: dict[str, Route] = {shown: view.routes[public] for public, shown in names.items()}
    fixed = {
        names[public]: override.hide
        for public, override in route.tools.items()
        if override.hide and public in names
    }
    shows = route.shows
    bump = revision << REVISION_SHIFT
    return attrs.evolve(
        view,
        tools=tools,
        routes=routes,
        tools_version=view.tools_version + bump,
        prompts=tuple(p for p in view.prompts if shows(str(p.get("name", "")))),
        prompt_routes={name: r for name, r in view.prompt_routes.items() if shows(name)},
        prompts_version=view.prompts_version + bump,
        resources=tuple(r for r in view.resources if shows(str(r.get("uri", "")))),
        templates=tuple(t for t in view.templates if shows(str(t.get("uriTemplate", "")))),
        resource_routes={uri: r for uri, r in view.resource_routes.items() if shows(uri)},
        template_routes=tuple(t for t in view.template_routes if shows(t.public)),
        resources_version=view.resources_version + bump,
        held={names[name]: why for name, why in view.held.items() if name in names},
        held_prompts={name: why for name, why in view.held_prompts.items() if shows(name)},
        held_templates=tuple(t for t in view.held_templates if shows(t.public)),
        news={kind: count + bump for kind, count in view.news.items()},
        fixed=fixed,
        canonical={shown: public for public, shown in names.items() if shown != public},
    )


def _public_names(view: CatalogView, route: RouteConfig) -> dict[str, str]:
    """Each catalog tool name this route shows, and the name it shows it by. A rename wins over a catalog
    tool that already has the name (which the route then does not show): one name, one tool."""
    names: dict[str, str] = {}
    for public in view.routes:
        if route.shows(public):
            override = route.tools.get(public)
            names[public] = override.name if override is not None and override.name else public
    taken = {shown for public, shown in names.items() if shown != public}
    return {public: shown for public, shown in names.items() if shown != public or public not in taken}


def rename_collisions(view: CatalogView, routes: Sequence[RouteConfig]) -> list[tuple[str, str]]:
    """Each rename onto the public name of another tool its route shows, as (key, reason): known only once
    the backends have listed (a reload is refused for it; at start the rename wins and this is logged)."""
    problems: list[tuple[str, str]] = []
    for index, route in enumerate(routes):
        for public, override in route.tools.items():
            target = override.name
            if not target or target == public or target not in view.routes or not route.shows(target):
                continue
            own = route.tools.get(target)
            if own is not None and own.name and own.name != target:
                continue  # that tool is shown under another name here: the name is free
            owner = view.routes[target]
            reason = f"{target!r} is the public name of {owner.backend}'s tool {owner.own!r}, shown here too"
            problems.append((f"routes[{index}].tools.{public}.name", reason))
    return problems


def _shown(tool: Tool, override: ToolOverride | None, name: str) -> Tool:
    if override is None:
        return tool
    shown = {**tool, "name": name}
    if override.title is not None:
        shown["title"] = override.title
    if override.description is not None:
        shown["description"] = override.description
    if override.annotations:
        shown["annotations"] = {**_table(tool.get("annotations")), **override.annotations}
    if override.meta:
        shown["_meta"] = {**_table(tool.get("_meta")), **override.meta}
    if override.hide:
        shown["inputSchema"] = _without(tool.get("inputSchema"), override.hide)
    return shown


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _without(schema: Any, hidden: Mapping[str, Any]) -> dict[str, Any]:
    """The schema with the fixed arguments gone from its properties and its required list."""
    schema = _table(schema)
    properties = {k: v for k, v in _table(schema.get("properties")).items() if k not in hidden}
    required = schema.get("required")
    shown = {**schema, "type": schema.get("type", "object"), "properties": properties}
    if isinstance(required, list):
        shown["required"] = [name for name in required if name not in hidden]
    return shown


def fixed_arguments(view: CatalogView, request_id: RequestId, params: Params) -> Params | ErrorResponse:
    """A tools/call through a route: its fixed arguments set, or -32602 when the client sent one."""
    name = params.get("name")
    fixed = view.fixed.get(name) if isinstance(name, str) else None
    if not fixed:
        return params
    arguments = params.get("arguments", {})
    if not isinstance(arguments, dict):  # not an object: refused on the call's own path, as without a route
        return params
    sent = sorted(name for name in fixed if name in arguments)
    if sent:
        names = ", ".join(repr(name[:64]) for name in sent[:8])
        message = f"Invalid params: {names} fixed by this endpoint's route; call without it"
        return ErrorResponse(request_id, rpc_error(INVALID_PARAMS, message))
    return {**params, "arguments": {**arguments, **fixed}}
