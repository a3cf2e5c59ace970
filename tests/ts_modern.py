"""The TypeScript SDK v2 modern-only server (tests/interop/ts_modern_server.mjs) as a peer for tests: its
argv on stdio, and the server over HTTP (its URL). Shared by the direct interop tests and by the gateway's
tests with it as a backend; both need the `node` fixture (tests/conftest.py)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Final

from support import ROOT, url_printed_by

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


def modern_server_over_http(node: Path) -> AbstractAsyncContextManager[str]:
    """ts_modern_server.mjs on HTTP; its URL (the first line it prints)."""
    return url_printed_by(modern_server_argv(node, "http"))
