"""A client's byte budget, end to end (#25): official SDK clients over real WebSockets against the real test
backend. One client holding big calls is refused past its budget, with an error naming the budget; another
client, on its own connection, is served all the while."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest
import trio
import trio.testing
from mcp import MCPError
from sdk_websocket import websocket_client
from support import DEADLINE_S, backend_entry, running, with_websocket, write_config

PAD: Final = "x" * 150_000  # each call's frame is a little over 150 kB


async def test_a_client_past_its_budget_is_refused_while_another_is_served(tmp_path: Path) -> None:
    config = with_websocket(
        write_config(
            tmp_path / "g.toml",
            [backend_entry("alpha", "--only=sleep,echo")],
            max_request_bytes=200_000,
            max_client_bytes=500_000,
        )
    )
    async with running(config) as gateway:
        url = gateway.websocket_url
        assert url is not None
        with trio.fail_after(DEADLINE_S):
            async with websocket_client(url) as greedy, websocket_client(url) as other:
                async with trio.open_nursery() as holding:
                    for _ in range(3):  # ~450 kB held in flight, within 500 kB
                        holding.start_soon(greedy.call_tool, "sleep", {"seconds": 600, "pad": PAD})
                    await trio.testing.wait_all_tasks_blocked()
                    # On one connection requests are taken in order: once this is answered, the three are in.
                    marker = await greedy.call_tool("echo", {"text": "in"})
                    assert marker.structured_content == {"text": "in"}

                    with pytest.raises(MCPError) as past_client:
                        await greedy.call_tool("echo", {"text": PAD})
                    error = past_client.value.error
                    assert error.code == -32000 and "max_client_bytes" in error.message
                    assert error.data["budget"] == "max_client_bytes" and error.data["limit"] == 500_000
                    with pytest.raises(MCPError) as past_request:
                        await other.call_tool("echo", {"text": PAD + PAD})
                    assert past_request.value.error.data["budget"] == "max_request_bytes"

                    served = await other.call_tool("echo", {"text": PAD})  # its own budget: served
                    assert served.structured_content == {"text": PAD}
                    holding.cancel_scope.cancel()  # the greedy client gives its calls up
                served = await greedy.call_tool("echo", {"text": PAD})  # and has room again
                assert served.structured_content == {"text": PAD}
