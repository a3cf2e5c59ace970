"""What this kernel and this user allow, found once at start: user namespaces, a bwrap smoke run, the Landlock
ABI, seccomp, cgroup v2 delegation. Each primitive is a yes or a no with the reason, for `status`."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, Final

import attrs

PROBE_TIMEOUT_S: Final = 5.0  # one smoke run; a hung bwrap is a "no"
# The least a smoke run needs: the programs' folders, read-only; what the merged-/usr layout links to.
SMOKE_BINDS: Final = ("/usr", "/bin", "/lib", "/lib64", "/sbin")


@attrs.frozen(kw_only=True)
class Primitive:
    ok: bool
    detail: str  # the version, ABI or why not

    def as_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "detail": self.detail}


@attrs.frozen(kw_only=True)
class Primitives:
    """What the sandbox can use here, for whom (root or not)."""

    root: bool
    userns: Primitive
    bwrap: Primitive  # a smoke run of the line backends run under
    landlock_abi: int  # 0: none
    seccomp: Primitive
    cgroup_v2: Primitive  # memory and pids delegated to us

    @property
    def landlock(self) -> Primitive:
        abi = self.landlock_abi
        return Primitive(ok=abi >= 1, detail=f"ABI {abi}" if abi else "not available (ENOSYS or off)")

    def as_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "userns": self.userns.as_json(),
            "bwrap": self.bwrap.as_json(),
            "landlock": {**self.landlock.as_json(), "abi": self.landlock_abi},
            "seccomp": self.seccomp.as_json(),
            "cgroup_v2": self.cgroup_v2.as_json(),
        }


def _run(argv: list[str]) -> Primitive:
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Primitive(ok=False, detail=f"{argv[0]}: {exc}")
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return Primitive(
            ok=False, detail=f"exit {done.returncode}: {said[-1] if said else 'no message'}"[:200]
        )
    return Primitive(ok=True, detail="works")


def probe_userns() -> Primitive:
    unshare = shutil.which("unshare")
    if unshare is None:
        return Primitive(ok=False, detail="no unshare(1) to try it with")
    return _run([unshare, "--user", "--map-root-user", "true"])


def probe_bwrap(userns: Primitive) -> Primitive:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Primitive(ok=False, detail="bwrap not installed (apt-get install bubblewrap)")
    if not userns.ok:
        return Primitive(ok=False, detail=f"{bwrap}: user namespaces unavailable ({userns.detail})")
    binds = [arg for path in SMOKE_BINDS for arg in ("--ro-bind-try", path, path)]
    smoke = _run([bwrap, *bwrap_isolation(share_net=False), *binds, "--", "true"])
    return attrs.evolve(smoke, detail=f"{bwrap}: {smoke.detail}")


def bwrap_isolation(*, share_net: bool) -> list[str]:
    """The namespace and privilege part of every bwrap line (the smoke run's and the backends').

    No --die-with-parent: it is PR_SET_PDEATHSIG (SIGKILL) on bwrap, which fires when the *thread* that
    forked it exits, and trio forks in worker threads that retire after 10 idle seconds (trio's
    IDLE_TIMEOUT): every sandboxed backend was SIGKILLed ten seconds into its life. The gateway ends the
    sandbox as it ends any backend (process group, stdin's end; see backends/process.py), and the pid
    namespace takes every process in it down with its first."""
    line = ["--unshare-all", "--new-session", "--cap-drop", "ALL", "--clearenv"]
    return [*line, "--share-net"] if share_net else line


def probe_landlock() -> int:
    try:
        import landlockpy

        return landlockpy.abi_version()
    except (ImportError, OSError):
        return 0


def probe_seccomp() -> Primitive:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError as exc:
        return Primitive(ok=False, detail=f"/proc/self/status: {exc.strerror}")
    if "Seccomp:" not in status:
        return Primitive(ok=False, detail="kernel without seccomp")
    try:
        import pyseccomp

        pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)  # loads libseccomp
    except (ImportError, OSError, RuntimeError) as exc:
        return Primitive(ok=False, detail=f"libseccomp unusable: {exc}")
    return Primitive(ok=True, detail="libseccomp filter")


def probe_cgroup_v2() -> Primitive:
    """Whether the gateway's own cgroup v2 is delegated to it (actors/sandbox/cgroup.py): the detail is
    the folder the runs' cgroups go under."""
    from actors.sandbox.cgroup import delegation_problem, own_cgroup

    folder, how = own_cgroup()
    if folder is None:
        return Primitive(ok=False, detail=how)
    problem = delegation_problem(folder)
    return Primitive(ok=False, detail=problem) if problem else Primitive(ok=True, detail=str(folder))


def probe() -> Primitives:
    userns = probe_userns()
    return Primitives(
        root=os.geteuid() == 0,
        userns=userns,
        bwrap=probe_bwrap(userns),
        landlock_abi=probe_landlock(),
        seccomp=probe_seccomp(),
        cgroup_v2=probe_cgroup_v2(),
    )


_PROBING: Final = threading.Lock()  # the backends' first spawns ask at once, each from a worker thread


def primitives() -> Primitives:
    """This process's probe, run once (the kernel does not change under a running gateway)."""
    with _PROBING:
        return _probed()


@functools.cache
def _probed() -> Primitives:
    return probe()
