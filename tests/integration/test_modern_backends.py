"""Backends of MCP 2026-07-28 behind the gateway, and the era probe that finds them (issue #16, step 7).

Under era "auto" the gateway sends each backend server/discover first: a modern server (the TypeScript SDK
v2's `legacy: 'reject'` server, the official Python SDK 2.3 servers) is spoken to in its era, with no
initialize and the envelope of whom each request is for in its `_meta`; a legacy one (the project's test
backend) is initialized as before. Legacy SDK clients and raw modern clients both reach modern backends:
tool calls, list changes through the gateway's one subscriptions/listen per backend, resource updates.
The TypeScript tests need the `node` fixture (the interop npm packages).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import orjson
import pytest
import trio
from mcp import MCPError
from support import (
    Notifications,
    backend_entry,
    raw_gateway,
    read_log,
    sdk_client,
    started_pids,
    tool_names,
    write_config,
)
from ts_modern import NOTE, TOOLS, modern_server_argv, modern_server_over_http

from actors.protocol.eras import CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY

MODERN: Final = "2026-07-28"
RAW_INFO: Final = {"name": "raw-modern", "version": "7"}
RAW_CAPABILITIES: Final = {"elicitation": {"form": {}}}


def ts_backend(node: Path, name: str = "ts", **settings: Any) -> dict[str, Any]:
    argv = modern_server_argv(node)
    return {"name": name, "command": argv[0], "args": argv[1:], **settings}


def modern_params(params: dict[str, Any]) -> dict[str, Any]:
    meta = {
        PROTOCOL_VERSION_KEY: MODERN,
        CLIENT_CAPABILITIES_KEY: RAW_CAPABILITIES,
        CLIENT_INFO_KEY: RAW_INFO,
    }
    return {**params, "_meta": meta}


def text_of(result: Any) -> str:
    return result.content[0].text  # type: ignore[no-any-return]


def envelope_seen(text: str) -> dict[str, Any]:
    """What the backend's whoami tool says it received."""
    return orjson.loads(text)["envelope"]  # type: ignore[no-any-return]


# --- legacy backends under "auto" ------------------------------------------------------------------------


async def test_a_legacy_server_is_found_legacy_and_initialized(tmp_path: Path) -> None:
    config = write_config(tmp_path / "gateway.toml", [backend_entry("alpha", "--only=echo")])
    log_file = tmp_path / "gateway.log"
    async with sdk_client(config, log_file) as client:
        assert text_of(await client.call_tool("echo", {"text": "hi"})) == "hi"
    log = read_log(log_file)
    assert "[backend=alpha] legacy: server/discover got -32601 (Method not found: server/discover)" in log
    assert log.count("legacy: server/discover") == 1
    assert "initialized alpha 1.0.0 (protocol 2025-11-25)" in log


async def test_a_server_that_exits_on_discover_is_started_again_as_legacy_without_a_restart(
    tmp_path: Path,
) -> None:
    """As rmcp servers do: the probe kills it, so it is legacy, and started once more; the supervisor
    never sees it (with max_restarts = 0 a counted restart would leave it failed)."""
    state = tmp_path / "alpha.state"
    entry = backend_entry(
        "alpha", "--only=echo", "--exit-on-discover", f"--state-file={state}", restart={"max_restarts": 0}
    )
    config = write_config(tmp_path / "gateway.toml", [entry])
    log_file = tmp_path / "gateway.log"
    async with sdk_client(config, log_file) as client:
        assert text_of(await client.call_tool("echo", {"text": "back"})) == "back"
    assert len(started_pids(state)) == 2
    log = read_log(log_file)
    assert "legacy: the process exited during the server/discover probe" in log
    assert "starting it again without the probe" in log
    assert "restarting in" not in log and "failed:" not in log


async def test_era_legacy_sends_no_probe(tmp_path: Path) -> None:
    state = tmp_path / "alpha.state"
    entry = backend_entry("alpha", "--only=echo", "--exit-on-discover", f"--state-file={state}", era="legacy")
    config = write_config(tmp_path / "gateway.toml", [entry])
    log_file = tmp_path / "gateway.log"
    async with sdk_client(config, log_file) as client:
        assert text_of(await client.call_tool("echo", {"text": "x"})) == "x"
    assert len(started_pids(state)) == 1
    assert 'legacy: era = "legacy" in the config' in read_log(log_file)


# --- a Python SDK 2.3 server: modern under "auto", legacy when pinned -----------------------------------


@pytest.mark.parametrize("era", ["auto", "legacy"])
async def test_mcp_server_time_in_either_era(tmp_path: Path, era: str) -> None:
    entry = {"name": "time", "command": "mcp-server-time", "args": ["--local-timezone", "UTC"], "era": era}
    config = write_config(tmp_path / "gateway.toml", [entry])
    log_file = tmp_path / "gateway.log"
    async with sdk_client(config, log_file) as client:
        assert "get_current_time" in await tool_names(client)
        now = await client.call_tool("get_current_time", {"timezone": "UTC"})
        assert "UTC" in text_of(now)
    log = read_log(log_file)
    if era == "auto":
        assert "speaks 2026-07-28 (server/discover answered)" in log and "discovered mcp-time" in log
    else:
        assert "initialized mcp-time" in log and "server/discover" not in log


