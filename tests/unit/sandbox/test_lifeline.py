"""The launcher's lifeline watcher (actors/sandbox/exec.py), run as the gateway runs it: a policy on an
inherited memfd, the read end of a pipe whose write end the test holds as the gateway would. The write
end's close without a word (the gateway's death) kills the backend's process group, a child that ignores
its stdin's end included, also when the backend ended first (on its stdin's end, which the dying gateway
may close first); a byte (the gateway's own stop) stands the watcher down, killing nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from support import is_running, wait_until_gone

from actors.sandbox import exec as launcher

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pidfd and memfd: Linux")

# A backend with a child in its process group that outlives it unless someone kills the group; it prints
# the child's pid, then waits for its stdin to end (as an MCP server over stdio does).
BACKEND = (
    "import os,sys,time\nchild=os.fork()\nif child==0:\n    time.sleep(60);os._exit(0)\n"
    "print(child,flush=True)\nsys.stdin.read()\n"
)


def launch(lifeline: int, argv: list[str], word_ms: int = 250) -> subprocess.Popen[bytes]:
    policy = {
        "argv": argv,
        "env": {"PATH": "/usr/bin:/bin"},
        "cwd": "/",
        "rlimits": {"CORE": 0},
        "landlock": None,
        "deny_inet": False,
        "lifeline": lifeline,
        "pid_namespace": False,
        "gateway_pid_ns": 0,
        "word_ms": word_ms,
    }
    fd = os.memfd_create("policy", 0)
    os.write(fd, json.dumps(policy).encode())
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        return subprocess.Popen(
            [sys.executable, "-I", str(Path(launcher.__file__)), str(fd)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            pass_fds=(fd, lifeline),
            start_new_session=True,
        )
    finally:
        os.close(fd)


def watcher_of(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in children]


async def test_the_gateways_death_kills_the_backends_group_its_children_with_it() -> None:
    read, write = os.pipe2(os.O_CLOEXEC)
    backend = launch(read, [sys.executable, "-c", BACKEND])
    os.close(read)
    try:
        assert backend.stdout is not None
        child = int(backend.stdout.readline())
        watchers = [pid for pid in watcher_of(backend.pid) if pid != child]
        assert len(watchers) == 1  # the watcher, holding none of the backend's pipes
        os.close(write)  # the gateway dies: its stdin pipe to the backend stays open here, on purpose
        await wait_until_gone([backend.pid, child, *watchers])
    finally:
        backend.kill()
        backend.wait()


async def test_a_backend_that_ended_first_still_has_its_group_killed_when_the_gateway_dies() -> None:
    """The watcher waits a moment for the gateway's word after the backend's own end (here long enough
    to see it waiting, whatever the machine's load)."""
    read, write = os.pipe2(os.O_CLOEXEC)
    backend = launch(read, [sys.executable, "-c", BACKEND], word_ms=60_000)
    os.close(read)
    try:
        assert backend.stdout is not None and backend.stdin is not None
        child = int(backend.stdout.readline())
        watchers = [pid for pid in watcher_of(backend.pid) if pid != child]
        backend.stdin.close()  # a dying gateway's stdin pipe may close before its lifeline
        with trio.fail_after(10):
            await trio.to_thread.run_sync(backend.wait)
        assert is_running(child) and all(map(is_running, watchers))  # waiting for the gateway's word
        os.close(write)
        await wait_until_gone([child, *watchers])
    finally:
        backend.kill()
        backend.wait()


async def test_the_gateways_own_stop_stands_the_watcher_down_killing_nothing() -> None:
    read, write = os.pipe2(os.O_CLOEXEC)
    backend = launch(read, [sys.executable, "-c", BACKEND])
    os.close(read)
    try:
        assert backend.stdout is not None
        child = int(backend.stdout.readline())
        watchers = [pid for pid in watcher_of(backend.pid) if pid != child]
        os.write(write, b"\n")  # Launch.release: the stop that follows is the gateway's
        os.close(write)
        await wait_until_gone(watchers)
        assert is_running(backend.pid) and is_running(child)
    finally:
        backend.kill()
        backend.wait()
        os.kill(child, 9)


async def test_a_backend_that_ended_on_its_own_lets_its_watcher_go_without_a_word() -> None:
    """No word within the moment: the gateway lives and will stop the rest itself (bwrap's init would
    otherwise wait for the watcher, and the run's end with it)."""
    read, write = os.pipe2(os.O_CLOEXEC)
    backend = launch(read, [sys.executable, "-c", BACKEND], word_ms=10)
    os.close(read)
    try:
        assert backend.stdout is not None and backend.stdin is not None
        child = int(backend.stdout.readline())
        watchers = [pid for pid in watcher_of(backend.pid) if pid != child]
        backend.stdin.close()
        await wait_until_gone(watchers)
        assert is_running(child)  # nothing killed: the gateway's stop does that
    finally:
        os.close(write)
        backend.kill()
        backend.wait()
        os.kill(child, 9)
