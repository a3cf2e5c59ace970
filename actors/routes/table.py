"""The gateway's routes: for each, its definition, its revision and the catalog as it shows it.

A route's sessions are given its RouteWatch where others get the catalog's Watch: the same value, version
and waits, with each snapshot seen through the route (compiled once per catalog snapshot and revision). A
reload swaps definitions in place; a changed one takes a new revision, and the catalog's watch is published
again so every session looks, and the sessions of changed routes only find news."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any, Final

import attrs
import trio
from loguru import logger

from actors.catalog import CatalogView
from actors.config.route_schema import MAX_OVERRIDES, RouteConfig
from actors.discovery.indexes import SearchIndexes
from actors.discovery.settings import DiscoverySettings
from actors.policy import Policy, PolicyGate
from actors.policy.narrowed import narrowed
from actors.routes.view import rename_collisions, route_view
from actors.runtime.watch import Watch

_REVISIONS: Final = itertools.count(1)


@attrs.define(eq=False)
class RouteState:
    """Owns: one route's definition in force, its revision and its last compiled view."""

    config: RouteConfig
    catalog: Watch[CatalogView]
    default_discovery: DiscoverySettings | None = None  # the gateway's [discovery], for a route without
    # the gateway's [policy] (its gate, swapped by a reload): the route's sessions are judged by `gate`, the
    # gateway's rules narrowed by the route's own; its decisions are counted with the gateway's (/metrics)
    outer: PolicyGate = attrs.field(factory=PolicyGate)
    gate: PolicyGate = attrs.field(init=False)
    # unique among every route and revision of this process: versions and news carry it, and the caches
    # keyed by a list's version (the policy's filtered lists, cursors) never mistake one view for another
    revision: int = attrs.field(factory=lambda: next(_REVISIONS))
    search: SearchIndexes | None = None  # the route's own [discovery] (its view's names): its index
    _compiled: tuple[object, int, CatalogView] | None = None
    _policy: Policy | None = None  # the route's own [routes.policy], compiled
    _told: set[tuple[int, str]] = attrs.field(factory=set)  # renames onto catalog names, logged once

    def __attrs_post_init__(self) -> None:
        self.search = _search_of(self.config, self.default_discovery)
        self.gate = PolicyGate(decisions=self.outer.decisions)
        self._policy = _compiled_policy(self.config)
        self.narrow()

    def narrow(self) -> None:
        """The route's gate on the rules in force: the gateway's (after a reload swapped them), narrowed by
        the route's own; sessions hold the gate, so they are judged by the new rules from the next request."""
        self.gate.swap(narrowed(self.outer.policy, self._policy))

    @property
    def value(self) -> CatalogView:
        base = self.catalog.value
        compiled = self._compiled
        if compiled is None or compiled[0] is not base or compiled[1] != self.revision:
            view = route_view(base, self.config, self.revision)
            self._compiled = compiled = (base, self.revision, view)
            self._tell_collisions(base)
        return compiled[2]

    def _tell_collisions(self, base: CatalogView) -> None:
        """A rename onto a name the catalog has now (a reload would have been refused for it): logged
        once per route definition and name; the rename wins, the other tool is not shown here."""
        for key, reason in rename_collisions(base, [self.config]):
            if (self.revision, key) not in self._told:
                if len(self._told) >= MAX_OVERRIDES:
                    self._told.clear()
                self._told.add((self.revision, key))
                logger.error("route {}: {}: {}", self.config.name, key.split(".", 1)[1], reason)

    @property
    def version(self) -> int:
        return self.catalog.version

    def follow(self, mailbox: trio.MemorySendChannel[Any], marker: object) -> Any:
        return self.catalog.follow(mailbox, marker)

    async def wait_newer(self, seen_version: int) -> tuple[int, CatalogView]:
        version, _ = await self.catalog.wait_newer(seen_version)
        return version, self.value

    def publish(self, value: CatalogView) -> None:  # never called: the catalog publishes its own watch
        raise TypeError("a route's view is published by the catalog")

    def reconfigure(self, config: RouteConfig) -> bool:
        if config == self.config:
            return False
        if self.search is not None:
            self.search.close()
        self.config, self.revision, self._compiled = config, next(_REVISIONS), None
        self.search = _search_of(config, self.default_discovery)
        self._policy = _compiled_policy(config)
        self.narrow()
        return True

    def close(self) -> None:
        if self.search is not None:
            self.search.close()
            self.search = None


def _compiled_policy(config: RouteConfig) -> Policy | None:
    return config.policy.compiled(f"routes.{config.name}.") if config.policy is not None else None


def _search_of(config: RouteConfig, default: DiscoverySettings | None) -> SearchIndexes | None:
    """The route's own index (of its view's names and versions), by its [discovery] or the gateway's."""
    discovery = config.discovery or default
    return SearchIndexes(discovery) if discovery is not None and discovery.mode != "direct" else None


@attrs.define(eq=False)
class Routes:
    """Owns: every route's RouteState, by name and by path. Stops when: `close` (gateway shutdown)."""

    catalog: Watch[CatalogView]
    default_discovery: DiscoverySettings | None = None
    policy: PolicyGate = attrs.field(factory=PolicyGate)  # the gateway's [policy]
    _by_name: dict[str, RouteState] = attrs.field(factory=dict)

    @classmethod
    def of(
        cls,
        configs: Sequence[RouteConfig],
        catalog: Watch[CatalogView],
        default_discovery: DiscoverySettings | None = None,
        policy: PolicyGate | None = None,
    ) -> Routes:
        routes = cls(catalog, default_discovery, policy or PolicyGate())
        routes.reconfigure(configs)
        return routes

    def __iter__(self) -> Iterator[RouteState]:
        return iter(self._by_name.values())

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(path for state in self for path in state.config.paths)

    def at(self, path: str) -> RouteState | None:
        """The route served at `path` (None: the listener's own path, the whole catalog)."""
        for state in self:
            if path in state.config.paths:
                return state
        return None

    @property
    def stdio(self) -> RouteState | None:
        return next((state for state in self if state.config.stdio), None)

    def reconfigure(self, configs: Sequence[RouteConfig]) -> None:
        """A reload's routes: kept, changed (a new revision), added; a removed route's sessions keep the
        view they had (their listener refuses new ones at its path)."""
        changed = False
        kept: dict[str, RouteState] = {}
        for config in configs:
            state = self._by_name.get(config.name)
            if state is None:
                state = RouteState(config, self.catalog, self.default_discovery, self.policy)
                changed = True
            elif state.reconfigure(config):
                logger.info("route {} changed: its sessions are told list_changed", config.name)
                changed = True
            else:
                state.narrow()  # the gateway's [policy] may have changed under an unchanged route
            kept[config.name] = state
        for name, state in self._by_name.items():
            if name not in kept:
                state.close()
                changed = True
        self._by_name = kept
        if changed and configs:
            self.catalog.publish(self.catalog.value)  # every session looks; a changed route's finds news

    def close(self) -> None:
        for state in self:
            state.close()
