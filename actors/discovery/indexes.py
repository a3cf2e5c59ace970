"""The gateway's search index for the catalog version in force, and the actor that keeps it.

`keep_index` (one task per gateway) follows the catalog and builds each new version's index in a worker
thread, so a 2,000-tool build (~70 ms) never stalls a session; it installs it here and closes the one it
replaces. A search that comes before the keeper has caught up builds the index itself (on the loop) rather
than answer from an older catalog. One holder per gateway (its owner closes it at shutdown), shared by its
sessions: every session of one catalog version searches one index, filtered by what each caller's list
shows."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

import attrs
import trio
from loguru import logger

from actors.discovery.exposure import summary
from actors.discovery.index import Searcher, SearcherFactory, ToolIndex
from actors.discovery.rows import estimate_tokens
from actors.discovery.settings import DiscoverySettings
from actors.runtime.watch import Watch

Tool = dict[str, Any]
T = TypeVar("T")
MAX_CACHED: Final = 256
View = TypeVar("View")
# what the keeper reads of a catalog view: its tools version, its tools, public name -> backend
Reading = Callable[[Any], tuple[int, Sequence[Tool], Mapping[str, str]]]


@attrs.define(eq=False)
class SearchIndexes:
    """Owns: one Searcher (the newest catalog version's) and the summaries of recent exposures.
    Stops when: `close` (gateway shutdown)."""

    settings: DiscoverySettings
    _version: int | None = None
    build: SearcherFactory = ToolIndex  # the seam: another ranking plugs in here
    _index: Searcher | None = None
    _summaries: dict[tuple[str, int, int], Any] = attrs.field(factory=dict)  # summaries and estimates
    _installed: trio.Event = attrs.field(factory=trio.Event)

    @property
    def version(self) -> int | None:
        return self._version

    def index(self, version: int, tools: Sequence[Tool], backends: Mapping[str, str]) -> Searcher:
        if self._index is None or self._version != version:
            self.install(version, self.build(tools, dict(backends)))
        assert self._index is not None
        return self._index

    def install(self, version: int, index: Searcher) -> None:
        """`index` for catalog `version`; an older version's arrival (a late build) is closed unused."""
        if self._version is not None and version < self._version:
            index.close()
            return
        if self._index is not None and self._index is not index:
            self._index.close()
        self._index, self._version = index, version
        self._summaries.clear()
        installed, self._installed = self._installed, trio.Event()
        installed.set()

    async def wait_installed(self, version: int) -> None:
        """Until an index of `version` (or newer) is installed."""
        while self._version is None or self._version < version:
            await self._installed.wait()

    def summary(self, version: int, tools: Sequence[Tool], backends: Mapping[str, str]) -> str:
        """The search tool's summary of one exposure (cached per version and set of names)."""
        return self._cached(("summary", version, _names(tools)), lambda: summary(tools, backends))

    def tokens(self, version: int, tools: Sequence[Tool]) -> int:
        """An exposure's estimated tokens, for `auto` (cached: every tools/list would encode it all)."""
        return self._cached(("tokens", version, _names(tools)), lambda: estimate_tokens(list(tools)))

    def _cached(self, key: tuple[str, int, int], make: Callable[[], T]) -> T:
        """At most MAX_CACHED entries (exposures differ per caller's policy), all dropped at a new index."""
        if key not in self._summaries:
            if len(self._summaries) >= MAX_CACHED:
                self._summaries.clear()
            self._summaries[key] = make()
        return self._summaries[key]  # type: ignore[no-any-return]

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None


def _names(tools: Sequence[Tool]) -> int:
    return hash(tuple(str(tool.get("name")) for tool in tools))


async def keep_index(catalog: Watch[View], read: Reading, indexes: SearchIndexes) -> None:
    """The index keeper. Owns: the index it is building (closed if it arrives too late).
    Receives: catalog views (the Watch). Stops when: cancelled with the gateway (a build in its thread
    finishes first: tens of ms). Errors: a build that fails is logged; sessions then build on demand."""
    seen = -1
    while True:
        seen, view = await catalog.wait_newer(seen)
        version, tools, backends = read(view)
        if indexes.version is not None and indexes.version >= version:
            continue  # a session's search built it already
        try:
            built = await trio.to_thread.run_sync(indexes.build, tools, dict(backends))
        except Exception as exc:  # sqlite3 on a catalog's text: logged, not fatal
            logger.warning("discovery: the index of catalog version {} failed to build: {}", version, exc)
            continue
        indexes.install(version, built)
