"""Resource URIs through the gateway: the reversible `backend+` prefix that keeps colliding URIs apart,
and the route of a resource template."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import attrs

from actors.catalog.naming import PublicNames, Route, assign_public
from actors.catalog.uri_templates import fits
from actors.protocol.messages import Tool

PREFIX_SEPARATOR: Final = "+"  # "beta+file:///a": backend beta's file:///a; '+' is legal in a URI scheme


def prefixed(backend: str, uri: str) -> str:
    return f"{backend}{PREFIX_SEPARATOR}{uri}"


def unprefixed(uri: str) -> Route | None:
    """The backend and its own URI that a `backend+uri` names (the backend may not exist), else None."""
    backend, separator, own = uri.partition(PREFIX_SEPARATOR)
    return Route(backend, own) if separator else None


def assign_public_uris(
    order: Sequence[str], lists: Mapping[str, Sequence[Tool]], key: str, always_prefix: bool
) -> PublicNames:
    """backend -> {uri (or template) -> public form}: the earliest backend in config order keeps a URI; a
    later one that lists the same URI publishes it with its name as a reversible prefix."""
    return assign_public(
        order, lists, key, separator=PREFIX_SEPARATOR, always_prefix=always_prefix, hide_taken=None
    )


@attrs.frozen
class TemplateRoute:
    backend: str
    prefix: str  # "" or "backend+" when the template collided
    template: str  # the backend's own form of the template
    held: str | None = None  # why its trust holds it: it routes, so a read under it is refused by name

    def owns(self, uri: str) -> str | None:
        """The backend's own URI when `uri` is one this template expands to, else None."""
        if not uri.startswith(self.prefix):
            return None
        own = uri[len(self.prefix) :]
        return own if fits(self.template, own) else None
