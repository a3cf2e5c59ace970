"""Answers written one write per burst (framing/burst.py) reach a stdio client that stopped reading until its
pipe was full: every one, whole and once, when it reads again (a cork the full pipe could not take goes out
later, ahead of what came after it; meanwhile the gateway stops reading calls, not answering them)."""

from __future__ import annotations

import array
import fcntl
import subprocess
import sys
import termios
from pathlib import Path

import orjson
import trio
from support import ROOT, backend_entry, write_config

CALLS = 150
TEXT_CHARS = 2000  # answers of ~2.1 KB: a one-page pipe holding one cannot take another whole
PIPE_PAGE = 4096  # the client's pipe is made one page (F_SETPIPE_SZ), so one answer in it makes it full
F_SETPIPE_SZ = 1031  # Linux's fcntl command
DEADLINE_S = 60


def unread_bytes(fd: int) -> int:
    held = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, held)
    return held[0]


def call_line(call_id: int) -> bytes:
    arguments = {"text": f"{call_id:05d}" + "x" * TEXT_CHARS}
    request = {
        "jsonrpc": "2.0",
        "id": call_id,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": arguments},
    }
    return orjson.dumps(request) + b"\n"


async def test_a_client_that_stops_reading_gets_every_answer_whole_and_once_when_it_reads_again(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path / "gateway.toml", [backend_entry("alpha", "--only=echo")])
    argv = [sys.executable, "-m", "actors", "serve", "--stdio", "--config", str(config)]
    process = await trio.lowlevel.open_process(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(ROOT)
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout, buffer = process.stdin, process.stdout, b""
    fcntl.fcntl(stdout.fileno(), F_SETPIPE_SZ, PIPE_PAGE)

    async def next_line() -> bytes:
        nonlocal buffer
        while b"\n" not in buffer:
            chunk = await stdout.receive_some()
            assert chunk, "the gateway closed its stdout"
            buffer += chunk
        line, buffer = buffer.split(b"\n", 1)
        return line

    try:
        with trio.fail_after(DEADLINE_S):
            client = {"name": "t", "version": "1"}
            initialize = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
            await stdin.send_all(
                orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": initialize})
                + b"\n"
            )
            assert orjson.loads(await next_line())["id"] == 0
            await stdin.send_all(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            async with trio.open_nursery() as nursery:
                # the calls in a few big writes (reads of many lines: bursts), without reading answers
                lines = [call_line(call_id) for call_id in range(1, CALLS + 1)]
                nursery.start_soon(stdin.send_all, b"".join(lines))
                # nothing signals a full pipe: its fill is polled, under the deadline
                while unread_bytes(stdout.fileno()) < TEXT_CHARS:  # noqa: ASYNC110
                    await trio.sleep(0.01)
                answers: dict[int, str] = {}
                while len(answers) < CALLS:
                    answer = orjson.loads(await next_line())  # every line whole JSON
                    assert answer["id"] not in answers, f"answered twice: {answer['id']}"
                    answers[answer["id"]] = answer["result"]["structuredContent"]["text"]
        assert answers == {i: f"{i:05d}" + "x" * TEXT_CHARS for i in range(1, CALLS + 1)}
    finally:
        process.kill()
        await process.wait()