# --- the TypeScript SDK v2 modern-only server, on stdio --------------------------------------------------


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_a_legacy_client_uses_a_modern_backend(tmp_path: Path, node: Path) -> None:
    config = write_config(tmp_path / "gateway.toml", [ts_backend(node)])
    log_file = tmp_path / "gateway.log"
    async with sdk_client(config, log_file) as client:
        assert await tool_names(client) == TOOLS
        assert text_of(await client.call_tool("echo", {"text": "across eras"})) == "across eras"
        seen = envelope_seen(text_of(await client.call_tool("whoami", {})))
        await client.set_logging_level("warning")
        later = envelope_seen(text_of(await client.call_tool("whoami", {})))
    assert seen[PROTOCOL_VERSION_KEY] == MODERN
    assert seen[CLIENT_INFO_KEY]["name"] == "mcp"  # the legacy client's own, from its initialize
    assert isinstance(seen[CLIENT_CAPABILITIES_KEY], dict)
    assert later["io.modelcontextprotocol/logLevel"] == "warning"
    log = read_log(log_file)
    assert "[backend=ts] speaks 2026-07-28 (server/discover answered)" in log
    assert "discovered ts-modern 1.0.0 (protocol 2026-07-28)" in log
    assert "initialized ts-modern" not in log  # no initialize: discover says all


async def test_a_modern_client_is_named_to_a_modern_backend(tmp_path: Path, node: Path) -> None:
    config = write_config(tmp_path / "gateway.toml", [ts_backend(node)])
    async with raw_gateway(config, tmp_path / "gateway.log") as gateway:
        params = modern_params({"name": "whoami", "arguments": {}})
        params["_meta"]["progressToken"] = "p-1"
        await gateway.request(1, "tools/call", params)
        answer = await gateway.answer_to(1)
    text = answer["result"]["content"][0]["text"]
    seen, meta = envelope_seen(text), orjson.loads(text)["meta"]
    assert seen[CLIENT_INFO_KEY] == RAW_INFO
    assert seen[CLIENT_CAPABILITIES_KEY] == RAW_CAPABILITIES
    assert "progressToken" in meta  # the gateway's own token for the client's, kept beside the envelope


async def test_list_changes_come_through_the_backends_listen(tmp_path: Path, node: Path) -> None:
    config = write_config(tmp_path / "gateway.toml", [ts_backend(node)])
    log_file = tmp_path / "gateway.log"
    notifications = Notifications()
    async with sdk_client(config, log_file, notifications) as client:
        await client.call_tool("add_tool", {"name": "extra"})
        await notifications.wait_for("notifications/tools/list_changed", 1)
        with trio.fail_after(30):
            while "extra" not in await tool_names(client):
                await notifications.wait_for("notifications/tools/list_changed", 2)
        assert text_of(await client.call_tool("extra", {"text": "new"})) == "new"
    assert "listening for toolsListChanged, resourcesListChanged" in read_log(log_file)


async def test_a_legacy_subscription_changes_the_listen_and_updates_arrive(
    tmp_path: Path, node: Path
) -> None:
    config = write_config(tmp_path / "gateway.toml", [ts_backend(node)])
    log_file = tmp_path / "gateway.log"
    async with raw_gateway(config, log_file) as gateway:
        await gateway.initialize()
        await gateway.request(1, "resources/subscribe", {"uri": NOTE})
        assert (await gateway.answer_to(1))["result"] == {}  # the listen's new filter is acknowledged
        await gateway.call(2, "touch", uri=NOTE)
        seen = await gateway.receive_until(
            lambda message: message.get("method") == "notifications/resources/updated"
        )
        assert seen[-1]["params"] == {"uri": NOTE}
        await gateway.request(3, "resources/unsubscribe", {"uri": NOTE})
        assert (await gateway.answer_to(3))["result"] == {}
    log = read_log(log_file)
    assert "listening for toolsListChanged, resourcesListChanged, 1 resources" in log
    assert "resources/subscribe" not in log  # never sent as such: the 2026 era has no such method


async def test_era_modern_is_forced_and_legacy_is_refused_by_a_modern_only_server(
    tmp_path: Path, node: Path
) -> None:
    backends = [
        ts_backend(node, "forced", era="modern"),
        ts_backend(node, "old", era="legacy", restart={"max_restarts": 0}),
    ]
    config = write_config(tmp_path / "gateway.toml", backends)
    log_file = tmp_path / "gateway.log"
    async with sdk_client(config, log_file) as client:
        assert text_of(await client.call_tool("echo", {"text": "forced"})) == "forced"
        with pytest.raises(MCPError):
            await client.call_tool("old__echo", {"text": "never"})
    log = read_log(log_file)
    assert '[backend=forced] speaks 2026-07-28 (era = "modern" in the config)' in log
    assert "[backend=old] failed" in log and "-32022" in log


# --- over HTTP ------------------------------------------------------------------------------------------


async def test_a_modern_http_backend_gets_its_headers(tmp_path: Path, node: Path) -> None:
    """POST only, no session; Mcp-Method and Mcp-Name, and Mcp-Param-Region for the tool that declares it:
    the TypeScript server checks each against the body and answers 400 -32020 to a mismatch."""
    async with modern_server_over_http(node) as url:
        config = write_config(tmp_path / "gateway.toml", [{"name": "web", "url": url}])
        log_file = tmp_path / "gateway.log"
        notifications = Notifications()
        async with sdk_client(config, log_file, notifications) as client:
            assert await tool_names(client) == TOOLS
            assert text_of(await client.call_tool("echo", {"text": "over http"})) == "over http"
            assert (
                text_of(await client.call_tool("regional", {"region": "eu-west", "count": 3})) == "eu-west x3"
            )
            assert (
                text_of(await client.call_tool("regional", {"region": "Zürich", "count": -1})) == "Zürich x-1"
            )
            seen = envelope_seen(text_of(await client.call_tool("whoami", {})))
            assert seen[PROTOCOL_VERSION_KEY] == MODERN
            await client.call_tool("add_tool", {"name": "web_extra"})
            await notifications.wait_for("notifications/tools/list_changed", 1)
    log = read_log(log_file)
    assert "[backend=web] speaks 2026-07-28 (server/discover answered)" in log
    assert "-32020" not in log
