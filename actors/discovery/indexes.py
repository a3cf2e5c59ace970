"""The gateway's search index for the catalog version in force: built on the first search after a catalog
change, the previous one closed then. One holder per gateway (its owner closes it at shutdown), shared by
its sessions: every session of one catalog version searches one index, filtered by what each caller's
list shows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from actors.discovery.exposure import summary
from actors.discovery.index import ToolIndex
from actors.discovery.settings import DiscoverySettings

Tool = dict[str, Any]


@attrs.define(eq=False)
class SearchIndexes:
    """Owns: one ToolIndex (the newest catalog version's) and the summaries of recent exposures.
    Stops when: `close` (gateway shutdown)."""

    settings: DiscoverySettings
    _version: int | None = None
    _index: ToolIndex | None = None
    _summaries: dict[tuple[int, int], str] = attrs.field(factory=dict)

    def index(self, version: int, tools: Sequence[Tool], backends: Mapping[str, str]) -> ToolIndex:
        if self._index is None or self._version != version:
            if self._index is not None:
                self._index.close()
            self._index, self._version = ToolIndex(tools, dict(backends)), version
            self._summaries.clear()
        return self._index

    def summary(self, version: int, tools: Sequence[Tool], backends: Mapping[str, str]) -> str:
        """The search tool's summary of one exposure (cached per version and set of names; at most 64)."""
        key = (version, hash(tuple(str(tool.get("name")) for tool in tools)))
        found = self._summaries.get(key)
        if found is None:
            if len(self._summaries) >= 64:
                self._summaries.clear()
            found = self._summaries[key] = summary(tools, backends)
        return found

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None
