"""The catalog: which backend owns which tool, under which public name, and in what state each backend is.

The Catalog actor applies facts from backends (BackendReady, ListChanged) and from their supervisor
(ChildRestarting, ChildFailed, ChildStopped) and publishes an immutable CatalogView through a Watch. Sessions
route with the newest view synchronously and wait on the Watch to tell their clients about changes.

Naming (`[gateway] tool_names`): with "prefix-on-collision" a tool keeps its bare name unless a backend
earlier in config order has a tool of that name; then it is published as `{backend}__{tool}`. The rule reads
config order and each backend's last known tool list, which a restart does not forget, so a backend going
down and coming back never renames anybody's tools.
"always-prefix" publishes every tool as `{backend}__{tool}`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

import attrs
import trio
from loguru import logger

from actors.catalog.uris import TemplateRoute, assign_public_uris, prefixed
from actors.config.tool_policy import ToolPolicy
from actors.protocol.envelopes import BackendCommand, BackendReady, ListChanged
from actors.protocol.errors import BackendError
from actors.protocol.messages import Tool
from actors.runtime.supervisor import (
    ChildEvent,
    ChildFailed,
    ChildRestarting,
    ChildStarted,
    ChildStopped,
    describe,
    leaves,
)
from actors.runtime.watch import Watch

PREFIX_ON_COLLISION = "prefix-on-collision"
ALWAYS_PREFIX = "always-prefix"
SEPARATOR = "__"
MAX_NAME_LENGTH = 64
PORTABLE_NAME = re.compile(r"[A-Za-z0-9_.-]+")

CatalogEvent = BackendReady | ListChanged | ChildEvent


class BackendState(enum.Enum):
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"
    STOPPED = "stopped"


@attrs.frozen(slots=True)
class Route:
    backend: str
    own: str  # the name (tool, prompt) or URI (resource, template) the backend itself uses


@attrs.frozen(slots=True)
class BackendStatus:
    name: str
    state: BackendState
    request_timeout_s: float
    calls: trio.MemorySendChannel[BackendCommand] | None = attrs.field(default=None, eq=False, repr=False)
    reason: str | None = None
    instructions: str | None = None
    settled: bool = False  # it has become ready or ended its first start
    capabilities: Mapping[str, Any] = attrs.field(factory=dict, eq=False)  # what its server offered
    stderr: str | None = None  # the last stderr lines of a process that ended, apart from the reason
    expose_stderr: bool = False  # [gateway] expose_backend_stderr: describe() includes them

    @property
    def ready(self) -> bool:
        """Calls can be sent to it now."""
        return self.state is BackendState.READY and self.calls is not None

    def describe(self, *, stderr: bool | None = None) -> str:
        """Its state and why, as clients' errors say it: the last stderr lines only with expose_stderr (or
        `stderr=True`, for the operator's own tools)."""
        reason = self.reason
        if reason and self.stderr and (self.expose_stderr if stderr is None else stderr):
            reason = f"{reason}; last stderr: {self.stderr}"
        return f"{self.state.value} ({reason})" if reason else self.state.value


@attrs.frozen
class CatalogView:
    """An immutable snapshot. `routes` covers every tool with a known owner, including tools of backends
    that are down (so an error can name the owner); `tools` lists only what is callable now."""

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
    resources_version: int = 0  # resources and templates together

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


def assign_public_names(
    order: Sequence[str], tool_lists: Mapping[str, Sequence[Tool]], rule: str, kind: str = "tool"
) -> dict[str, dict[str, str]]:
    """backend -> {tool name -> public name}, decided by config order over the known tool lists."""
    taken: set[str] = set()
    names: dict[str, dict[str, str]] = {}
    for backend in order:
        names[backend] = mine = {}
        for tool in tool_lists.get(backend, ()):
            name = tool.get("name")
            if not isinstance(name, str) or name in mine:
                continue  # nameless or duplicate within one backend: not routable
            public = (
                name if rule == PREFIX_ON_COLLISION and name not in taken else f"{backend}{SEPARATOR}{name}"
            )
            if public in taken:
                logger.bind(backend=backend).warning(
                    "{} {!r}: public name {!r} is taken; hidden", kind, name, public
                )
                continue
            taken.add(public)
            mine[name] = public
    return names


def _rename(items: Iterable[Tool], names: Mapping[str, str], key: str = "name") -> tuple[Tool, ...]:
    """Entries under their public names (or URIs); every other field passes through untouched."""
    published = []
    for item in items:
        public = names.get(item.get(key))  # type: ignore[arg-type]
        if public is not None:
            published.append(item if public == item[key] else {**item, key: public})
    return tuple(published)


