"""cgroup v2 where it is delegated to the gateway: one child cgroup per sandboxed run, with `memory.max`
(memory_mb), `memory.swap.max = 0` and `pids.max` (tasks), which the launcher joins before it execs.

Delegated means the gateway's own cgroup (its `0::` line in /proc/self/cgroup, under the cgroup2 mount) is
writable by it and offers the memory and pids controllers: systemd's `Delegate=yes`, or a container with a
private, writable cgroup2. The kernel lets a cgroup with processes in it enable no controller for its
children (the "no internal processes" rule), so the first run that needs one moves the gateway (and what
else is in that cgroup: its own children) into a leaf, `<own>/gateway`, and enables `+memory +pids` in
`<own>`; the runs' cgroups are `<own>/mcp-<backend>-<random>` beside it.

The gateway opens each run's `cgroup.procs` and passes it to the launcher, which writes "0" to it (moving
itself) first thing: since Linux 5.16 a migration is checked with the opener's credentials and cgroup
namespace, so the launcher's uid drop and bwrap's cgroup namespace do not stand in the way, and every
process the backend starts is born inside. At the run's end `memory.events` (oom_kill) and `pids.events`
(max) say whether a limit ended it, `cgroup.kill` ends whatever is left, and the folder is removed.

MCP_GATEWAY_TEST_CGROUP (tests only; no config key sets it): a folder standing for the gateway's own
cgroup, so the tests can watch the files the gateway writes on a machine without delegation.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import threading
import time
from pathlib import Path
from typing import Final

import attrs
from loguru import logger

TEST_FOLDER_VARIABLE: Final = "MCP_GATEWAY_TEST_CGROUP"
CONTROLLERS: Final = frozenset({"memory", "pids"})
LEAF: Final = "gateway"  # where the gateway's own processes go when its cgroup must give up its own
MIB: Final = 1 << 20
RMDIR_TRIES: Final = 20  # cgroup.kill is asynchronous: the folder empties within a few ms
RMDIR_PAUSE_S: Final = 0.01
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]")


def own_cgroup() -> tuple[Path | None, str]:
    """The gateway's own cgroup v2 folder and how it was found, or None and why not."""
    test_folder = os.environ.get(TEST_FOLDER_VARIABLE)
    if test_folder:
        return Path(test_folder), "test folder"
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError as exc:
        return None, f"/proc/self/cgroup: {exc.strerror}"
    unified = next((line[3:] for line in lines if line.startswith("0::")), None)
    if unified is None:
        return None, "no cgroup v2 line in /proc/self/cgroup (cgroup v1 only)"
    mount = cgroup2_mount()
    if mount is None:
        return None, "no cgroup2 file system mounted"
    return mount / unified.lstrip("/"), "own"


def cgroup2_mount() -> Path | None:
    """Where cgroup2 is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid machine)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split(" - ", 1)
        if len(fields) == 2 and fields[1].split(" ", 1)[0] == "cgroup2":
            return Path(fields[0].split(" ")[4])
    return None


def delegation_problem(folder: Path) -> str | None:
    """Why the runs cannot have cgroups under `folder`, or None."""
    try:
        offered = set((folder / "cgroup.controllers").read_text().split())
    except OSError as exc:
        return f"{folder}: cgroup.controllers unreadable ({exc.strerror})"
    if not offered >= CONTROLLERS:
        missing = " and ".join(sorted(CONTROLLERS - offered))
        return f"{folder}: {missing} not offered by cgroup.controllers"
    for name in ("", "cgroup.subtree_control", "cgroup.procs"):
        if not os.access(folder / name, os.W_OK):
            return f"{folder / name}: not writable by this user (not delegated)"
    return None


@attrs.define(eq=False)
class CgroupParent:
    """Owns: the parent of the runs' cgroups, made ready once per gateway process (`ready`)."""

    folder: Path
    _ready: str | None = None  # "" once ready; else why it cannot be
    _lock: threading.Lock = attrs.field(factory=threading.Lock)  # spawns ask from worker threads

    def ready(self) -> str | None:
        """None when runs can have cgroups here; else why not (said once, then remembered)."""
        with self._lock:
            if self._ready is None:
                self._ready = _enable(self.folder)
            return self._ready or None


def _enable(folder: Path) -> str:
    """`folder`'s children given memory and pids: "" when done, else why not."""
    try:
        if set((folder / "cgroup.subtree_control").read_text().split()) >= CONTROLLERS:
            return ""
        leaf = folder / LEAF
        leaf.mkdir(exist_ok=True)
        own = str(os.getpid())
        others = [pid for pid in (folder / "cgroup.procs").read_text().split() if pid != own]
        for pid in [*others, own]:  # its children started so far, and the gateway
            with contextlib.suppress(ProcessLookupError):
                (leaf / "cgroup.procs").write_text(pid)
        (folder / "cgroup.subtree_control").write_text("+memory +pids")
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno == errno.EBUSY:
            why += " (processes other than the gateway's share its cgroup)"
        return f"{folder}: cannot enable memory and pids for the backends' cgroups: {why}"
    logger.info("cgroup: the gateway moved into {}; backends get cgroups beside it", leaf)
    return ""


@attrs.define(eq=False)
class RunCgroup:
    """Owns: one run's cgroup folder and the gateway's handle on its cgroup.procs (for the launcher)."""

    folder: Path
    procs_fd: int

    @classmethod
    def make(cls, parent: Path, name: str, *, memory_mb: int | None, tasks: int | None) -> RunCgroup:
        """The run's cgroup with its limits; OSError when the kernel refuses it."""
        folder = parent / f"mcp-{_UNSAFE.sub('_', name)[:64]}-{secrets.token_hex(4)}"
        folder.mkdir()
        try:
            if memory_mb is not None:
                (folder / "memory.max").write_text(str(memory_mb * MIB))
                if (folder / "memory.swap.max").exists():
                    (folder / "memory.swap.max").write_text("0")
            if tasks is not None:
                (folder / "pids.max").write_text(str(tasks))
            fd = os.open(folder / "cgroup.procs", os.O_WRONLY | os.O_CREAT, 0o644)
        except OSError:
            with contextlib.suppress(OSError):
                folder.rmdir()
            raise
        return cls(folder, fd)

    def close_fd(self) -> None:
        fd, self.procs_fd = self.procs_fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def limit_hit(self) -> str | None:
        """ "memory" or "tasks" when the kernel held the run to that limit, else None."""
        for rule, file, key in (("memory", "memory.events", "oom_kill"), ("tasks", "pids.events", "max")):
            if _event_count(self.folder / file, key):
                return rule
        return None

    def remove(self) -> None:
        """Ends whatever is left in it and removes it (a run's end, however it ended)."""
        self.close_fd()
        kill = self.folder / "cgroup.kill"
        if kill.exists():
            with contextlib.suppress(OSError):
                kill.write_text("1")
        for _ in range(RMDIR_TRIES):
            try:
                _remove_folder(self.folder)
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    break
                time.sleep(RMDIR_PAUSE_S)  # in the stop's worker thread: processes leaving it
        logger.warning("cgroup {} could not be removed; it is left empty or busy", self.folder)


def _event_count(path: Path, key: str) -> int:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def _remove_folder(folder: Path) -> None:
    """rmdir: a real cgroup's files are not files; a test folder's are, and go first."""
    if not os.environ.get(TEST_FOLDER_VARIABLE):
        folder.rmdir()
        return
    for entry in folder.iterdir():
        entry.unlink()
    folder.rmdir()
