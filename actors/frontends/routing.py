"""Which route a connection or request reaches by its path ([[routes]], actors/routes/): the catalog its
session reads (the route's view) and the settings it is built with (the route itself, whose search index
and output limit the session reads as a reload leaves them, and the route's policy gate). The listener's
own path, or no [[routes]], is the whole catalog, as before."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from actors.catalog import CatalogView
from actors.runtime.watch import Watch
from actors.session.settings import SessionSettings

if TYPE_CHECKING:
    from actors.routes import Routes, RouteState


def route_at(routes: Routes | None, path: str) -> RouteState | None:
    return routes.at(path) if routes is not None else None


def bound(
    route: RouteState | None, catalog: Watch[CatalogView], settings: SessionSettings
) -> tuple[Watch[CatalogView], SessionSettings]:
    """A session's catalog and settings on `route` (None: the whole catalog)."""
    if route is None:
        return catalog, settings
    routed = attrs.evolve(settings, route=route, policy=route.gate)  # its limit and index: read live
    return route, routed  # type: ignore[return-value]  # a RouteState reads as a Watch of its view
