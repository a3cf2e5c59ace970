"""The tools a principal's scopes cover: a per-session middleware that hides every tool needing a scope the
session's token was not granted (a call of a hidden tool is then refused as unknown), and the check the
HTTP frontend makes before a call when the config asks for 403 insufficient_scope instead."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs

from actors.catalog.view import CatalogView
from actors.identity.principal import Principal
from actors.middleware.base import ClientInfo, Middleware
from actors.protocol.messages import Tool


def missing_scopes(
    principal: Principal, tool: str, tool_scopes: Mapping[str, frozenset[str]]
) -> frozenset[str]:
    """The scopes a call of `tool` needs that the principal lacks (none: it may call it)."""
    return principal.lacks(tool_scopes.get(tool, frozenset()))


@attrs.define(eq=False)
class ScopeGate(Middleware):
    """Owns: nothing but the principal of one session and the config's tool scopes. Reads: the session's
    route (`names`), whose renames are judged as the catalog names they show."""

    principal: Principal
    tool_scopes: Mapping[str, frozenset[str]]
    names: NamedView | None = None  # the session's route, when it has one

    def filter_tools(self, client: ClientInfo, tools: Sequence[Tool]) -> Sequence[Tool]:
        public = self.names.value.public_tool if self.names is not None else _same
        scopes = self.tool_scopes
        return [tool for tool in tools if not missing_scopes(self.principal, public(tool["name"]), scopes)]


class NamedView(Protocol):
    """What renames a tool (a route's state): its view's `public_tool` gives the catalog's name."""

    @property
    def value(self) -> CatalogView: ...


def _same(name: str) -> str:
    return name
