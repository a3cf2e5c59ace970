"""Every process a backend starts ends with it (Linux; elsewhere these functions find nothing).

A backend's children are easy to end: they share its session and process group, which the transport
signals. A descendant that calls setsid() leaves both, and one whose parent exits (a double fork) is
re-parented; a server that starts helpers that way used to leave them running after the gateway stopped.

- The gateway makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so orphans of its backends'
  trees are re-parented to the gateway rather than to init, and stay findable.
- Each backend's `Family` notes its descendants while it runs (its process tree, walked through
  /proc/<pid>/task/<tid>/children, and the gateway's adopted children in its session or group), by pid and
  start time (a pid can be reused), and at stop adds whatever /proc shows in its session or group.
- A stray is an adopted child of the gateway in a session of its own that no running backend's family
  claims: it called setsid() and lost its parent (the backend crashed, or it double-forked) before a note
  saw it. Nothing ties it to its backend any more; it is some backend's, never a running one's that knows
  it, so the next backend to stop ends the strays too (at the latest, the gateway's shutdown).
- Adopted children are reaped once they exit, without taking the exit status of a child trio waits for:
  a child is reaped only when no pidfd of this process refers to it (trio holds one per process it runs)
  and no running backend is it, and only after os.waitid(WNOWAIT) shows it has exited.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import attrs
import trio
from loguru import logger

PR_SET_CHILD_SUBREAPER: Final = 36  # <linux/prctl.h>
GONE_POLL_S: Final = 0.02  # no event tells the exit of a process that is not our child: /proc is polled
PROC: Final = Path("/proc")
# The periodic notes of every running backend (and their reaps) share one scan of the gateway's children
# taken at most this often: each scan reads /proc for every child, and there is a backend per child, so a
# scan per backend per note cost CPU that grew with the square of the backends (100 of them: ~20% of a core).
SHARED_SCAN_S: Final = 1.0

_subreaper = False
_own_children: tuple[float, list[Proc]] = (-math.inf, [])  # when scanned (monotonic), and what was found
_last_reap = -math.inf
_running: dict[int, Family] = {}  # backend processes not yet stopped, by pid: never strays nor reaped here


@attrs.frozen
class Proc:
    pid: int
    ppid: int
    pgrp: int
    session: int
    starttime: int  # clock ticks after boot: with the pid, identifies one process
    state: str

    @property
    def exited(self) -> bool:
        return self.state in ("Z", "X")


def become_subreaper() -> None:
    """Make the gateway the child subreaper of everything it starts. Once; best effort, Linux only."""
    global _subreaper
    if _subreaper or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    except (OSError, AttributeError) as exc:
        logger.info("cannot become a child subreaper ({}); a backend's orphans may outlive it", exc)
        return
    _subreaper = True


def running(family: Family) -> None:
    """A backend process has started."""
    _running[family.root] = family


def stopping(pid: int) -> None:
    """A backend process is being stopped."""
    _running.pop(pid, None)


def stat(pid: int) -> Proc | None:
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (OSError, ValueError):
        return None
    fields = text[text.rfind(")") + 2 :].split()  # the command name may hold spaces and parentheses
    try:
        return Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]), fields[0])
    except (IndexError, ValueError):
        return None


def children(pid: int) -> set[int]:
    """The children of every thread of `pid`."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in (PROC / str(pid) / "task").iterdir():
            with contextlib.suppress(OSError, ValueError):
                found.update(int(child) for child in (task / "children").read_text().split())
    return found


def everyone() -> list[Proc]:
    procs = []
    with contextlib.suppress(OSError):
        for entry in PROC.iterdir():
            if entry.name.isdigit() and (proc := stat(int(entry.name))) is not None:
                procs.append(proc)
    return procs


