"""What the catalog remembers of one backend: its status and its last known lists, kept while it is down."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from actors.catalog.status import BackendStatus
from actors.config.tool_policy import ToolPolicy
from actors.protocol.messages import Tool

ListKind = Literal["tools", "prompts", "resources", "templates"]


@attrs.define(kw_only=True)
class BackendEntry:
    status: BackendStatus
    tools: tuple[Tool, ...] = ()  # last known list, after the backend's policy; kept while it is down
    raw_tools: tuple[Tool, ...] = ()  # the same list as the backend gave it (what its trust judges)
    prompts: tuple[Tool, ...] = ()  # last known prompts, resources and resource templates
    resources: tuple[Tool, ...] = ()
    templates: tuple[Tool, ...] = ()
    originals: dict[str, str] = attrs.field(factory=dict)  # renamed by the policy -> the backend's own name
    policy: ToolPolicy = attrs.field(factory=ToolPolicy)
    # list kind -> {name in `tools` (prompts: name; templates: uriTemplate) -> why it is held}: listed,
    # named and routed, but hidden from clients and refused to callers until its trust lets it go
    held: dict[str, Mapping[str, str]] = attrs.field(factory=dict)
    # Rebuilding a big catalog after one backend's restart should cost what changed, not everything:
    # what was computed from this backend's list and public names, kept while neither changes.
    _memo: dict[str, tuple[tuple[Tool, ...], Mapping[str, str], Any]] = attrs.field(init=False, factory=dict)

    def take(self, tools: tuple[Tool, ...]) -> None:
        """A new tool list from the backend, through its policy (which may hide and rename tools)."""
        self.raw_tools = tools
        self.tools, self.originals = self.policy.apply(tools)

    def judged_tools(self) -> list[Tool]:
        """The tools its policy shows, as the backend listed them: what its trust judges."""
        return [
            tool
            for tool in self.raw_tools
            if isinstance(tool.get("name"), str) and self.policy.shows(tool["name"])
        ]

    def shown_name(self, own: str) -> str:
        """A tool's name in `tools` (after the policy's rename) from the backend's own."""
        return self.policy.rename.get(own, own)

    def listed(self, kind: ListKind) -> tuple[Tool, ...]:
        """The last known list of that kind."""
        return getattr(self, kind)

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

    def shown(self, kind: ListKind, names: Mapping[str, str]) -> Mapping[str, str]:
        """`names` (own -> public) without those of its held definitions of that kind."""
        held = self.held.get(kind)
        return {own: public for own, public in names.items() if own not in held} if held else names
