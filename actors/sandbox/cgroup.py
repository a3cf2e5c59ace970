"""cgroup v2 where it is delegated to the gateway: one child cgroup per sandboxed run, with `memory.max`
(memory_mb), `memory.swap.max = 0` and `pids.max` (tasks), which the launcher joins before it execs.

Delegated means the gateway's own cgroup (its `0::` line in /proc/self/cgroup, under the cgroup2 mount) is
writable by it and offers the memory and pids controllers: systemd's `Delegate=yes`, or a container with a
private, writable cgroup2. The kernel lets a cgroup with processes in it enable no controller for its
children (the "no internal processes" rule), so the first run that needs one moves the gateway (and its own
descendants there: backends started unsandboxed) into a leaf, `<own>/gateway`, and enables `+memory +pids`
in `<own>`; the runs' cgroups are `<own>/mcp-<backend>-<random>` beside it. A process of someone else's in
that cgroup is left where it is, and the runs get no cgroup (the reason says whose).

The gateway opens each run's `cgroup.procs` and passes it to the launcher, which writes "0" to it (moving
itself) first thing: since Linux 5.16 a migration is checked with the opener's credentials and cgroup
namespace, so the launcher's uid drop and bwrap's cgroup namespace do not stand in the way, and every
process the backend starts is born inside. At the run's end `memory.events` (oom_kill) and `pids.events`
(max) are read (and kept: the classification of the end comes after the removal), `cgroup.kill` ends
whatever is left, and the folder is removed.

Test hooks, neither settable from the config: PROC_SELF_CGROUP and MOUNTINFO (module constants the unit
tests monkeypatch), and the environment variable MCP_GATEWAY_TEST_CGROUP (tests only: a folder standing
for the gateway's own cgroup, so a test can watch the files a real gateway process writes on a machine
without delegation; its files are plain files, removed with the folder).
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

TEST_FOLDER_VARIABLE: Final = "MCP_GATEWAY_TEST_CGROUP"  # tests only (see the module's doc)
PROC_SELF_CGROUP: Final = Path("/proc/self/cgroup")
MOUNTINFO: Final = Path("/proc/self/mountinfo")
CONTROLLERS: Final = frozenset({"memory", "pids"})
LEAF: Final = "gateway"  # where the gateway's own processes go when its cgroup must give up its own
MIB: Final = 1 << 20
RMDIR_TRIES: Final = 20  # cgroup.kill is asynchronous: the folder empties within a few ms
RMDIR_PAUSE_S: Final = 0.01
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]")
FOREIGN_SHOWN: Final = 5  # pids named in the reason
ANCESTRY_MAX: Final = 4096  # parents walked up from a pid: deeper than any real tree


def own_cgroup() -> tuple[Path | None, str]:
    """The gateway's own cgroup v2 folder and how it was found, or None and why not."""
    test_folder = os.environ.get(TEST_FOLDER_VARIABLE)
    if test_folder:
        return Path(test_folder), "test folder"
    try:
        lines = PROC_SELF_CGROUP.read_text().splitlines()
    except OSError as exc:
        return None, f"{PROC_SELF_CGROUP}: {exc.strerror}"
    unified = next((line[3:] for line in lines if line.startswith("0::")), None)
    if unified is None:
        return None, f"no cgroup v2 line (0::) in {PROC_SELF_CGROUP} (cgroup v1 only)"
    found = cgroup2_mount()
    if found is None:
        return None, "no cgroup2 file system mounted"
    mount, root = found
    inside = os.path.relpath(unified, root) if root != "/" else unified.lstrip("/")
    if inside.startswith(".."):
        return None, f"its cgroup {unified} is outside the cgroup2 mount at {mount} (of {root})"
    return mount / inside, "own"


def cgroup2_mount() -> tuple[Path, str] | None:
    """Where cgroup2 is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid machine) and which
    folder of the hierarchy it shows there ("/" but for a bind mount of a part of it)."""
    try:
        lines = MOUNTINFO.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split(" - ", 1)
        if len(fields) == 2 and fields[1].split(" ", 1)[0] == "cgroup2":
            mounted = fields[0].split(" ")  # id, parent, device, root, mount point, ...
            return Path(_unescape(mounted[4])), _unescape(mounted[3])
    return None


