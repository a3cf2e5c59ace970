"""Cross-era peers (MCP 2026-07-28, issue #16), connected DIRECTLY for now: no gateway between them yet.

The pieces the gateway's cross-era tests will put on each side of it, each proven to run on this machine:
- `ts_modern_server.mjs`, a modern-only server built with the TypeScript SDK v2 (`legacy: 'reject'`): later
  a backend behind the gateway, over stdio or HTTP;
- the Python SDK 2.3 `Client(mode="2026-07-28")` and `ts_modern_client.mjs` (the TypeScript SDK v2 client
  pinned to 2026-07-28): later clients of the gateway's fronts.
Each test is named after the pair it connects and ends in `_direct`; its gateway twin will replace the
direct connection with one through the gateway. The `node` fixture (conftest.py) installs the npm packages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import mcp_types as types
import orjson
import trio
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext
from support import ROOT, RawClient
from ts_modern import TOOLS, modern_server_argv, modern_server_over_http

MODERN: Final = "2026-07-28"
CLIENT: Final = ROOT / "tests" / "interop" / "ts_modern_client.mjs"
RUN_DEADLINE_S: Final = 60.0


async def run_ts_client(node: Path, *target: str) -> dict[str, Any]:
    """Run ts_modern_client.mjs against a URL or a stdio command; its one-line JSON report."""
    done = await trio.run_process(
        [str(node), str(CLIENT), *target], capture_stdout=True, capture_stderr=True, check=False
    )
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, f"node exited {done.returncode}\nstderr:\n{stderr}\nstdout:\n{stdout}"
    lines = stdout.splitlines()
    assert len(lines) == 1, f"expected one JSON line, got:\n{stdout}"
    return orjson.loads(lines[0])  # type: ignore[no-any-return]


def assert_ts_client_report(report: dict[str, Any]) -> None:
    assert report["protocolVersion"] == MODERN
    assert report["era"] == "modern"
    assert report["serverName"] == "ts-modern"
    assert report["tools"] == TOOLS
    assert report["echo"] == "from typescript"
    assert report["askName"] == "Hello, Ada"  # one input_required round, answered by the client's handler
    assert report["elicited"] == 1


async def test_python_sdk_2026_client_to_ts_modern_server_over_stdio_direct(node: Path) -> None:
    elicited: list[str] = []

    async def answer(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        elicited.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    argv = modern_server_argv(node)
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    with trio.fail_after(RUN_DEADLINE_S):
        async with Client(params, mode=MODERN, elicitation_callback=answer) as client:
            assert client.protocol_version == MODERN
            listed = await client.list_tools(cache_mode="bypass")
            assert [tool.name for tool in listed.tools] == TOOLS
            echoed = await client.call_tool("echo", {"text": "from python"})
            assert echoed.content[0].text == "from python"  # type: ignore[union-attr]
            greeted = await client.call_tool("ask_name", {})  # the SDK runs the input_required round itself
            assert greeted.content[0].text == "Hello, Ada"  # type: ignore[union-attr]
    assert elicited == ["What is your name?"]


async def test_ts_pinned_2026_client_to_ts_modern_server_over_stdio_direct(node: Path) -> None:
    with trio.fail_after(RUN_DEADLINE_S):
        report = await run_ts_client(node, *modern_server_argv(node))
    assert_ts_client_report(report)


async def test_ts_pinned_2026_client_to_ts_modern_server_over_http_direct(node: Path) -> None:
    with trio.fail_after(RUN_DEADLINE_S):
        async with modern_server_over_http(node) as url:
            report = await run_ts_client(node, url)
    assert_ts_client_report(report)


async def test_ts_modern_server_refuses_legacy_initialize_direct(node: Path) -> None:
    """The backend is modern-only: a 2025-11-25 initialize gets -32022, naming the version it supports."""
    process = await trio.lowlevel.open_process(modern_server_argv(node), stdin=-1, stdout=-1)
    try:
        raw = RawClient(process)
        answer = await raw.initialize("2025-11-25")
        await raw.close_stdin()
        assert await raw.wait_exit() == 0  # stdin's end stops it
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert answer["error"]["code"] == -32022
    assert answer["error"]["data"] == {"supported": [MODERN], "requested": "2025-11-25"}
