"""A backend's command turned into its sandboxed launch: the bwrap line (where user namespaces work), the
launcher (actors/sandbox/exec.py) and the policy it reads from an inherited file descriptor.

Owns: the run's private {tmp} folder, removed by `Launch.close()` when the run's process is stopped.
`read_only` adds paths beside the settings' `read`: a prepared npx/uvx backend's cache (actors/supply/).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

import actors
from actors.config.sandbox_schema import SandboxNetwork, SandboxSettings
from actors.sandbox.cgroup import RunCgroup
from actors.sandbox.plan import Plan
from actors.sandbox.probe import bwrap_isolation

# {runtime} beyond the program's own folder: the system's libraries and the few /etc files programs need
SYSTEM_RUNTIME: Final = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/lib32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
)
DEVICES: Final = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
MIB: Final = 1 << 20


def runtime_paths(argv: Sequence[str]) -> list[str]:
    """{runtime}: the system's, the program's installation (the folder above its bin/), the files its
    arguments name by absolute path (`python /srv/server.py`: the script, not its folder), this gateway's
    Python and the launcher's package."""
    real = Path(os.path.realpath(argv[0]))
    own = [str(real.parent.parent if real.parent.name == "bin" else real.parent)]
    scripts = [arg for arg in argv[1:] if arg.startswith("/") and os.path.isfile(arg)]
    python = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    return [*SYSTEM_RUNTIME, *own, *scripts, *sorted(python), str(Path(actors.__file__).parent)]


def expand(entries: Sequence[str], *, program: Sequence[str], workdir: Path, tmp: Path) -> list[str]:
    """Placeholders and ~ replaced; duplicates dropped, order kept."""
    out: list[str] = []
    for entry in entries:
        if entry.startswith("{runtime}"):
            rest = entry[len("{runtime}") :]
            out += [path + rest for path in runtime_paths(program)] if rest else runtime_paths(program)
        elif entry.startswith("{workdir}"):
            out.append(str(workdir) + entry[len("{workdir}") :])
        elif entry.startswith("{tmp}"):
            out.append(str(tmp) + entry[len("{tmp}") :])
        else:
            out.append(os.path.expanduser(entry))
    return list(dict.fromkeys(os.path.normpath(path) for path in out))


def _under(path: str, folder: str) -> bool:
    """`path` is `folder` or inside it, however either is spelled (symlinks, `..`, doubled slashes)."""
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@attrs.define(kw_only=True)
class Launch:
    """What ProcessTransport.spawn runs: argv, the fd to pass, the uid; `close()` after the process ends."""

    argv: list[str]
    env: dict[str, str]  # the launcher's own (bwrap clears it; the backend's is in the policy)
    policy_fd: int
    tmp: Path
    plan: Plan
    missing: tuple[str, ...]  # the plan's, and what these paths add (hide under a read path, Landlock only)
    options: dict[str, Any] = attrs.field(factory=dict)  # Popen's: pass_fds, user, group, extra_groups
    cgroup: RunCgroup | None = None  # the run's own cgroup, where v2 is delegated (cgroup.py)
    # The run's lifeline (exec.py's watcher): [read end, the gateway's write end], each -1 once closed. The
    # watcher stands down on a byte (`release`, the gateway's own stop) and kills the sandbox on end-of-file
    # without one: the gateway died, however (close-on-exec: no other process holds the write end).
    lifeline: list[int] = attrs.field(factory=lambda: [-1, -1])

    def close_policy(self) -> None:
        """Once: a second os.close of the same number would close whatever the gateway opened since (the
        cgroup's procs handle and the lifeline's read end with it: the child has its copies)."""
        fd, self.policy_fd = self.policy_fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.cgroup is not None:
            self.cgroup.close_fd()
        _close(self.lifeline, 0)

    def release(self) -> None:
        """The gateway stops the run itself: the watcher stands down (its stop ends the sandbox, and a
        watcher left waiting would hold bwrap's init, so the sandbox, up)."""
        held = self.lifeline[1]
        if held >= 0:
            with contextlib.suppress(OSError):
                os.write(held, b"\n")
        _close(self.lifeline, 1)

    def close(self) -> None:
        """At the run's end (blocking: a cgroup's removal waits for its processes to leave it)."""
        self.close_policy()
        self.release()
        shutil.rmtree(self.tmp, ignore_errors=True)
        if self.cgroup is not None:
            self.cgroup.remove()


