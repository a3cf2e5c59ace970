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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio
from support import is_running, kill_quietly, wait_until_gone

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


def children_of(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()


@attrs.define
class Watched:
    """A launched backend with its child and its watcher, and the lifeline's write end (the gateway's)."""

    backend: subprocess.Popen[bytes]
    child: int
    watchers: list[int]
    lifeline: list[int]  # [write end], emptied once closed

    def gateway_dies(self) -> None:
        os.close(self.lifeline.pop())

    def gateway_stops_it(self) -> None:
        os.write(self.lifeline[0], b"\n")  # Launch.release: the stop that follows is the gateway's
        self.gateway_dies()

    async def ends_on_its_own(self) -> None:
        assert self.backend.stdin is not None
        self.backend.stdin.close()
        with trio.fail_after(10):
            await trio.to_thread.run_sync(self.backend.wait)


@asynccontextmanager
async def watched(word_ms: int = 250) -> AsyncIterator[Watched]:
    read, write = os.pipe2(os.O_CLOEXEC)
    backend = launch(read, [sys.executable, "-c", BACKEND], word_ms)
    os.close(read)
    run = Watched(backend, 0, [], [write])
    try:
        assert backend.stdout is not None
        run.child = int(backend.stdout.readline())
        children = children_of(backend.pid)
        run.watchers = [int(pid) for pid in children if int(pid) != run.child]
        assert len(run.watchers) == 1  # the watcher, holding none of the backend's pipes
        yield run
    finally:
        if run.lifeline:
            run.gateway_dies()
        backend.kill()
        backend.wait()
        if run.child:
            kill_quietly([run.child])


async def test_the_gateways_death_kills_the_backends_group_its_children_with_it() -> None:
    async with watched() as run:
        run.gateway_dies()  # its stdin pipe to the backend stays open here, on purpose
        await wait_until_gone([run.backend.pid, run.child, *run.watchers])


async def test_a_backend_that_ended_first_still_has_its_group_killed_when_the_gateway_dies() -> None:
    """The watcher waits a moment for the gateway's word after the backend's own end (here long enough
    to see it waiting, whatever the machine's load)."""
    async with watched(word_ms=60_000) as run:
        await run.ends_on_its_own()  # a dying gateway's stdin pipe may close before its lifeline
        assert is_running(run.child) and all(map(is_running, run.watchers))  # waiting for the word
        run.gateway_dies()
        await wait_until_gone([run.child, *run.watchers])


async def test_the_gateways_own_stop_stands_the_watcher_down_killing_nothing() -> None:
    async with watched() as run:
        run.gateway_stops_it()
        await wait_until_gone(run.watchers)
        assert is_running(run.backend.pid) and is_running(run.child)


async def test_a_backend_that_ended_on_its_own_lets_its_watcher_go_without_a_word() -> None:
    """No word within the moment: the gateway lives and will stop the rest itself (bwrap's init would
    otherwise wait for the watcher, and the run's end with it)."""
    async with watched(word_ms=10) as run:
        await run.ends_on_its_own()
        await wait_until_gone(run.watchers)
        assert is_running(run.child)  # nothing killed: the gateway's stop does that
