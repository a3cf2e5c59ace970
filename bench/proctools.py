"""Reading processes from /proc (Linux), for scripts/chaos and scripts/bench."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Final

import trio

TICK: Final = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (which may itself hold spaces and parentheses)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def children(pid: int) -> set[int]:
    return {child for child, parent in _parents().items() if parent == pid}


def child_with_env(pid: int, name: str, value: str) -> int | None:
    """The child of `pid` started with `name=value` in its environment, if there is one."""
    entry = f"{name}={value}".encode()
    for child in children(pid):
        try:
            if entry in Path(f"/proc/{child}/environ").read_bytes().split(b"\0"):
                return child
        except OSError:
            continue
    return None


def descendants(pid: int) -> set[int]:
    parents = _parents()
    found: set[int] = set()
    todo = [pid]
    while todo:
        current = todo.pop()
        for child, parent in parents.items():
            if parent == current and child not in found:
                found.add(child)
                todo.append(child)
    return found


def _parents() -> dict[int, int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))) is not None:
            parents[int(entry.name)] = int(fields[1])
    return parents


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


async def terminate(process: trio.Process, wait_s: float) -> None:
    """SIGTERM, up to `wait_s` for it to exit, then SIGKILL and reap."""
    process.send_signal(signal.SIGTERM)
    with trio.move_on_after(wait_s):
        await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of `pid` (all its threads) so far; 0 once it is gone.

    Read from the process's kernel CPU clock, the figure /proc/PID/stat rounds to 10 ms ticks, to the
    nanosecond; from /proc/PID/stat where that clock cannot be read."""
    try:
        return time.clock_gettime(_process_cpu_clock(pid))
    except OSError:
        fields = _stat_fields(pid)
        return (int(fields[11]) + int(fields[12])) / TICK if fields else 0.0


def _process_cpu_clock(pid: int) -> int:
    """Linux's clock id for another process's CPU time (MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED))."""
    return (~pid << 3) | 2


def peak_rss_mib(pid: int) -> float:
    return _status_kib(pid, "VmHWM:") / 1024


def rss_kib(pid: int) -> float:
    """Resident memory now."""
    return _status_kib(pid, "VmRSS:")


def _status_kib(pid: int, key: str) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key):
                return float(line.split()[1])
    except OSError:
        pass
    return float("nan")
