"""The Catalog actor: folds backends' facts into what it knows of each backend, and publishes a new
CatalogView through a Watch after each change.

Sessions route with the newest view synchronously and wait on the Watch to tell their clients about
changes. The naming rule is in naming.py, the building of a view in view_builder.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
import trio
from loguru import logger

from actors.catalog.entry import BackendEntry
from actors.catalog.status import BackendState, BackendStatus
from actors.catalog.view import CatalogView
from actors.catalog.view_builder import ViewBuilder
from actors.config.tool_policy import ToolPolicy
from actors.protocol.envelopes import BackendLost, BackendReady, ListChanged
from actors.runtime.supervisor import ChildEvent, ChildFailed, ChildRestarting, ChildStarted, ChildStopped
from actors.runtime.watch import Watch


@attrs.frozen(kw_only=True)
class Reconfigured:
    """Gateway -> Catalog: a reload's new set of backends (in order), their settings and the naming rule.
    Names it no longer has leave the catalog; `fresh` ones (new, or restarted with new settings) start
    over as STARTING with nothing listed; the others keep their state and lists."""

    order: tuple[str, ...]
    request_timeouts_s: Mapping[str, float]
    policies: Mapping[str, ToolPolicy]
    rule: str
    expose_stderr: bool
    fresh: frozenset[str]


CatalogEvent = BackendReady | BackendLost | ListChanged | ChildEvent | Reconfigured


@attrs.define(kw_only=True)
class Catalog:
    """The catalog actor.

    Owns: every backend's state and last tool list, and the Watch it publishes to.
    Receives: BackendReady, BackendLost, ListChanged (from backends), ChildEvents (from the backends
        supervisor) and Reconfigured (from the gateway, at a reload).
    Sends: a new CatalogView through the Watch after each event; a BackendLost's `published` once its view
        is out (the backend answers its calls only then).
    Stops when: its inbox ends.
    Errors: none expected; an unknown backend name in an event is ignored.
    """

    order: Sequence[str]
    request_timeouts_s: Mapping[str, float]
    rule: str  # [gateway] tool_names
    inbox: trio.MemoryReceiveChannel[CatalogEvent]
    policies: Mapping[str, ToolPolicy] = attrs.field(factory=dict)
    expose_stderr: bool = False  # [gateway] expose_backend_stderr
    watch: Watch[CatalogView] = attrs.field(init=False)
    _entries: dict[str, BackendEntry] = attrs.field(init=False)
    _builder: ViewBuilder = attrs.field(init=False)
    _announced: set[str] = attrs.field(init=False, factory=set)  # kinds said changed since the last view

    def __attrs_post_init__(self) -> None:
        self._entries = {name: self._new_entry(name) for name in self.order}
        self._builder = ViewBuilder(self.order, self.rule)
        self.watch = Watch(self.view())

    def _new_entry(self, name: str) -> BackendEntry:
        status = BackendStatus(
            name=name,
            state=BackendState.STARTING,
            request_timeout_s=self.request_timeouts_s[name],
            expose_stderr=self.expose_stderr,
        )
        return BackendEntry(status=status, policy=self.policies.get(name, ToolPolicy()))

    def reconfigure(self, event: Reconfigured) -> None:
        """A reload: the new order and settings; list versions go on counting, so sessions see the change."""
        self.order, self.rule = event.order, event.rule
        self.request_timeouts_s, self.policies = event.request_timeouts_s, event.policies
        self.expose_stderr = event.expose_stderr
        kept = {
            name: entry
            for name, entry in self._entries.items()
            if name in event.order and name not in event.fresh
        }
        for entry in kept.values():
            entry.status = attrs.evolve(entry.status, expose_stderr=event.expose_stderr)
        self._entries = {name: kept.get(name) or self._new_entry(name) for name in event.order}
        self._builder.order, self._builder.rule = event.order, event.rule

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with self.inbox:
            task_status.started()
            async for event in self.inbox:
                if self.apply(event):
                    self.watch.publish(self.view())
                if isinstance(event, BackendLost):
                    event.published.set()

    def apply(self, event: CatalogEvent) -> bool:
        """Update state from one event; True when the view changed."""
        if isinstance(event, Reconfigured):
            self.reconfigure(event)
            return True
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
                    call_now=event.call_now,
                    reason=None,
                    stderr=None,
                    instructions=instructions,
                    settled=True,
                    capabilities=event.capabilities,
                    list_hints=event.list_hints,
                )
                logger.bind(backend=status.name).info("ready with {} tools", len(tools))
            case ListChanged(kind="tools", items=tools):
                if event.announced:  # else news only if the list differs (view_builder)
                    self._announced.add("tools")
                entry.take(tools)
                entry.status = attrs.evolve(status, list_hints={**status.list_hints, "tools": event.hint})
                logger.bind(backend=status.name).info("tools changed: now {} tools", len(tools))
            case ListChanged(kind=kind, items=items) if kind in ("prompts", "resources", "templates"):
                if event.announced:
                    self._announced.add(kind)
                setattr(entry, kind, items)
                entry.status = attrs.evolve(status, list_hints={**status.list_hints, kind: event.hint})
                logger.bind(backend=status.name).info("{} changed: now {}", kind, len(items))
            case BackendLost(error=error):
                entry.status = status.down(BackendState.RESTARTING, error)
            case ChildStarted():
                return False
            case ChildRestarting(error=error):
                entry.status = status.down(BackendState.RESTARTING, error)
            case ChildFailed(error=error):
                entry.status = status.down(BackendState.FAILED, error)
            case ChildStopped(error=error):
                entry.status = status.down(BackendState.STOPPED, error)
        return True

    def view(self) -> CatalogView:
        """The catalog as it stands, as a new snapshot."""
        announced, self._announced = frozenset(self._announced), set()
        return self._builder.build(self._entries, announced)
