"""The TypeScript SDK v2 modern-only server (tests/interop/ts_modern_server.mjs) as a peer for tests: its
argv on stdio, and the server over HTTP (its URL). Shared by the direct interop tests and by the gateway's
tests with it as a backend; both need the `node` fixture (tests/conftest.py)."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Final

import trio
from support import ROOT

SERVER: Final = ROOT / "tests" / "interop" / "ts_modern_server.mjs"
TOOLS: Final = [
    "echo",
    "ask_name",
    "ask_model",
    "whoami",
    "add_tool",
    "touch",
    "regional",
]  # as it lists them
NOTE: Final = "test://ts/note"  # its one resource


def modern_server_argv(node: Path, transport: str = "stdio") -> list[str]:
    return [str(node), str(SERVER), transport]


@asynccontextmanager
async def modern_server_over_http(node: Path) -> AsyncIterator[str]:
    """ts_modern_server.mjs on HTTP; its URL (the first line it prints)."""
    async with trio.open_nursery() as nursery:
        serve = partial(
            trio.run_process, modern_server_argv(node, "http"), stdout=subprocess.PIPE, check=False
        )
        process: trio.Process = await nursery.start(serve)
        assert process.stdout is not None
        try:
            received = b""
            while not received.endswith(b"\n"):
                chunk = await process.stdout.receive_some(1024)
                assert chunk, "the server exited before printing its URL"
                received += chunk
            yield received.decode().strip()
        finally:
            process.terminate()
