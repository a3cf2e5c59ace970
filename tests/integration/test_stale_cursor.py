"""A paged tools/list across a backend's restart (issue #24): the cursor the SDK client holds was minted for
the list before the restart; asking with it starts the listing again at the first page, where before no
SDK could go on (each hands the -32602 to its caller)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import MCPError
from support import Notifications, backend_entry, fast_restarts, sdk_client, write_config

TOOLS = ["echo", "crash", "pid"]  # the backend lists them in this order


async def test_a_cursor_minted_before_a_backend_restart_starts_the_listing_again(tmp_path: Path) -> None:
    alpha = backend_entry("alpha", "--only=" + ",".join(TOOLS), restart=fast_restarts())
    config = write_config(tmp_path / "g.toml", [alpha], page_size=2)
    notifications = Notifications()
    async with sdk_client(config, tmp_path / "gateway.log", notifications) as client:
        first = await client.list_tools(cache_mode="bypass")
        assert [tool.name for tool in first.tools] == TOOLS[:2] and first.next_cursor is not None
        with pytest.raises(MCPError):
            await client.call_tool("crash", {})
        await notifications.wait_for("notifications/tools/list_changed", 2)  # down, then back
        again = await client.list_tools(cursor=first.next_cursor, cache_mode="bypass")
        assert [tool.name for tool in again.tools] == TOOLS[:2]  # the first page of the list as it is now
        rest = await client.list_tools(cursor=again.next_cursor, cache_mode="bypass")
        assert [tool.name for tool in rest.tools] == TOOLS[2:] and rest.next_cursor is None
