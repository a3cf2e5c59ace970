"""CatalogView: the immutable snapshot of the catalog that sessions route with and list from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from actors.catalog.naming import Route
from actors.catalog.status import BackendStatus
from actors.catalog.uris import TemplateRoute
from actors.protocol.messages import Tool
from actors.trust import DefinitionKey, Held, TrustMode


@attrs.frozen(kw_only=True)
class TrustView:
    """What trust holds now, for the operator (the admin listener): each backend's mode, every held record,
    and the definitions hidden from clients now, each with its public name (held records of forms no
    longer listed are not hidden: the backend lists another form, shown or held)."""

    modes: Mapping[str, TrustMode] = attrs.field(factory=dict)
    held: tuple[Held, ...] = ()
    hidden: Mapping[DefinitionKey, str] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class CatalogView:
    """An immutable snapshot. `routes` covers every tool with a known owner, including tools of backends
    that are down (so an error can name the owner); `tools` lists only what is callable now. Each
    version moves when its list changes, so a session knows when to say list_changed."""

    backends: Mapping[str, BackendStatus]
    tools: tuple[Tool, ...] = ()
    routes: Mapping[str, Route] = attrs.field(factory=dict)
    tools_version: int = 0
    prompts: tuple[Tool, ...] = ()  # prompts follow the same naming rule as tools
    prompt_routes: Mapping[str, Route] = attrs.field(factory=dict)
    prompts_version: int = 0
    resources: tuple[Tool, ...] = ()  # URIs follow the rule too, with a reversible "backend+" prefix
    templates: tuple[Tool, ...] = ()
    resource_routes: Mapping[str, Route] = attrs.field(factory=dict)  # public URI -> owner, its own URI
    template_routes: tuple[TemplateRoute, ...] = ()  # in config order
    always_prefix: bool = False  # the naming rule is "always-prefix": every URI's public form is prefixed
    resources_version: int = 0  # resources and templates together
    # held for review by their backends' trust (kept in the routes, so a call is refused by name and no
    # other backend's name moves): public name (of a tool, of a prompt) -> why, and the held templates
    held: Mapping[str, str] = attrs.field(factory=dict)
    held_prompts: Mapping[str, str] = attrs.field(factory=dict)
    held_templates: tuple[TemplateRoute, ...] = ()
    trust: TrustView = attrs.field(factory=TrustView)
    # per kind ("tools", "prompts", "resources"): its changes and the changes its backends announced; what
    # list_changed follows (the versions above are what cursors and cached filtered lists follow)
    news: Mapping[str, int] = attrs.field(factory=lambda: dict.fromkeys(("tools", "prompts", "resources"), 0))
    # a route's view only ([[routes]], actors/routes/): public tool name -> the arguments the route fixes
    fixed: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    # a route's view only: a renamed tool's name -> its catalog name, the one name every check judges
    # ([policy], [limits], tool_scopes): a rename is how a route shows a tool, never a second identity
    canonical: Mapping[str, str] = attrs.field(factory=dict)

    def public_tool(self, name: str) -> str:
        """The catalog's name of the tool this view calls `name`."""
        canonical = self.canonical
        return canonical.get(name, name) if canonical else name

    @property
    def settled(self) -> bool:
        """Every backend has become ready or ended its first start."""
        return all(status.settled for status in self.backends.values())

    def server_capabilities(self) -> dict[str, Any]:
        """What the gateway can route now, as initialize's capabilities: a feature is offered when a ready
        backend offers it (resource subscriptions too). Tools always: the gateway's catalog is made of
        them, and a client told of no tools would ignore the list_changed sent when a backend comes up."""
        offered = [status.capabilities for status in self.backends.values() if status.ready]
        capabilities: dict[str, Any] = {"tools": {"listChanged": True}}
        if any("prompts" in c for c in offered):
            capabilities["prompts"] = {"listChanged": True}
        if any("resources" in c for c in offered):
            subscribe = any(
                isinstance(c["resources"], dict) and c["resources"].get("subscribe")
                for c in offered
                if "resources" in c
            )
            capabilities["resources"] = {"listChanged": True, "subscribe": subscribe}
        for feature in ("completions", "logging"):
            if any(feature in c for c in offered):
                capabilities[feature] = {}
        return capabilities

    def instructions(self) -> str:
        """The ready backends' instructions, each under its backend's name."""
        return "\n\n".join(
            f"## {name}\n{status.instructions}"
            for name, status in self.backends.items()
            if status.ready and status.instructions
        )
