"""The stdio sandbox, shown on a hostile backend (tests/backends/hostile_stdio.py) behind a real gateway and
the official SDK client over stdio: under `require` every attempt (read a canary outside `read`, write
outside `write`, connect to a loopback listener, fork 200 children, allocate 1 GiB, read the gateway's
environment) fails while its other tools and another backend still answer; under `off` each attempt
succeeds, so the test can fail. Stopping the gateway leaves no sandboxed process or grandchild.

One gateway per mode (two in all). The backend runs as `nobody` under `require`: RLIMIT_NPROC never binds
root, so `tasks` is enforced only under a uid of its own (the plan says so; test_sandbox_plan.py)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import orjson
import pytest
import trio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from support import (
    INITIALIZE,
    ROOT,
    SESSION_DEADLINE_S,
    backend_entry,
    gateway_argv,
    processes_tagged,
    toml_value,
    wait_until_gone,
    write_config,
)

HOSTILE: Final = ROOT / "tests" / "backends" / "hostile_stdio.py"
SECRET_NAME: Final = "SANDBOX_TEST_GATEWAY_SECRET"
SYSTEM_PYTHON: Final = "/usr/bin/python3"

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0 or not Path(SYSTEM_PYTHON).exists(),
    reason="the sandbox runs on Linux; this test drops to nobody, which needs root",
)


@pytest.fixture(scope="module")
def world() -> Iterator[Path]:
    """A folder any uid may reach (pytest's are 0700): the canary, a place to write, the work folder."""
    folder = Path(tempfile.mkdtemp(prefix="sandbox-test-", dir="/tmp"))
    folder.chmod(0o755)
    (folder / "canary.txt").write_text("canary-7f3a\n")
    (folder / "canary.txt").chmod(0o644)
    for name in ("outside", "work"):
        (folder / name).mkdir()
        (folder / name).chmod(0o777)  # unix rights allow it: only the sandbox stands in the way
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def write_sandboxed_config(folder: Path, mode: str, tag: str) -> Path:
    hostile = {
        "name": "hostile",
        "command": SYSTEM_PYTHON,
        "args": [str(HOSTILE), tag],
        "cwd": str(folder / "work"),
        "restart": {"backoff_initial_s": 0.05, "max_restarts": 1},
    }
    config = write_config(folder / f"{mode}.toml", [hostile, backend_entry("other", "--only=echo")])
    table = {
        "mode": mode,
        "read": ["{runtime}", str(HOSTILE.parent)],
        "memory_mb": 256,
        "tasks": 32,
        "user": "nobody",
    }
    lines = ["", "[backends.sandbox]", *(f"{key} = {toml_value(value)}" for key, value in table.items())]
    other = '[[backends]]\nname = "other"'
    text = config.read_text().replace(other, "\n".join(lines) + "\n\n" + other)
    if mode == "require":  # as root without `user`, tasks cannot be enforced: require refuses, auto says so
        for name, its_mode in (("strict", "require"), ("lenient", "auto")):
            text += f'\n[[backends]]\nname = "{name}"\ncommand = "{SYSTEM_PYTHON}"\n'
            text += f'args = ["{HOSTILE}", "{tag}"]\ncwd = "{folder / "work"}"\n'
            text += f'[backends.sandbox]\nmode = "{its_mode}"\nread = ["{{runtime}}", "{HOSTILE.parent}"]\n'
    config.write_text(text)
    return config


def gateway_params(config: Path, log_file: Path) -> StdioServerParameters:
    """The gateway over stdio, a secret in its environment (as a listener's token secret would be)."""
    argv = gateway_argv(config, log_file)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), SECRET_NAME: "s3cret"}
    return StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT), env=env)


async def said(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    return result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["require", "off"])
async def test_hostile_backend(world: Path, tmp_path: Path, mode: str) -> None:
    tag = f"sandbox-tag-{uuid.uuid4().hex}"
    config = write_sandboxed_config(world, mode, tag)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        with trio.fail_after(SESSION_DEADLINE_S):
            async with Client(gateway_params(config, tmp_path / "gateway.log"), mode="legacy") as client:
                await exercise(client, mode, world, port, tag)
        await wait_until_gone(processes_tagged(tag))  # stopped: nothing it started outlives the gateway
    finally:
        listener.close()
    assert not processes_tagged(tag)
    if mode == "require":
        log = (tmp_path / "gateway.log").read_text()
        assert log.count("DEGRADED sandbox missing=tasks") == 1
        refused = [line for line in log.splitlines() if "sandbox_unavailable: mode=require" in line]
        assert len(refused) == 1 and "restarting" not in refused[0], refused


