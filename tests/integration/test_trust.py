"""Pinned definitions (#36) with real parts: the rug-pull backend changes its tool after it was trusted, and
the official SDK's clients in both eras, on every listener, never see the change nor reach it; an operator
approves or rejects it with `mcp-gateway trust` through the admin listener."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import orjson
import pytest
import trio
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from sdk_websocket import websocket_client
from support import (
    DEADLINE_S,
    ROOT,
    Notifications,
    running,
    sdk_client,
    toml_value,
    tool_names,
    with_http,
    with_websocket,
)

RUGPULL: Final = ROOT / "tests" / "backends" / "rugpull.py"
MODERN: Final = "2026-07-28"
CHANGED: Final = "notifications/tools/list_changed"


def rugpull_config(tmp_path: Path, *flags: str, trust: str = "pin", **gateway: Any) -> Path:
    """A gateway of the rug-pull backend (its state in tmp_path), its trust and baselines in tmp_path."""
    args = [str(RUGPULL), "--state-file", str(tmp_path / "rugpull.json"), *flags]
    lines = [
        "[gateway]",
        *(f"{key} = {toml_value(value)}" for key, value in gateway.items()),
        "[trust]",
        f"mode = {toml_value(trust)}",
        f"path = {toml_value(str(tmp_path / 'trust.sqlite3'))}",
        "[[backends]]",
        'name = "rugpull"',
        f"command = {toml_value(sys.executable)}",
        f"args = {toml_value(args)}",
        "[backends.restart]",
        "backoff_initial_s = 0.05",
        "backoff_max_s = 0.2",
        "[backends.health]",
        "interval_s = 0",
    ]
    path = tmp_path / "gateway.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def fetched(client: Client) -> int:
    """How many calls of `fetch` reached the backend."""
    return int((await client.call_tool("fetched", {})).structured_content["fetched"])  # type: ignore[index]


async def names_now(client: Client) -> list[str]:
    return [tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools]


def held_rows(tmp_path: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(tmp_path / "trust.sqlite3") as db:
        return list(db.execute("SELECT backend, kind, name FROM held"))


async def refused_as_held(client: Client, tool: str) -> str:
    with pytest.raises(MCPError) as refused:
        await client.call_tool(tool, {"url": "https://example.com"})
    error = refused.value.error
    assert error.code == -32602
    assert "backend 'rugpull'" in error.message and "held for review" in error.message
    return error.message


async def test_a_rug_pull_after_n_calls_is_held_in_both_eras_on_every_listener(tmp_path: Path) -> None:
    config = with_http(with_websocket(rugpull_config(tmp_path, "--change-after", "2")))
    async with running(config) as gateway:
        assert gateway.websocket_url is not None and gateway.http_url is not None
        heard = Notifications()
        async with (
            websocket_client(gateway.websocket_url, message_handler=heard.handle) as legacy,
            Client(streamable_http_client(gateway.http_url), mode=MODERN) as modern,
        ):
            assert "fetch" in await tool_names(legacy) and "fetch" in await names_now(modern)
            await legacy.call_tool("fetch", {"url": "https://example.com/1"})
            await modern.call_tool("fetch", {"url": "https://example.com/2"})  # the second call: the rug
            await heard.wait_for(CHANGED, 1)
            for client in (legacy, modern):
                names = await names_now(client)
                assert "fetch" not in names and {"add", "fetched"} <= set(names)
                assert "changed since it was approved" in await refused_as_held(client, "fetch")
                assert (await client.call_tool("add", {"a": 2, "b": 3})).content[0].text == "5"  # type: ignore[union-attr]
            assert await fetched(legacy) == 2  # the refused calls never reached the backend
            prompts = await modern.list_prompts(cache_mode="bypass")
            assert prompts.prompts == []  # its prompt and template changed with it: held too
            templates = await legacy.list_resource_templates()
            assert templates.resource_templates == []
            with pytest.raises(MCPError) as read:
                await legacy.read_resource("pages://7")
            assert "held for review" in read.value.error.message
            with pytest.raises(MCPError) as prompt:
                await modern.get_prompt("summarize", {"id": "7"})
            assert "held for review" in prompt.value.error.message
        assert heard.count(CHANGED) == 1  # the tools it sees changed once
    assert sorted(held_rows(tmp_path)) == [
        ("rugpull", "prompt", "summarize"),
        ("rugpull", "template", "pages://{id}"),
        ("rugpull", "tool", "fetch"),
    ]


async def test_a_change_after_a_restart_and_a_rename_are_held_over_stdio(tmp_path: Path) -> None:
    """The backend restarts with a changed tool; later the gateway restarts too and its baselines with it;
    a rename with the changed body is held as a rename."""
    config = rugpull_config(tmp_path, "--change-on-restart")
    heard = Notifications()
    async with sdk_client(config, tmp_path / "one.log", heard) as client:
        assert "fetch" in await tool_names(client)
        with pytest.raises(MCPError):
            await client.call_tool("crash", {})
        await heard.wait_for(CHANGED, 2)  # gone while it restarts, back without fetch
        assert "fetch" not in await tool_names(client) and "add" in await tool_names(client)
        await refused_as_held(client, "fetch")
    async with sdk_client(config, tmp_path / "two.log", mode=MODERN) as again:  # a new gateway, same file
        names = await names_now(again)
        assert "fetch" not in names and "add" in names
        await refused_as_held(again, "fetch")
    state = tmp_path / "rugpull.json"
    state.write_bytes(orjson.dumps({**orjson.loads(state.read_bytes()), "form": "renamed"}))
    async with sdk_client(config, tmp_path / "three.log") as renamed:
        names = await tool_names(renamed)
        assert "fetch_v2" not in names and "fetch" not in names
        assert "with the body of 'fetch'" in await refused_as_held(renamed, "fetch_v2")


async def test_a_flapping_definition_keeps_one_held_record_and_a_bounded_log(tmp_path: Path) -> None:
    """A thousand forms of one tool, each listed and announced: one held record, eight events of it, and
    one list_changed for the client (what it sees changed once)."""
    config = with_websocket(rugpull_config(tmp_path))
    async with running(config) as gateway:
        assert gateway.listener is not None and gateway.websocket_url is not None
        catalog = gateway.listener.catalog
        heard = Notifications()
        async with websocket_client(gateway.websocket_url, message_handler=heard.handle) as client:
            await client.call_tool("flap", {"times": 1000})
            with trio.fail_after(DEADLINE_S * 4):
                version, view = catalog.version, catalog.value
                while not any(held.changes >= 1000 for held in view.trust.held):
                    version, view = await catalog.wait_newer(version)
            assert len(view.trust.held) == 1
            assert "fetch" not in await tool_names(client)
            assert heard.count(CHANGED) == 1
    with sqlite3.connect(tmp_path / "trust.sqlite3") as db:  # the keeper wrote what it had at the stop
        (held,) = list(db.execute("SELECT record FROM held"))
        assert orjson.loads(held[0])["changes"] >= 1000
        (events,) = db.execute("SELECT COUNT(*) FROM events WHERE name = 'fetch'").fetchone()
        assert events == 8  # its pin and seven holds: a definition's events between two decisions


def trust_command(*args: str, token: str | None = "sekrit") -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", **({"MCP_GATEWAY_ADMIN_TOKEN": token} if token else {})}
    return subprocess.run(
        [sys.executable, "-m", "actors", "trust", *args],
        capture_output=True,
        text=True,
        cwd=str(ROOT),
        env=env,
        timeout=DEADLINE_S,
        check=False,
    )
