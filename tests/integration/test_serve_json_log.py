"""`serve --stdio --log-format json` as a real process: every stderr line is one JSON object with the text
format's context as fields, stdout carries the protocol only, and nothing a backend writes (to its stderr or
in a notifications/message) breaks a line or puts a raw control character in the log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import attrs
import pytest
import trio
from support import DEADLINE_S, ROOT, TEST_BACKEND, RawClient, write_config

from actors.runtime.log import CONTROLS, escape_controls

# Written raw to the backend's stderr: escape sequences, C0/C1 controls, quotes, a backslash, invalid UTF-8,
# U+2028, and a second line dressed up as a JSON log record of the gateway's own.
HOSTILE_STDERR: Final = (
    b'evil "quoted" \\ \x1b[2J\x1b]0;title\x07\r\x00\xc2\x85\xe2\x80\xa8\xff tail\n'
    b'{"time":"2026-01-01T00:00:00.000+00:00","level":"CRITICAL","message":"forged"}\n'
)
HOSTILE_LOG: Final = 'data "quoted"\x1b[31m\r\n{"level":"CRITICAL"}\x00\u2028\x85\x7f\u202e'
# Writes HOSTILE_STDERR, then becomes the test backend (its argv follows the script).
WRAPPER: Final = f"import os, sys; os.write(2, {HOSTILE_STDERR!r}); os.execv(sys.executable, sys.argv)"


@attrs.define
class StderrLines:
    """The gateway's stderr as it arrives, line by line; tests wait for a line, never for time."""

    lines: list[str] = attrs.field(factory=list)
    _grew: trio.Event = attrs.field(factory=trio.Event)
    ended: trio.Event = attrs.field(factory=trio.Event)

    async def read(self, stream: trio.abc.ReceiveStream) -> None:
        pending = b""
        while chunk := await stream.receive_some(65536):
            *complete, pending = (pending + chunk).split(b"\n")
            self.lines += [line.decode("utf-8") for line in complete]  # strict: the log is valid UTF-8
            self._grew.set()
            self._grew = trio.Event()
        assert pending == b"", f"stderr ended inside a line: {pending!r}"
        self.ended.set()
        self._grew.set()

    async def wait_for(self, wanted: str) -> None:
        with trio.fail_after(DEADLINE_S):
            while not any(wanted in line for line in self.lines):
                assert not self.ended.is_set(), f"stderr ended without {wanted!r}"
                await self._grew.wait()


def records(lines: list[str]) -> list[dict[str, Any]]:
    """Each line as a JSON object, checked: no raw control character, level, time and message present."""
    parsed = []
    for line in lines:
        assert CONTROLS.search(line) is None, f"a raw control character in {line!r}"
        record = json.loads(line)
        assert isinstance(record, dict) and {"time", "level", "message"} <= record.keys(), line
        parsed.append(record)
    return parsed


async def test_serve_logs_one_json_object_per_line(tmp_path: Path) -> None:
    hostile = {
        "name": "hostile",
        "command": sys.executable,
        "args": ["-c", WRAPPER, str(TEST_BACKEND), "--name", "hostile", "--only=log,echo"],
    }
    config = write_config(tmp_path / "gateway.toml", [hostile])
    argv = [
        sys.executable,
        "-m",
        "actors",
        "serve",
        "--stdio",
        "--config",
        str(config),
        "--log-format",
        "json",
    ]
    stderr = StderrLines()
    process = await trio.lowlevel.open_process(argv, stdin=-1, stdout=-1, stderr=-1, cwd=str(ROOT))
    gateway = RawClient(process)
    try:
        async with trio.open_nursery() as nursery:
            assert process.stderr is not None
            nursery.start_soon(stderr.read, process.stderr)
            await gateway.initialize()
            await gateway.call("log", "log", data=HOSTILE_LOG, level="warning")
            assert "result" in await gateway.answer_to("log")  # stdout: JSON-RPC objects only
            await stderr.wait_for("server log")
            await stderr.wait_for("forged")
            await gateway.close_stdin()
            for line in (await gateway.rest_of_stdout()).splitlines():
                assert "jsonrpc" in json.loads(line)
            assert await gateway.wait_exit() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    logged = records(stderr.lines)
    about = [r for r in logged if "started process" in r["message"] or r["message"].startswith("stderr: ")]
    assert about and all(r.get("backend") == "hostile" for r in about)
    first = HOSTILE_STDERR.split(b"\n")[0].decode("utf-8", "replace")
    assert {"level": "INFO", "message": f"stderr: {escape_controls(first)}"}.items() <= next(
        r for r in logged if r["message"].startswith("stderr: evil")
    ).items()
    forged = next(r for r in logged if r["message"].startswith('stderr: {"time"'))
    assert forged["level"] == "INFO" and forged["backend"] == "hostile"
    (server_log,) = [r for r in logged if "server log" in r["message"]]
    assert server_log["level"] == "WARNING" and server_log["backend"] == "hostile"
    assert server_log["message"].endswith(escape_controls(HOSTILE_LOG))
    assert any(r["message"] == "gateway stopped" for r in logged)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_config_error_is_one_line_in_either_format(tmp_path: Path, log_format: str) -> None:
    missing = tmp_path / "missing.toml"
    argv = [sys.executable, "-m", "actors", "serve", "--config", str(missing), "--log-format", log_format]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    message = json.loads(line)["message"] if log_format == "json" else line
    assert message == f"{missing}: no such file"