@attrs.define
class _Entry:
    status: BackendStatus
    tools: tuple[Tool, ...] = ()  # last known list, after the backend's policy; kept while it is down
    prompts: tuple[Tool, ...] = ()  # last known prompts, resources and resource templates
    resources: tuple[Tool, ...] = ()
    templates: tuple[Tool, ...] = ()
    originals: dict[str, str] = attrs.field(factory=dict)  # renamed by the policy -> the backend's own name
    policy: ToolPolicy = attrs.field(factory=ToolPolicy)
    # Rebuilding a big catalog after one backend's restart should cost what changed, not everything:
    # what was computed from this backend's list and public names, kept while neither changes.
    _memo: dict[str, tuple[tuple[Tool, ...], Mapping[str, str], Any]] = attrs.field(factory=dict)

    def take(self, tools: tuple[Tool, ...]) -> None:
        self.tools, self.originals = self.policy.apply(tools)

    def memo(
        self, kind: str, items: tuple[Tool, ...], names: Mapping[str, str], make: Callable[[], Any]
    ) -> Any:
        """make(), or what it gave last time for the same list (the same tuple) and the same names."""
        cached = self._memo.get(kind)
        if cached is not None and cached[0] is items and cached[1] == names:
            return cached[2]
        made = make()
        self._memo[kind] = (items, names, made)
        return made