@attrs.define
class Family:
    """The descendants of one backend process, noted while it runs and ended when it stops."""

    root: int
    seen: dict[int, int] = attrs.field(factory=dict)  # pid -> start time

    def note(self, max_age_s: float = 0.0) -> None:
        """Walk its tree (and the trees of descendants seen before, which may have been re-parented), and
        the gateway's adopted children in its session or process group (as a scan at most `max_age_s` old
        shows them). Those that have ended are forgotten, so a server that runs a command per call does not
        grow this."""
        self.seen = {pid: starttime for pid, starttime in self.seen.items() if self._running(pid)}
        adopted = [p for p in own_children(max_age_s) if self.kin(p)]
        for proc in adopted:
            self.seen.setdefault(proc.pid, proc.starttime)
        pending = [self.root, *self.seen]
        while pending:
            for child in children(pending.pop()) - self.seen.keys():
                if (proc := stat(child)) is not None:
                    self.seen[child] = proc.starttime
                    pending.append(child)

    def _running(self, pid: int) -> bool:
        """The process noted under this pid (not a new one that reuses it) has not ended."""
        proc = stat(pid)
        return proc is not None and proc.starttime == self.seen[pid] and not proc.exited

    def alive(self) -> list[Proc]:
        """Its descendants still running: those noted (the same process, not a reused pid), and whatever
        is in its session or process group now."""
        found: dict[int, Proc] = {}
        for pid in self.seen:
            if self._running(pid) and (proc := stat(pid)) is not None:
                found[pid] = proc
        for proc in everyone():
            if self.kin(proc) and not proc.exited and proc.pid != self.root:
                found[proc.pid] = proc
        return [proc for proc in found.values() if _may_signal(proc)]

    def kin(self, proc: Proc) -> bool:
        """In its session or process group."""
        return proc.session == self.root or proc.pgrp == self.root


def strays() -> list[Proc]:
    """Adopted children of the gateway in a session other than the gateway's that no running backend's
    family claims (noted afresh now): descendants of some backend that left its session and lost their
    parent before being noted."""
    if not _subreaper:
        return []
    families = list(_running.values())
    claimed = _owned()
    for family in families:
        family.note()
        claimed |= family.seen.keys()
    own_session = os.getsid(0)
    found = []
    for pid in children(os.getpid()) - claimed:
        proc = stat(pid)
        if proc is None or proc.exited or proc.session == own_session or not _may_signal(proc):
            continue
        if not any(family.kin(proc) for family in families):
            found.append(proc)
    return found


def signal_all(procs: Iterable[Proc], signum: signal.Signals) -> None:
    for proc in procs:
        now = stat(proc.pid)
        if now is not None and now.starttime == proc.starttime:  # not a new process under a reused pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, signum)


async def wait_gone(procs: list[Proc], timeout_s: float) -> list[Proc]:
    """Wait until every one has exited, or `timeout_s`; those still running."""
    with trio.move_on_after(max(timeout_s, 0.0)):
        while procs := [p for p in procs if _still_running(p)]:
            reap_adopted()
            await trio.sleep(GONE_POLL_S)
    reap_adopted()
    return [p for p in procs if _still_running(p)]


def still_running(procs: Iterable[Proc]) -> list[Proc]:
    """Those of `procs` that have not exited (a reused pid is another process: not one of them)."""
    return [proc for proc in procs if _still_running(proc)]


def own_children(max_age_s: float = 0.0) -> list[Proc]:
    """The gateway's children as /proc shows them: scanned now, or the last scan when it is at most
    `max_age_s` old."""
    global _own_children
    scanned_at, procs = _own_children
    now = time.monotonic()
    if now - scanned_at > max_age_s:
        procs = [proc for proc in map(stat, children(os.getpid())) if proc is not None]
        _own_children = (now, procs)
    return procs


def reap_adopted(every_s: float = 0.0) -> None:
    """Reap the gateway's adopted children that have exited, and only those: never a child that trio (or a
    running backend's transport) waits for, whose exit status is its. `every_s`: not again within that
    long of the last reap (the periodic callers, one per backend, share one reap)."""
    global _last_reap
    if not _subreaper:
        return
    now = time.monotonic()
    if now - _last_reap < every_s:
        return
    _last_reap = now
    exited = [proc.pid for proc in own_children(every_s) if proc.exited]
    if not exited:
        return
    owned = _owned()
    for pid in exited:
        if pid in owned:
            continue
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue


def _owned() -> set[int]:
    """Children someone in this process waits for: the running backends, and every process trio runs
    (it holds a pidfd for each until it has reaped it)."""
    owned = set(_running)
    fds = PROC / "self" / "fd"
    with contextlib.suppress(OSError):
        for fd in os.listdir(fds):
            with contextlib.suppress(OSError):
                if os.readlink(fds / fd) != "anon_inode:[pidfd]":
                    continue
                for line in (PROC / "self" / "fdinfo" / fd).read_text().splitlines():
                    if line.startswith("Pid:"):
                        owned.add(int(line.split()[1]))
    return owned


def _still_running(proc: Proc) -> bool:
    now = stat(proc.pid)
    return now is not None and now.starttime == proc.starttime and not now.exited


def _may_signal(proc: Proc) -> bool:
    return proc.pid not in (0, 1, os.getpid()) and proc.pgrp != os.getpgid(0)
