"""Resource URIs through the gateway: the reversible `backend+` prefix that keeps colliding URIs apart,
and the route of a resource template."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

import attrs

from actors.catalog.naming import PublicNames, Route, assign_public
from actors.catalog.uri_templates import fits
from actors.output.app_uris import is_ui, ui_prefixed, ui_unprefixed
from actors.protocol.messages import Tool

PREFIX_SEPARATOR: Final = "+"  # "beta+file:///a": backend beta's file:///a; '+' is legal in a URI scheme


def prefixed(backend: str, uri: str) -> str:
    """`backend+uri`; an app's `ui://rest` keeps its scheme, as `ui://backend/rest` (output/app_uris.py)."""
    return ui_prefixed(backend, uri) if is_ui(uri) else f"{backend}{PREFIX_SEPARATOR}{uri}"


def unprefixed(uri: str) -> Route | None:
    """The backend and its own URI that a `backend+uri` names (the backend may not exist), else None."""
    backend, separator, own = uri.partition(PREFIX_SEPARATOR)
    return Route(backend, own) if separator else None


def ui_route(uri: str) -> Route | None:
    """The backend and its own `ui://` URI that a `ui://backend/rest` names (the backend may not exist)."""
    parts = ui_unprefixed(uri)
    return Route(*parts) if parts is not None else None


def assign_public_uris(
    order: Sequence[str], lists: Mapping[str, Sequence[Tool]], key: str, always_prefix: bool
) -> PublicNames:
    """backend -> {uri (or template) -> public form}: the earliest backend in config order keeps a URI; a
    later one that lists the same URI publishes it with its name as a reversible prefix (a `ui://` URI or
    template as `ui://backend/rest`)."""
    names = assign_public(
        order, lists, key, separator=PREFIX_SEPARATOR, always_prefix=always_prefix, hide_taken=None
    )
    for backend, mine in names.items():
        for own, public in mine.items():
            if public != own and is_ui(own):
                mine[own] = ui_prefixed(backend, own)
    return names


def listed_public_form(names: PublicNames, always_prefix: bool) -> Callable[[str, str], str]:
    """(backend, its own URI) -> the URI's public form, from the listed URIs alone: as listed; else bare
    unless the rule always prefixes or another backend publishes that URI bare. (A view's router,
    resource_routes.public_uri, decides the same with the templates too.)"""
    owners = {public: backend for backend, mine in names.items() for public in mine.values()}

    def public(backend: str, own: str) -> str:
        listed = names.get(backend, {}).get(own)
        if listed is not None:
            return listed
        owner = owners.get(own)
        return prefixed(backend, own) if always_prefix or (owner is not None and owner != backend) else own

    return public


@attrs.frozen
class TemplateRoute:
    backend: str
    prefix: str  # "" or "backend+" when the template collided (a `ui://` one: `ui://backend/...`, `public`)
    template: str  # the backend's own form of the template
    held: str | None = None  # why its trust holds it: it routes, so a read under it is refused by name

    @property
    def public(self) -> str:
        """The template as published."""
        return ui_prefixed(self.backend, self.template) if self._ui else self.prefix + self.template

    @property
    def _ui(self) -> bool:
        return bool(self.prefix) and is_ui(self.template)

    def owns(self, uri: str) -> str | None:
        """The backend's own URI when `uri` is one this template expands to, else None."""
        if self._ui:
            parts = ui_unprefixed(uri)
            if parts is None or parts[0] != self.backend:
                return None
            own = parts[1]
        elif not uri.startswith(self.prefix):
            return None
        else:
            own = uri[len(self.prefix) :]
        return own if fits(self.template, own) else None
