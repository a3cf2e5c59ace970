"""Which backend owns a resource URI or a resource template, and the URI forms on each side."""

from __future__ import annotations

from typing import Any

from actors.catalog.naming import Route
from actors.catalog.uris import prefixed, unprefixed
from actors.catalog.view import CatalogView


def resource_route(view: CatalogView, uri: str) -> Route | None:
    """A listed URI, else the first template (config order) it fits, else an explicit `backend+` prefix."""
    route = view.resource_routes.get(uri)
    if route is not None:
        return route
    for template in view.template_routes:
        own = template.owns(uri)
        if own is not None:
            return Route(template.backend, own)
    explicit = unprefixed(uri)
    return explicit if explicit is not None and explicit.backend in view.backends else None


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


def template_owner(view: CatalogView, published: str) -> tuple[Route | None, str]:
    """The backend whose resource template is published as `published`, and the template's own form."""
    for template in view.template_routes:
        if published.startswith(template.prefix) and template.template == published[len(template.prefix) :]:
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
