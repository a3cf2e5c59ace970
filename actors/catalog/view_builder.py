"""Building a CatalogView from the backends' entries: public names by the naming rule, the lists of the
ready backends under them, routes for every known owner, and versions that move only on a change."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Generic, TypeVar

import attrs
from loguru import logger

from actors.catalog.entry import BackendEntry, ListKind
from actors.catalog.naming import (
    MAX_NAME_LENGTH,
    PREFIX_ON_COLLISION,
    PublicNames,
    Route,
    assign_public_names,
    portable,
    renamed,
    routes_of,
)
from actors.catalog.status import BackendState
from actors.catalog.uris import TemplateRoute, assign_public_uris, listed_public_form, prefixed
from actors.catalog.view import CatalogView, TrustView
from actors.output.app_uris import tool_with_public_app
from actors.protocol.codec import clip
from actors.protocol.messages import Tool
from actors.trust import DefinitionKey

Value = TypeVar("Value")


@attrs.define
class _Versioned(Generic[Value]):
    """A value, a count of its changes (what cursors are minted for), and a count of the news of it: its
    changes, and the changes a backend announced that left it as it was (a list changed and changed back
    between two listings is still news to a client that asked to hear of changes, as it would be on a
    direct connection, while its cursors stay good)."""

    value: Value
    version: int = 0
    news: int = 0

    def update(self, value: Value, announced: bool = False) -> int:
        """The version, moved on when `value` differs from the last one; the news, also when announced."""
        if value != self.value:
            self.value, self.version = value, self.version + 1
            self.news += 1
        elif announced:
            self.news += 1
        return self.version


@attrs.define
class ViewBuilder:
    """Makes each view the catalog publishes; it keeps the list versions and which names it has checked."""

    order: Sequence[str]
    rule: str
    _warned: set[str] = attrs.field(init=False, factory=set)
    _tools: _Versioned[tuple[Tool, ...]] = attrs.field(init=False, factory=lambda: _Versioned(()))
    _prompts: _Versioned[tuple[Tool, ...]] = attrs.field(init=False, factory=lambda: _Versioned(()))
    _resources: _Versioned[tuple[tuple[Tool, ...], tuple[Tool, ...]]] = attrs.field(
        init=False, factory=lambda: _Versioned(((), ()))
    )

    def build(
        self,
        entries: Mapping[str, BackendEntry],
        announced: frozenset[str] = frozenset(),
        trust: TrustView | None = None,
    ) -> CatalogView:
        """The view of these entries (every backend's, in config order); `announced`: the kinds of list a
        backend has just said changed; `trust`: the modes and held records (the hidden ones are added)."""
        names = assign_public_names(self.order, _lists(entries, "tools"), self.rule)
        routes = _tool_routes(entries, names)
        self._warn_about_names(routes)
        tools = _published(entries, names, "tools")
        prompt_names = assign_public_names(self.order, _lists(entries, "prompts"), self.rule, "prompt")
        prompts = _published(entries, prompt_names, "prompts")
        always = self.rule != PREFIX_ON_COLLISION
        uris = assign_public_uris(self.order, _lists(entries, "resources"), "uri", always)
        tools = _with_public_apps(tools, routes, listed_public_form(uris, always))
        patterns = assign_public_uris(self.order, _lists(entries, "templates"), "uriTemplate", always)
        resources = _published(entries, uris, "resources", "uri")
        templates = _published(entries, patterns, "templates", "uriTemplate")
        template_routes = tuple(
            TemplateRoute(
                backend,
                "" if public == template else prefixed(backend, ""),
                template,
                entries[backend].held.get("templates", {}).get(template),
            )
            for backend, mine in patterns.items()
            for template, public in mine.items()
        )
        held = _held(entries, names, "tools", "tool")
        held_prompts = _held(entries, prompt_names, "prompts", "prompt")
        return CatalogView(
            backends={name: entry.status for name, entry in entries.items()},
            tools=tools,
            routes=routes,
            tools_version=self._tools.update(tools, "tools" in announced),
            prompts=prompts,
            prompt_routes=_routes(prompt_names),
            prompts_version=self._prompts.update(prompts, "prompts" in announced),
            resources=resources,
            templates=templates,
            resource_routes=_routes(uris),
            template_routes=template_routes,
            always_prefix=always,
            resources_version=self._resources.update(
                (resources, templates), bool(announced & {"resources", "templates"})
            ),
            news={
                "tools": self._tools.news,
                "prompts": self._prompts.news,
                "resources": self._resources.news,
            },
            held={public: why for public, (_, why) in held.items()},
            held_prompts={public: why for public, (_, why) in held_prompts.items()},
            held_templates=tuple(route for route in template_routes if route.held is not None),
            trust=_trust_view(trust, entries, held, held_prompts, template_routes),
        )

    def _warn_about_names(self, routes: Mapping[str, Route]) -> None:
        """Clients may refuse tool names over 64 characters or outside [A-Za-z0-9_.-]: say so, once each."""
        for public, route in routes.items():
            if public in self._warned:
                continue
            self._warned.add(public)  # checked: each name once
            if portable(public):
                continue
            logger.bind(backend=route.backend).warning(
                "tool name {!r} is longer than {} characters or uses characters outside [A-Za-z0-9_.-]; "
                "some clients refuse it (rename it in [backends.tools])",
                public,
                MAX_NAME_LENGTH,
            )


def _with_public_apps(
    tools: tuple[Tool, ...], routes: Mapping[str, Route], public_form: Callable[[str, str], str]
) -> tuple[Tool, ...]:
    """The tools with the app each points at (`_meta.ui.resourceUri`) named in its public form."""
    shown: list[Tool] = []
    changed = False
    for tool in tools:
        route = routes.get(tool.get("name"))  # type: ignore[arg-type]
        if route is not None and isinstance(tool.get("_meta"), dict):
            public = tool_with_public_app(tool, partial(public_form, route.backend), None)
            changed = changed or public is not tool
            tool = public
        shown.append(tool)
    return tuple(shown) if changed else tools


def _lists(entries: Mapping[str, BackendEntry], kind: ListKind) -> dict[str, tuple[Tool, ...]]:
    """Every backend's last known list of that kind, whether it is up or not."""
    return {name: entry.listed(kind) for name, entry in entries.items()}


def _published(
    entries: Mapping[str, BackendEntry], names: PublicNames, kind: ListKind, key: str = "name"
) -> tuple[Tool, ...]:
    """What ready backends offer, under their public names (or URIs), less what their trust holds."""
    published: list[Tool] = []
    for backend, entry in entries.items():
        if entry.status.state is BackendState.READY:
            mine, listed = entry.shown(kind, names[backend]), entry.listed(kind)
            published += entry.memo(kind, listed, mine, partial(renamed, listed, mine, key))
    return tuple(published)


def _held(
    entries: Mapping[str, BackendEntry], names: PublicNames, kind: ListKind, noun: str
) -> dict[str, tuple[DefinitionKey, str]]:
    """public name -> the held definition and what a call to it is told, for each held tool or prompt."""
    held: dict[str, tuple[DefinitionKey, str]] = {}
    for backend, entry in entries.items():
        for shown, why in entry.held.get(kind, {}).items():
            public = names[backend].get(shown)
            if public is not None:
                own = entry.originals.get(shown, shown) if kind == "tools" else shown
                message = f"{noun} '{clip(public)}' of backend '{backend}' is held for review: {why}"
                held[public] = (DefinitionKey(backend, noun, own), message)  # type: ignore[arg-type]
    return held


def _trust_view(
    trust: TrustView | None,
    entries: Mapping[str, BackendEntry],
    held: Mapping[str, tuple[DefinitionKey, str]],
    held_prompts: Mapping[str, tuple[DefinitionKey, str]],
    template_routes: tuple[TemplateRoute, ...],
) -> TrustView:
    if trust is None:
        return TrustView()
    hidden = {key: public for public, (key, _) in (*held.items(), *held_prompts.items())}
    for route in template_routes:
        if route.held is not None:
            hidden[DefinitionKey(route.backend, "template", route.template)] = route.public
    return attrs.evolve(trust, hidden=hidden)


def _tool_routes(entries: Mapping[str, BackendEntry], names: PublicNames) -> dict[str, Route]:
    """public name -> owner and own name for every known tool, down backends' too, so errors can name them."""
    routes: dict[str, Route] = {}
    for backend, mine in names.items():
        entry = entries[backend]
        routes.update(
            entry.memo("routes", entry.tools, mine, partial(routes_of, backend, mine, entry.originals))
        )
    return routes


def _routes(names: PublicNames) -> dict[str, Route]:
    """public name (or URI) -> its owner and own name, for lists no policy renames (prompts, resources)."""
    return {public: Route(backend, own) for backend, mine in names.items() for own, public in mine.items()}
