"""Search mode ([discovery] mode = "search") through one gateway process shared by the module: the official
SDK client in both eras over Streamable HTTP, a real backend process, a [policy] that denies one tool.

What a client meets: the list is the pin and three tools; search finds tools and never the denied one;
get_tool_schema gives full definitions (not the denied one's); call_tool reaches the backend through the
direct call's path, so the policy refuses the denied tool there too; an upstream -32602 carries the tool's
definition."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from support import DEADLINE_S, backend_entry, free_port, serving_gateway, write_config

MODERN: Final = "2026-07-28"
ERAS: Final = ("legacy", MODERN)
META: Final = ["search_tools", "get_tool_schema", "call_tool"]
CONFIG: Final = """
[discovery]
mode = "search"
pin = ["pid"]

[policy]
[[policy.rules]]
name = "nobody adds"
effect = "deny"
when = 'mcp.tool.name == "add"'
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One gateway for the module: its HTTP URL and the backend's record of the calls that reached it."""
    yield from serve(tmp_path_factory.mktemp("discovery"))


def serve(folder: Path, extra: str = "") -> Iterator[tuple[str, Path]]:
    port, calls = free_port(), folder / "calls.jsonl"
    entry = backend_entry("alpha", "--only=echo,add,pid,rpc_error", "--record-calls", str(calls))
    config = write_config(folder / "g.toml", [entry])
    config.write_text(config.read_text() + CONFIG + extra + f"\n[http]\nport = {port}\n")
    argv = [
        sys.executable,
        "-m",
        "actors",
        "serve",
        "--config",
        str(config),
        "--log-file",
        str(folder / "g.log"),
    ]
    with serving_gateway(argv, port):
        yield f"http://127.0.0.1:{port}/mcp", calls


@asynccontextmanager
async def client(url: str, era: str) -> AsyncIterator[Client]:
    transport: Any = streamable_http_client(url) if era == "legacy" else url
    with trio.fail_after(DEADLINE_S):
        async with Client(transport, mode=era) as connected:
            yield connected


async def structured(session: Client, tool: str, arguments: dict[str, Any]) -> Any:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result
    assert json.loads(result.content[0].text) == result.structured_content  # text for any client too
    return result.structured_content


@pytest.mark.parametrize("era", ERAS)
async def test_the_list_is_the_pin_and_three_tools_naming_the_backend(
    gateway: tuple[str, Path], era: str
) -> None:
    async with client(gateway[0], era) as session:
        tools = (await session.list_tools()).tools
    assert [tool.name for tool in tools] == ["pid", *META]
    assert "alpha (" in (tools[1].description or "")


@pytest.mark.parametrize("era", ERAS)
async def test_search_finds_tools_and_never_the_denied_one(gateway: tuple[str, Path], era: str) -> None:
    async with client(gateway[0], era) as session:
        rows = (await structured(session, "search_tools", {"query": "echo the text back", "limit": 3}))[
            "tools"
        ]
        assert rows[0]["name"] == "echo" and rows[0]["signature"] == "text*: str"
        for query in ("add two numbers a b", "add"):
            found = await structured(session, "search_tools", {"query": query, "limit": 20})
            assert "add" not in [row["name"] for row in found["tools"]]
        described = await structured(session, "get_tool_schema", {"names": ["echo", "add"]})
        assert [tool["name"] for tool in described["tools"]] == ["echo"]
        assert described["tools"][0]["inputSchema"]["required"] == ["text"]
        assert described["unknown"] == ["add"]


@pytest.mark.parametrize("era", ERAS)
async def test_call_tool_reaches_the_backend_and_obeys_the_policy(
    gateway: tuple[str, Path], era: str
) -> None:
    url, calls = gateway
    async with client(url, era) as session:
        result = await session.call_tool("call_tool", {"name": "echo", "arguments": {"text": f"hi {era}"}})
        assert not result.is_error and result.content[0].text == f"hi {era}"
        with pytest.raises(MCPError) as refused:
            await session.call_tool("call_tool", {"name": "add", "arguments": {"a": 1, "b": 2}})
        assert "add" in refused.value.message
        with pytest.raises(MCPError) as direct:
            await session.call_tool("add", {"a": 1, "b": 2})  # the same refusal as a direct call gets
        assert direct.value.code == refused.value.code
    reached = [json.loads(line) for line in calls.read_text().splitlines()]
    assert {"name": "echo", "arguments": {"text": f"hi {era}"}} in [
        {"name": call["name"], "arguments": call["arguments"]} for call in reached
    ]
    assert all(call["name"] != "add" for call in reached)


@pytest.mark.parametrize("era", ERAS)
async def test_an_upstream_invalid_params_error_carries_the_tools_schema(
    gateway: tuple[str, Path], era: str
) -> None:
    async with client(gateway[0], era) as session:
        with pytest.raises(MCPError) as invalid:
            arguments = {"code": -32602, "message": "Invalid params: text is required", "data": {"x": 1}}
            await session.call_tool("call_tool", {"name": "rpc_error", "arguments": arguments})
        assert invalid.value.code == -32602
        assert invalid.value.data["tool"]["name"] == "rpc_error"
        assert invalid.value.data["tool"]["inputSchema"]["required"] == ["code", "message"]
        assert invalid.value.data["upstream"] == {"x": 1}
        with pytest.raises(MCPError) as meta:
            await session.call_tool("call_tool", {"name": "call_tool", "arguments": {}})
        assert meta.value.code == -32602


@pytest.fixture
def audited(tmp_path: Path) -> Iterator[tuple[str, Path, Callable[[], None]]]:
    """A gateway of its own with [audit]: its URL, its audit file, and how to stop it (the audit is
    written behind the calls and flushed at the gateway's end: read it after)."""
    served = serve(tmp_path, '\n[audit]\npath = "audit.sqlite3"\n')
    url, _ = next(served)
    try:
        yield url, tmp_path / "audit.sqlite3", served.close
    finally:
        served.close()


@pytest.mark.extra
async def test_through_middleware_the_audit_names_the_tool_call_tool_called(
    audited: tuple[str, Path, Callable[[], None]],
) -> None:
    """With [audit] every call runs through the middleware (another path than the one above): the audit's
    rows name the tool call_tool called, the denied one as rejected, and -32602 still carries the schema."""
    url, audit, stop = audited
    async with client(url, "legacy") as session:
        result = await session.call_tool("call_tool", {"name": "echo", "arguments": {"text": "audited"}})
        assert not result.is_error and result.content[0].text == "audited"
        with pytest.raises(MCPError):
            await session.call_tool("call_tool", {"name": "add", "arguments": {"a": 1, "b": 2}})
        with pytest.raises(MCPError) as invalid:
            arguments = {"code": -32602, "message": "Invalid params"}
            await session.call_tool("call_tool", {"name": "rpc_error", "arguments": arguments})
        assert invalid.value.data["tool"]["name"] == "rpc_error"
    stop()
    with sqlite3.connect(audit) as db:
        rows = db.execute("SELECT tool, outcome FROM calls ORDER BY id").fetchall()
    assert rows[:2] == [("echo", "ok"), ("add", "rejected")]
    assert rows[2][0] == "rpc_error"
