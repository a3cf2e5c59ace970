"""A paged tools/list across a backend's death (issue #34, point 11), with the SDK client over stdio.

A client assembles a list from pages; it must never hold duplicates, tools of a dead backend, or pages of two
catalog versions. So a backend's tools leave the catalog before its call in flight is answered, and a cursor
minted before the list changed is refused with -32602 (issue #24 had it start the listing again at the first
page, which the SDK clients joined to the pages they had: 59-79 entries for 39 tools).

The dead backend leaves a grandchild deaf to SIGTERM behind, so stopping what is left of it takes seconds:
the catalog can no longer learn of the death only once the process is stopped.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client, MCPError
from support import backend_entry, kill_quietly, sdk_client, write_config

ALPHA = ["echo", "add"]  # the backend that stays
BETA = ["crash", "spawn_child", "pid"]  # the backend that dies; the test backend lists them in this order
INVALID_PARAMS = -32602


async def every_page(client: Client) -> list[str]:
    """The names of the whole list, page after page, as an SDK client joins them."""
    listed = await client.list_tools(cache_mode="bypass")
    names = [tool.name for tool in listed.tools]
    while listed.next_cursor is not None:
        listed = await client.list_tools(cursor=listed.next_cursor, cache_mode="bypass")
        names += [tool.name for tool in listed.tools]
    return names


async def test_a_dead_backends_tools_are_gone_when_its_call_is_answered_and_older_cursors_refused(
    tmp_path: Path,
) -> None:
    alpha = backend_entry("alpha", "--only=" + ",".join(ALPHA))
    beta = backend_entry("beta", "--only=" + ",".join(BETA), restart={"policy": "temporary"})
    config = write_config(tmp_path / "g.toml", [alpha, beta], page_size=2, shutdown_s=20)
    async with sdk_client(config, tmp_path / "gateway.log") as client:
        deaf = await client.call_tool("spawn_child", {"ignore_sigterm": True})
        try:
            assert sorted(await every_page(client)) == sorted(ALPHA + BETA)
            first = await client.list_tools(cache_mode="bypass")
            assert first.next_cursor is not None
            with pytest.raises(MCPError, match="beta"):
                await client.call_tool("crash", {})  # answered as the backend dies
            with pytest.raises(MCPError) as stale:  # minted for the list with beta's tools
                await client.list_tools(cursor=first.next_cursor, cache_mode="bypass")
            assert stale.value.code == INVALID_PARAMS and "cursor" in stale.value.error.message
            assert await every_page(client) == ALPHA  # one version's pages: no duplicate, no dead tool
        finally:
            kill_quietly([deaf.structured_content["pid"]])  # type: ignore[index]