def prepare(
    name: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    settings: SandboxSettings,
    plan: Plan,
    read_only: Sequence[str] = (),
    cgroup: RunCgroup | None = None,
) -> Launch:
    """The sandboxed launch of `argv` (the program's path resolved) under `plan`, joining `cgroup`."""
    tmp = Path(tempfile.mkdtemp(prefix=f"mcp-sandbox-{name}-"))
    if plan.uid is not None:
        os.chown(tmp, plan.uid, plan.gid if plan.gid is not None else -1)
    program = argv
    read = expand([*settings.read, *read_only], program=program, workdir=cwd, tmp=tmp)
    pinned = expand(read_only, program=program, workdir=cwd, tmp=tmp)  # read-only even inside a write path
    write = expand(settings.write, program=program, workdir=cwd, tmp=tmp)
    hide = expand(settings.hide, program=program, workdir=cwd, tmp=tmp)
    missing = plan.missing
    shown = [h for h in hide if os.path.lexists(h) and any(_under(h, r) for r in read + write)]
    if not plan.use_bwrap and shown and "hide" not in missing:
        missing = (*missing, "hide")  # Landlock only grants: a hidden path inside a granted one stays open
    policy = {
        "argv": list(argv),
        "env": {**env, "TMPDIR": str(tmp)},
        "cwd": str(cwd),
        "rlimits": _rlimits(settings, plan),
        "landlock": {"read": read, "write": write, "net": settings.network is SandboxNetwork.NONE}
        if plan.use_landlock
        else None,
        "deny_inet": plan.use_seccomp,
    }
    if plan.uid is not None:  # bwrap runs as that uid too: what it cannot reach would fail its binds
        read, write, hide, pinned = (_reachable(paths) for paths in (read, write, hide, pinned))
    launcher, sys_path = launcher_command(plan.uid)
    policy["sys_path"] = sys_path
    read = list(dict.fromkeys([*read, *sys_path, str(Path(launcher[0]).parent)]))
    lifeline, held = os.pipe2(os.O_CLOEXEC)  # the run's lifeline: the gateway holds `held` (see Launch)
    policy.update(lifeline=lifeline, pid_namespace=plan.use_bwrap, gateway_pid_ns=_pid_namespace())
    if cgroup is not None:
        policy["cgroup_fd"] = cgroup.procs_fd
    fd = _policy_fd(json.dumps(policy).encode())
    line = launcher = [*launcher, str(fd)]
    if plan.use_bwrap:
        line = [*bwrap_line(read, write, hide, cwd, settings, read_after=pinned), "--", *launcher]
    passed = (fd, lifeline, *((cgroup.procs_fd,) if cgroup is not None else ()))
    options: dict[str, Any] = {"pass_fds": passed}
    if plan.uid is not None:
        options.update(user=plan.uid, group=plan.gid, extra_groups=[])
    return Launch(
        argv=line,
        env={},
        policy_fd=fd,
        tmp=tmp,
        plan=plan,
        missing=missing,
        options=options,
        cgroup=cgroup,
        lifeline=[lifeline, held],
    )


def launcher_command(uid: int | None) -> tuple[list[str], list[str]]:
    """The launcher's command (without its fd) and the folders it imports its bindings from: exec.py run by
    its path in isolated mode (it imports nothing of the gateway), the bindings' folders on its sys.path.
    Under another uid this gateway's Python may be out of reach (a venv over a Python in /root): then the
    system's python3 runs it."""
    import landlockpy
    import pyseccomp

    python = sys.executable
    needs = [os.path.realpath(sys.executable), sys.base_prefix]
    if uid is not None and _reachable(needs) != needs:
        python = shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin") or "/usr/bin/python3"
    script = str(Path(__file__).with_name("exec.py"))
    bindings = {str(Path(landlockpy.__file__).parent.parent), str(Path(pyseccomp.__file__).parent)}
    return [python, "-I", script], sorted(bindings)


def _reachable(paths: Sequence[str]) -> list[str]:
    """The paths any user may reach: every folder above them searchable by others."""
    kept = []
    for path in paths:
        parents = Path(path).parents
        try:
            if all(os.stat(parent).st_mode & stat.S_IXOTH for parent in parents):
                kept.append(path)
        except OSError:
            continue
    return kept


def _rlimits(settings: SandboxSettings, plan: Plan) -> dict[str, int]:
    limits = {"CORE": 0}
    if settings.memory_mb is not None:
        limits["DATA"] = settings.memory_mb * MIB
    if settings.nofile is not None:
        limits["NOFILE"] = settings.nofile
    if settings.tasks is not None and "rlimits" in plan.enforced.get("tasks", ()):
        limits["NPROC"] = settings.tasks
    return limits


def bwrap_line(
    read: Sequence[str],
    write: Sequence[str],
    hide: Sequence[str],
    cwd: Path,
    settings: SandboxSettings,
    *,
    read_after: Sequence[str] = (),
) -> list[str]:
    """The bwrap line; `read_after` is bound read-only over the write binds (a prepared cache in the
    backend's writable work folder stays read-only)."""
    bwrap = shutil.which("bwrap") or "bwrap"
    line = [bwrap, *bwrap_isolation(share_net=settings.network is SandboxNetwork.HOST)]
    line += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for path in read:
        line += ["--ro-bind-try", path, path]
    for path in write:
        line += ["--bind-try", path, path]
    for path in read_after:
        line += ["--ro-bind-try", path, path]
    for path in hide:
        if os.path.isdir(path):
            line += ["--tmpfs", path]
        elif os.path.lexists(path):
            line += ["--ro-bind", "/dev/null", path]
    return [*line, "--chdir", str(cwd)]


def _close(fds: list[int], index: int) -> None:
    fd, fds[index] = fds[index], -1
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)


def _pid_namespace() -> int:
    """This process's pid namespace (its inode): the watcher's kill(-1) is only for a launcher in another
    one (bwrap's own), where it reaches nothing but the sandbox."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def _policy_fd(data: bytes) -> int:
    """A sealed-size memory file holding the policy, inheritable, at offset 0."""
    fd = os.memfd_create("mcp-sandbox-policy", 0)  # not MFD_CLOEXEC: the child reads it
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
