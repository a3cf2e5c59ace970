"""The end of stdin while backends are still starting (issue #34, point 12): a client that writes its
requests and closes its input at once (the README's first stdio example) is answered once the backends
have started, then the gateway ends; it was answered -32000 "the gateway is shutting down" when the
backends took longer than the drain share of the end of stdin (0.375 s) to start, as on a busy machine."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import orjson
import trio
from support import (
    DEADLINE_S,
    ROOT,
    backend_entry,
    drain,
    gateway_argv,
    search_stream,
    stop_process,
    write_config,
)

INFO = {"name": "shell", "version": "0"}
REQUESTS: list[dict[str, Any]] = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": INFO},
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}},
    },
]


def answers_in(stdout: bytes) -> dict[Any, dict[str, Any]]:
    return {answer["id"]: answer for answer in map(orjson.loads, stdout.splitlines())}


async def test_requests_held_for_the_start_are_answered_after_the_end_of_input(tmp_path: Path) -> None:
    """The backend's start is held (a file) until the gateway has seen the end of its input and said what
    it does about it: before the fix, it ended the session (and the gateway) first."""
    hold = tmp_path / "hold"
    hold.touch()
    config = write_config(tmp_path / "g.toml", [backend_entry("slow", "--only=echo", f"--hold-while={hold}")])
    argv = gateway_argv(config, tmp_path / "gateway.log")
    process = await trio.lowlevel.open_process(argv, stdin=-1, stdout=-1, stderr=-1)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    try:
        await process.stdin.send_all(b"".join(orjson.dumps(request) + b"\n" for request in REQUESTS))
        await process.stdin.aclose()
        seen = re.compile(rb"(wait for the backends to start|stdio client is gone)")
        said = await search_stream(process.stderr, seen, "what the gateway does at the end of its input")
        assert said == "wait for the backends to start"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain, process.stderr)
            hold.unlink()  # the backend starts now
            stdout = b""
            with trio.fail_after(DEADLINE_S):
                while chunk := await process.stdout.receive_some(65536):
                    stdout += chunk
        answers = answers_in(stdout)
        assert answers[1]["result"]["serverInfo"]["name"], answers
        assert answers[2]["result"]["content"][0]["text"] == "hi", answers
        with trio.fail_after(DEADLINE_S):
            assert await process.wait() == 0
    finally:
        await stop_process(process)


def readme_example() -> list[bytes]:
    """The lines the README's first stdio example pipes into the gateway, as it writes them."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("printf '%s\\n' \\") : readme.index("| .venv/bin/mcp-gateway serve --stdio")]
    return [line.encode() for line in re.findall(r"'(\{.*\})'", block)]


async def test_the_readmes_first_stdio_example_is_answered(tmp_path: Path) -> None:
    lines = readme_example()
    assert len(lines) == 3
    argv = [sys.executable, "-m", "actors", "serve", "--stdio", "--config", "config/stdio.toml"]
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}  # the notes backend's database
    with trio.fail_after(DEADLINE_S):
        done = await trio.run_process(
            argv, stdin=b"\n".join(lines) + b"\n", capture_stdout=True, capture_stderr=True, cwd=ROOT, env=env
        )
    answers = answers_in(done.stdout)
    assert done.returncode == 0 and "result" in answers[1], (answers, done.stderr.decode()[-3000:])
    assert answers[2]["result"]["content"][0]["text"] == "42", answers