def _unescape(field: str) -> str:
    """mountinfo's octal escapes (a space is \\040)."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)


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
    """`folder`'s children given memory and pids: "" when done, else why not. The gateway moves into the
    leaf first (what it starts from then on is born there), then its descendants left behind follow."""
    try:
        if set((folder / "cgroup.subtree_control").read_text().split()) >= CONTROLLERS:
            return ""
        own = os.getpid()
        foreign = [pid for pid in _listed(folder) if pid != own and _foreign(pid, own)]
        if foreign:
            shown = " ".join(map(str, foreign[:FOREIGN_SHOWN]))
            return (
                f"{folder}: processes other than the gateway's share its cgroup ({shown}); give the "
                "gateway a cgroup of its own (systemd: Delegate=yes on its unit)"
            )
        leaf = folder / LEAF
        leaf.mkdir(exist_ok=True)
        _move(leaf, own)
        for pid in _listed(folder):
            if pid != own and not _foreign(pid, own):
                _move(leaf, pid)
        (folder / "cgroup.subtree_control").write_text("+memory +pids")
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno == errno.EBUSY:
            why += " (processes other than the gateway's share its cgroup)"
        return f"{folder}: cannot enable memory and pids for the backends' cgroups: {why}"
    logger.info("cgroup: the gateway moved into {}; backends get cgroups beside it", leaf)
    return ""


def _listed(folder: Path) -> list[int]:
    return [int(pid) for pid in (folder / "cgroup.procs").read_text().split() if pid.isdigit()]


def _move(leaf: Path, pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # gone meanwhile
        (leaf / "cgroup.procs").write_text(str(pid))


def _foreign(pid: int, own: int) -> bool:
    """Whether `pid` is someone else's: not the gateway's descendant (a subreaper, it adopts its orphans).
    0 is a process of another pid namespace; one that ended meanwhile is nobody's."""
    if pid == 0:
        return True
    for _ in range(ANCESTRY_MAX):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rpartition(")")[2].split()[1])  # after the command's name, which may hold ") "
        if pid == own:
            return False
        if pid <= 1:
            return True
    return True


def write_limits(folder: Path, *, memory_mb: int | None, tasks: int | None) -> None:
    """memory.max and, where the kernel has swap accounting, memory.swap.max = 0; pids.max."""
    if memory_mb is not None:
        (folder / "memory.max").write_text(str(memory_mb * MIB))
        if (folder / "memory.swap.max").exists():
            (folder / "memory.swap.max").write_text("0")
    if tasks is not None:
        (folder / "pids.max").write_text(str(tasks))


@attrs.define(eq=False)
class RunCgroup:
    """Owns: one run's cgroup folder and the gateway's handle on its cgroup.procs (for the launcher), closed
    right after the spawn (Launch.close_policy); the folder is removed at the run's end (`remove`)."""

    name: str  # the backend's
    folder: Path
    procs_fd: int
    _removed: bool = False
    _hit: str | None = None  # the limit its events showed when it was removed

    @classmethod
    def make(cls, parent: Path, name: str, *, memory_mb: int | None, tasks: int | None) -> RunCgroup:
        """The run's cgroup with its limits; OSError when the kernel refuses it."""
        folder = parent / f"mcp-{_UNSAFE.sub('_', name)[:64]}-{secrets.token_hex(4)}"
        folder.mkdir()
        try:
            write_limits(folder, memory_mb=memory_mb, tasks=tasks)
            # inheritable only through Popen's pass_fds; O_CREAT: a test folder's is a plain file
            fd = os.open(folder / "cgroup.procs", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            with contextlib.suppress(OSError):
                folder.rmdir()
            raise
        return cls(name, folder, fd)

    def close_fd(self) -> None:
        fd, self.procs_fd = self.procs_fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def limit_hit(self) -> str | None:
        """ "memory" or "tasks" when the kernel held the run to that limit, else None; once removed, what
        its events said then (the run's end is explained after its stop, which removes it)."""
        if self._removed:
            return self._hit
        for rule, file, key in (("memory", "memory.events", "oom_kill"), ("tasks", "pids.events", "max")):
            if _event_count(self.folder / file, key):
                return rule
        return None

    def remove(self) -> None:
        """Ends whatever is left in it and removes it (a run's end, however it ended); once."""
        if self._removed:
            return
        self.close_fd()
        self._hit = self.limit_hit()
        self._removed = True
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
        logger.warning("cgroup {} of backend {} could not be removed; left behind", self.folder, self.name)


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
