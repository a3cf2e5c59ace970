"""Interop: the official MCP TypeScript SDK v1's StdioClientTransport starts the gateway and quits
(stdin ended, 2 s, SIGTERM to the gateway alone, 2 s, SIGKILL): every backend and what each started is gone
within 1.5 s of the end of the gateway's stdin, some deaf to stdin's end and to SIGTERM (issue #24)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

import orjson
import pytest
import trio
from process_tree import BOUND_S, GRANDCHILDREN, Gone, descendants_of, end_all, family_config
from support import DEADLINE_S, ROOT, gateway_argv, read_log

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")

CLIENT: Final = ROOT / "tests" / "interop" / "ts_stdio_close.mjs"


async def next_line(stream: trio.abc.ReceiveStream, pending: bytearray) -> dict[str, object]:
    with trio.fail_after(DEADLINE_S):
        while b"\n" not in pending:
            chunk = await stream.receive_some()
            assert chunk, f"node ended its output early: {bytes(pending)!r}"
            pending += chunk
    line, _, rest = bytes(pending).partition(b"\n")
    pending[:] = rest
    return orjson.loads(line)


async def test_the_typescript_sdk_closing_leaves_no_backend_nor_grandchild_within_the_bound(
    tmp_path: Path, node: Path
) -> None:
    config, log = family_config(tmp_path), tmp_path / "gateway.log"
    calls = orjson.dumps([list(call) for call in GRANDCHILDREN]).decode()
    argv = [str(node), str(CLIENT), orjson.dumps(gateway_argv(config, log)).decode(), calls, str(ROOT)]
    client = await trio.lowlevel.open_process(argv, stdin=-1, stdout=-1, cwd=str(ROOT / "tests" / "interop"))
    assert client.stdin is not None and client.stdout is not None
    gone = Gone([])
    try:
        pending = bytearray()
        started = await next_line(client.stdout, pending)
        gone = Gone(descendants_of(started["gateway"]))  # type: ignore[arg-type]
        assert {p.pid for p in gone.procs} >= set(started["pids"]) and len(gone.procs) >= 6  # type: ignore[arg-type]
        async with trio.open_nursery() as nursery:
            await client.stdin.send_all(b"close\n")  # the SDK ends the gateway's stdin now
            gone.start(nursery)
        assert gone.after_s is not None and gone.after_s <= BOUND_S
        assert await next_line(client.stdout, pending) == {"closed": True}
        with trio.fail_after(DEADLINE_S):
            assert await client.wait() == 0
    finally:
        await end_all(client, gone)
    text = read_log(log)
    assert "stdio client is gone; stopping" in text and "gateway stopped" in text
    assert "during the shutdown" not in text  # done before the SDK's SIGTERM: nothing to hurry