@attrs.define
class Catalog:
    """The catalog actor.

    Owns: every backend's state and last tool list, and the Watch it publishes to.
    Receives: BackendReady, ListChanged (from backends) and ChildEvents (from the backends supervisor).
    Sends: a new CatalogView through the Watch after each event.
    Stops when: its inbox ends.
    Errors: none expected; an unknown backend name in an event is ignored.
    """

    order: Sequence[str]
    request_timeouts_s: Mapping[str, float]
    rule: str
    inbox: trio.MemoryReceiveChannel[CatalogEvent]
    policies: Mapping[str, ToolPolicy] = attrs.field(factory=dict)
    expose_stderr: bool = False  # [gateway] expose_backend_stderr
    watch: Watch[CatalogView] = attrs.field(init=False)
    _warned: set[str] = attrs.field(init=False, factory=set)
    _entries: dict[str, _Entry] = attrs.field(init=False)
    _tools: tuple[Tool, ...] = attrs.field(init=False, default=())
    _tools_version: int = attrs.field(init=False, default=0)
    _prompts: tuple[Tool, ...] = attrs.field(init=False, default=())
    _prompts_version: int = attrs.field(init=False, default=0)
    _resources: tuple[tuple[Tool, ...], tuple[Tool, ...]] = attrs.field(init=False, default=((), ()))
    _resources_version: int = attrs.field(init=False, default=0)

    def __attrs_post_init__(self) -> None:
        self._entries = {
            name: _Entry(
                BackendStatus(
                    name,
                    BackendState.STARTING,
                    self.request_timeouts_s[name],
                    expose_stderr=self.expose_stderr,
                ),
                policy=self.policies.get(name, ToolPolicy()),
            )
            for name in self.order
        }
        self.watch = Watch(self.view())

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with self.inbox:
            task_status.started()
            async for event in self.inbox:
                if self.apply(event):
                    self.watch.publish(self.view())

    def apply(self, event: CatalogEvent) -> bool:
        """Update state from one event; True when the view changed."""
        entry = self._entries.get(event.id if isinstance(event, ChildEvent) else event.name)
        if entry is None:
            return False
        status = entry.status
        match event:
            case BackendReady(tools=tools, calls=calls, instructions=instructions, prompts=prompts):
                entry.take(tools)
                entry.prompts, entry.resources, entry.templates = prompts, event.resources, event.templates
                entry.status = attrs.evolve(
                    status,
                    state=BackendState.READY,
                    calls=calls,
                    reason=None,
                    stderr=None,
                    instructions=instructions,
                    settled=True,
                    capabilities=event.capabilities,
                )
                logger.bind(backend=status.name).info("ready with {} tools", len(tools))
            case ListChanged(kind="tools", items=tools):
                entry.take(tools)
                logger.bind(backend=status.name).info("tools changed: now {} tools", len(tools))
            case ListChanged(kind=kind, items=items) if kind in ("prompts", "resources", "templates"):
                setattr(entry, kind, items)
                logger.bind(backend=status.name).info("{} changed: now {}", kind, len(items))
            case ChildStarted():
                return False
            case ChildRestarting(error=error):
                entry.status = _down(status, BackendState.RESTARTING, error)
            case ChildFailed(error=error):
                entry.status = _down(status, BackendState.FAILED, error)
            case ChildStopped(error=error):
                entry.status = _down(status, BackendState.STOPPED, error)
        return True

    def _warn_about_names(self, routes: Mapping[str, Route]) -> None:
        """Clients may refuse tool names over 64 characters or outside [A-Za-z0-9_.-]: say so, once each."""
        for public, route in routes.items():
            if public in self._warned:
                continue
            self._warned.add(public)  # checked: each name once
            if len(public) <= MAX_NAME_LENGTH and PORTABLE_NAME.fullmatch(public):
                continue
            logger.bind(backend=route.backend).warning(
                "tool name {!r} is longer than {} characters or uses characters outside [A-Za-z0-9_.-]; "
                "some clients refuse it (rename it in [backends.tools])",
                public,
                MAX_NAME_LENGTH,
            )

    def view(self) -> CatalogView:
        names = assign_public_names(self.order, {n: e.tools for n, e in self._entries.items()}, self.rule)
        routes: dict[str, Route] = {}
        for backend, mine in names.items():
            entry = self._entries[backend]
            routes.update(
                entry.memo("routes", entry.tools, mine, partial(_routes, backend, mine, entry.originals))
            )
        self._warn_about_names(routes)
        tools = self._published(names, "tools")
        if tools != self._tools:
            self._tools, self._tools_version = tools, self._tools_version + 1
        prompt_names = assign_public_names(
            self.order, {n: e.prompts for n, e in self._entries.items()}, self.rule, "prompt"
        )
        prompt_routes = {
            public: Route(backend, prompt)
            for backend, mine in prompt_names.items()
            for prompt, public in mine.items()
        }
        prompts = self._published(prompt_names, "prompts")
        if prompts != self._prompts:
            self._prompts, self._prompts_version = prompts, self._prompts_version + 1
        always = self.rule != PREFIX_ON_COLLISION
        uris = assign_public_uris(
            self.order, {n: e.resources for n, e in self._entries.items()}, "uri", always
        )
        patterns = assign_public_uris(
            self.order, {n: e.templates for n, e in self._entries.items()}, "uriTemplate", always
        )
        resources = self._published(uris, "resources", "uri")
        templates = self._published(patterns, "templates", "uriTemplate")
        if (resources, templates) != self._resources:
            self._resources, self._resources_version = (resources, templates), self._resources_version + 1
        return CatalogView(
            {n: e.status for n, e in self._entries.items()},
            tools,
            routes,
            self._tools_version,
            prompts,
            prompt_routes,
            self._prompts_version,
            resources,
            templates,
            {public: Route(backend, uri) for backend, mine in uris.items() for uri, public in mine.items()},
            tuple(
                TemplateRoute(
                    backend,
                    "" if public == template else prefixed(backend, ""),
                    template,
                )
                for backend, mine in patterns.items()
                for template, public in mine.items()
            ),
            self._resources_version,
        )

    def _published(
        self,
        names: Mapping[str, Mapping[str, str]],
        kind: str,  # the _Entry list: tools, prompts, resources or templates
        key: str = "name",
    ) -> tuple[Tool, ...]:
        """What ready backends offer, under their public names (or URIs)."""
        published: list[Tool] = []
        for backend, entry in self._entries.items():
            if entry.status.state is BackendState.READY:
                mine, listed = names[backend], getattr(entry, kind)
                published += entry.memo(kind, listed, mine, partial(_rename, listed, mine, key))
        return tuple(published)


def _routes(backend: str, names: Mapping[str, str], originals: Mapping[str, str]) -> dict[str, Route]:
    """public name -> (backend, the backend's own name), for one backend."""
    return {public: Route(backend, originals.get(tool, tool)) for tool, public in names.items()}


def _down(status: BackendStatus, state: BackendState, error: BaseException | None) -> BackendStatus:
    """Down, with the reason clients may be told and, apart, the stderr lines told only when allowed."""
    if error is None:
        reason, stderr = describe(None), None
    else:
        parts = leaves(error)
        reason = "; ".join(
            leaf.without_stderr if isinstance(leaf, BackendError) else describe(leaf) for leaf in parts
        )
        stderr = " | ".join(leaf.stderr for leaf in parts if isinstance(leaf, BackendError) and leaf.stderr)
    return attrs.evolve(status, state=state, calls=None, reason=reason, settled=True, stderr=stderr or None)