async def exercise(client: Client, mode: str, world: Path, port: int, tag: str) -> None:
    outside = world / "outside" / f"{mode}.txt"
    attempts = {
        "read": await said(client, "read_file", path=str(world / "canary.txt")),
        "write": await said(client, "write_file", path=str(outside)),
        "connect": await said(client, "connect", port=port),
        "fork": await said(client, "fork_many", count=200),
        "allocate": await said(client, "allocate", mb=1024),
    }
    environment = await said(client, "environment")
    assert await said(client, "echo", text="still here") == "done: still here"
    assert "still here" in await said(client, "other__echo", text="still here")
    if mode == "require":
        assert await said(client, "lenient__echo", text="auto") == "done: auto"
        with pytest.raises(MCPError, match="strict__echo"):  # never started: its tools never listed
            await client.call_tool("strict__echo", {"text": "x"})
    held = await said(client, "hold", seconds=60)
    assert held.startswith("done: ")
    assert processes_tagged(tag)  # the backend and its grandchild run
    if mode == "require":
        assert all(text.startswith("refused: ") for text in attempts.values()), attempts
        assert not outside.exists()
        assert SECRET_NAME not in environment
    else:
        assert all(text.startswith("done: ") for text in attempts.values()), attempts
        assert "canary-7f3a" in attempts["read"]
        assert outside.exists()
        assert SECRET_NAME in environment


async def test_a_gateway_killed_outright_takes_its_sandboxed_backends_and_their_grandchildren_along(
    world: Path, tmp_path: Path
) -> None:
    """SIGKILL leaves the gateway no time to stop anything: its lifeline (a pipe only it can write) reads
    end-of-file, and each sandbox's watcher kills its whole pid namespace, the grandchild that left the
    backend's session included. The backend here ignores its stdin's end (hold's grandchild does)."""
    tag = f"sandbox-tag-{uuid.uuid4().hex}"
    config = write_sandboxed_config(world, "require", tag)
    argv = gateway_argv(config, tmp_path / "gateway.log")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    requests = [
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hold", "arguments": {}}},
    ]
    with trio.fail_after(SESSION_DEADLINE_S):
        gateway = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=str(ROOT), env=env
        )
        try:
            assert gateway.stdin is not None and gateway.stdout is not None
            await gateway.stdin.send_all(b"".join(orjson.dumps(r) + b"\n" for r in requests))
            seen = b""
            while b'"id":2' not in seen:
                chunk = await gateway.stdout.receive_some()
                assert chunk, "the gateway ended before it answered"
                seen += chunk
            assert b"done: " in seen
            held = processes_tagged(tag)
            assert len(held) >= 2  # the backend (launcher and all) and its grandchild in a session of its own
        finally:
            gateway.kill()
            await gateway.wait()
        try:
            await wait_until_gone(held)
        except trio.TooSlowError:
            ps = ["ps", "-o", "pid,ppid,pgid,user,stat,args", "-p", ",".join(map(str, held))]
            left = (await trio.run_process(ps, capture_stdout=True, check=False)).stdout.decode()
            raise AssertionError(f"left running after the gateway's SIGKILL:\n{left}") from None


@pytest.mark.extra
async def test_a_sandboxed_backend_outlives_the_thread_that_spawned_it(world: Path, tmp_path: Path) -> None:
    """Trio forks in a worker thread that retires after 10 idle seconds (its IDLE_TIMEOUT); a parent-death
    signal tied to it would kill the backend then. Slow by nature (it waits out that timer): -m extra."""
    tag = f"sandbox-tag-{uuid.uuid4().hex}"
    config = write_sandboxed_config(world, "require", tag)
    with trio.fail_after(SESSION_DEADLINE_S + 15):
        async with Client(gateway_params(config, tmp_path / "gateway.log"), mode="legacy") as client:
            assert await said(client, "echo", text="before") == "done: before"
            await trio.sleep(12)  # past trio's IDLE_TIMEOUT: the spawning thread is gone
            assert await said(client, "echo", text="after") == "done: after"
    await wait_until_gone(processes_tagged(tag))
