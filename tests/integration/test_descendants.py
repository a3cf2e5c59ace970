"""Nothing a backend spawns outlives it: grandchildren that call setsid() and ignore SIGTERM, and ones that
double-fork so their parent is gone, are ended when the backend stops and when the gateway shuts down. The
gateway reaps what it adopts, and never the exit status of a child that trio waits for.

Real gateways in this process (so this process is the subreaper), real backend processes, and the test
backend's spawn_child tool, which answers only once its grandchild is set up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import pytest
import trio
from mcp import Client, MCPError
from sdk_websocket import websocket_client
from support import (
    backend_entry,
    fast_restarts,
    is_running,
    kill_quietly,
    running,
    wait_until_gone,
    with_websocket,
    write_config,
)

from actors.backends import descendants

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux's")

SPAWN: Final = "--only=spawn_child,crash,pid"
SETSID_IGNORING_TERM: Final = {"setsid": True, "ignore_sigterm": True}
DOUBLE_FORKED: Final = {"double_fork": True, "ignore_sigterm": True}
ESCAPED: Final = {"double_fork": True, "setsid": True, "ignore_sigterm": True}


async def spawn(client: Client, tool: str = "spawn_child", **how: bool) -> int:
    result = await client.call_tool(tool, how)
    assert not result.is_error, result
    pid: int = result.structured_content["pid"]  # type: ignore[index]
    assert is_running(pid)
    return pid


def session_of(pid: int) -> int:
    return os.getsid(pid)


def parent_of(pid: int) -> int:
    proc = descendants.stat(pid)
    assert proc is not None
    return proc.ppid


@asynccontextmanager
async def client_of(config: Path) -> AsyncIterator[Client]:
    async with running(config) as gateway:
        assert gateway.websocket_url is not None
        async with websocket_client(gateway.websocket_url) as client:
            yield client


async def test_a_backend_that_stops_takes_its_escaped_grandchildren_with_it(tmp_path: Path) -> None:
    """alpha crashes while beta runs on: what alpha started ends with alpha, beta's does not."""
    backends = [
        backend_entry("alpha", SPAWN, restart=fast_restarts()),
        backend_entry("beta", "--only=spawn_child"),
    ]
    config = with_websocket(write_config(tmp_path / "g.toml", backends))
    pids: list[int] = []
    try:
        async with client_of(config) as client:
            alpha = (await client.call_tool("pid", {})).structured_content["pid"]  # type: ignore[index]
            pids.append(setsid := await spawn(client, **SETSID_IGNORING_TERM))
            pids.append(orphan := await spawn(client, **DOUBLE_FORKED))
            pids.append(bystander := await spawn(client, "beta__spawn_child", **SETSID_IGNORING_TERM))
            assert session_of(setsid) == setsid and parent_of(orphan) == os.getpid()  # they did leave
            with pytest.raises(MCPError):
                await client.call_tool("crash", {"code": 1})
            await wait_until_gone([alpha, setsid, orphan])
            assert is_running(bystander)  # beta's is beta's
    finally:
        kill_quietly(pids)
    await wait_until_gone([bystander])  # and ended with beta, at shutdown


async def test_the_gateways_shutdown_ends_grandchildren_that_left_every_session(tmp_path: Path) -> None:
    """Double fork and setsid(): no session, group or parent ties it to its backend any more."""
    config = with_websocket(write_config(tmp_path / "g.toml", [backend_entry("alpha", SPAWN)]))
    pids: list[int] = []
    try:
        async with client_of(config) as client:
            pids.append(escaped := await spawn(client, **ESCAPED))
            pids.append(ignoring := await spawn(client, **SETSID_IGNORING_TERM))
            assert session_of(escaped) == escaped and parent_of(escaped) == os.getpid()  # adopted by us
        await wait_until_gone([escaped, ignoring])
    finally:
        kill_quietly(pids)


async def test_adopted_orphans_are_reaped_and_trios_own_children_keep_their_exit_status() -> None:
    descendants.become_subreaper()
    ours = await trio.lowlevel.open_process(["sh", "-c", "exit 3"])
    gate, release = os.pipe()  # the orphan lives until `release` closes
    try:
        # Python, not sh: dash cannot redirect from a descriptor numbered 10 or above.
        orphan = f"import os; os.read({gate}, 1)"
        script = (
            "import subprocess, sys; "
            f"child = subprocess.Popen([sys.executable, '-c', {orphan!r}], pass_fds=({gate},), "
            "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
            "print(child.pid)"
        )
        started = await trio.run_process(
            [sys.executable, "-c", script], capture_stdout=True, pass_fds=(gate,)
        )
        adopted = int(started.stdout)
        assert parent_of(adopted) == os.getpid()  # its parent has exited: this process adopted it
    finally:
        os.close(gate)
        os.close(release)
    await wait_until_gone([ours.pid, adopted])  # both have exited; neither is reaped yet
    assert descendants.stat(adopted) is not None and descendants.stat(ours.pid) is not None
    descendants.reap_adopted()
    assert descendants.stat(adopted) is None  # reaped: no zombie left behind
    assert await ours.wait() == 3  # trio's child: its status was left for trio


def test_pid_reuse_is_not_mistaken_for_a_descendant() -> None:
    family = descendants.Family(2**22 + 1)  # no such process: only what it noted can be its
    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        family.seen[child.pid] = -1  # a process of that pid noted long ago, not this one
        assert [proc.pid for proc in family.alive()] == []
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
