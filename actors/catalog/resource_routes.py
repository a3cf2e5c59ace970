"""Which backend owns a resource URI or a resource template, and the URI forms on each side."""

from __future__ import annotations

from typing import Any

from actors.catalog.naming import Route
from actors.catalog.uri_templates import fits
from actors.catalog.uris import prefixed, ui_route, unprefixed
from actors.catalog.view import CatalogView
from actors.protocol.codec import clip


def resource_route(view: CatalogView, uri: str) -> Route | None:
    """A listed URI, else the first template (config order) it fits, else an explicit `backend+` prefix
    (or, for an app, `ui://backend/rest`)."""
    route = view.resource_routes.get(uri)
    if route is not None:
        return route
    for template in view.template_routes:
        own = template.owns(uri)
        if own is not None:
            return Route(template.backend, own)
    for explicit in (unprefixed(uri), ui_route(uri)):
        if explicit is not None and explicit.backend in view.backends:
            return explicit
    return None


def public_uri(view: CatalogView, route: Route, spelled: str | None = None) -> str:
    """The one public form of a backend's URI, whichever spelling reached it (`spelled`, when known, saves
    routing the bare form again): what the naming rule would publish it as. Every spelling
    `resource_route` takes to `route` is either `route.own` or `{backend}+{own}`; the bare one is the
    public form unless the rule always prefixes or the bare URI is another backend's (listed, under a
    template or by an explicit prefix). What [policy] judges (#34)."""
    if not view.always_prefix:
        bare = route if spelled == route.own else resource_route(view, route.own)
        if bare is None or bare == route:
            return route.own
    return prefixed(route.backend, route.own)


def held_template(view: CatalogView, route: Route, template: bool = False) -> str | None:
    """Why a request reaching `route` is refused when it reaches it under a resource template its backend's
    trust holds (however the URI was spelled: the backend's own URI is what is matched), unless the
    backend lists that URI itself; with `template`, `route.own` is a template (a completion's ref)."""
    for held in view.held_templates:
        if held.backend != route.backend:
            continue
        if held.template == route.own if template else fits(held.template, route.own):
            if not template and route in view.resource_routes.values():
                return None
            name = clip(held.public)
            return f"resource template '{name}' of backend '{route.backend}' is held for review: {held.held}"
    return None


def template_owner(view: CatalogView, published: str) -> tuple[Route | None, str]:
    """The backend whose resource template is published as `published`, and the template's own form."""
    for template in view.template_routes:
        if template.public == published:
            return Route(template.backend, template.template), template.template
    return None, published


def with_public_uri(result: dict[str, Any], own: str, public: str) -> dict[str, Any]:
    """The read result with the backend's URI replaced by the one the client asked for."""
    contents = result.get("contents")
    if not isinstance(contents, list):
        return result
    renamed = [
        {**item, "uri": public} if isinstance(item, dict) and item.get("uri") == own else item
        for item in contents
    ]
    return {**result, "contents": renamed}
