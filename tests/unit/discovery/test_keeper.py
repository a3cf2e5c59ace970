"""The index keeper: each catalog version's index built off the loop and installed, the replaced one
closed; a search before the keeper catches up builds its own; a late older build is dropped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import trio

from actors.discovery.index import ToolIndex
from actors.discovery.indexes import SearchIndexes, keep_index
from actors.discovery.settings import DiscoveryMode, DiscoverySettings
from actors.runtime.watch import Watch

View = tuple[int, tuple[dict[str, Any], ...]]


def read(view: View) -> tuple[int, Sequence[dict[str, Any]], Mapping[str, str]]:
    return view[0], view[1], {}


def tools(*names: str) -> tuple[dict[str, Any], ...]:
    return tuple({"name": name, "description": f"{name} things"} for name in names)


async def installed(indexes: SearchIndexes, version: int) -> None:
    with trio.fail_after(10):  # the keeper's thread is done in ms: a deadline, not a duration guessed
        await indexes.wait_installed(version)


async def test_each_catalog_version_gets_its_index_and_the_old_one_is_closed() -> None:
    catalog: Watch[View] = Watch((1, tools("create_issue")))
    indexes = SearchIndexes(DiscoverySettings(mode=DiscoveryMode.SEARCH))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(keep_index, catalog, read, indexes)
        await installed(indexes, 1)
        first = indexes.index(1, (), {})  # installed: nothing rebuilt from the (empty) tools given here
        assert first.search("issue", 5) == ["create_issue"]
        catalog.publish((2, tools("post_message")))
        await installed(indexes, 2)
        assert indexes.index(2, (), {}).search("message", 5) == ["post_message"]
        with pytest.raises(Exception, match="closed"):
            first.search("issue", 5)
        nursery.cancel_scope.cancel()
    indexes.close()


def test_a_search_ahead_of_the_keeper_builds_and_a_late_older_build_is_dropped() -> None:
    indexes = SearchIndexes(DiscoverySettings(mode=DiscoveryMode.SEARCH))
    current = indexes.index(5, tools("list_pods"), {})
    assert current.search("pods", 5) == ["list_pods"]
    late = ToolIndex(tools("old_tool"))
    indexes.install(4, late)
    assert indexes.version == 5 and indexes.index(5, (), {}) is current
    with pytest.raises(Exception, match="closed"):
        late.search("old", 5)
    indexes.close()


def test_auto_estimates_each_exposure_once_per_catalog_version() -> None:
    indexes = SearchIndexes(DiscoverySettings(mode=DiscoveryMode.AUTO))
    small, big = tools("a"), tools(*(f"tool_{n}" for n in range(500)))
    assert indexes.tokens(1, big) > indexes.tokens(1, small)
    for version in range(2, 600):  # the cache stays bounded however many versions and exposures pass
        indexes.tokens(version, small)
    assert len(indexes._summaries) <= 256


class Newest:
    """Another ranking through the seam: the last tools first, whatever the query."""

    def __init__(self, tools: Sequence[dict[str, Any]], backends: dict[str, str]) -> None:
        self.names = [tool["name"] for tool in reversed(tools)]
        self.closed = False

    def search(self, query: str, limit: int, visible: Any = lambda _: True) -> list[str]:
        return [name for name in self.names if visible(name)][:limit]

    def close(self) -> None:
        self.closed = True


def test_another_ranking_plugs_in_through_the_seam_and_is_closed_by_its_holder() -> None:
    indexes = SearchIndexes(DiscoverySettings(mode=DiscoveryMode.SEARCH), build=Newest)
    first = indexes.index(1, tools("a", "b", "c"), {})
    assert first.search("anything", 2, lambda name: name != "c") == ["b", "a"]
    indexes.index(2, tools("d"), {})
    assert isinstance(first, Newest) and first.closed
