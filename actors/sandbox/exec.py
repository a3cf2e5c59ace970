"""The sandbox launcher, run as a backend's process: `python -I .../actors/sandbox/exec.py FD` (by its path:
it imports nothing of the gateway, so any python3 runs it, under any uid; the policy names the folders of
its two bindings, landlockpy and pyseccomp).

It reads the policy (JSON, launch.py) from the inherited FD and closes it, then: rlimits (RLIMIT_DATA for
memory, NOFILE, NPROC where it binds, CORE=0), no_new_privs, Landlock, a seccomp filter denying AF_INET and
AF_INET6 sockets where there is no network namespace, and exec of the backend's program with exactly its
environment. stdin and stdout pass through untouched. The uid drop happened at spawn (Popen's user/group).

No PR_SET_PDEATHSIG (nor bwrap's --die-with-parent, the same thing): it fires when the gateway *thread* that
forked exits (see backends/process.py and probe.bwrap_isolation); the gateway's stop (stdin's end, the
process group, the descendants it tracks) and the pid namespace end the backend instead.

Any failure ends it with EXIT_REFUSED and one `sandbox: ...` line on stderr, which the gateway classifies.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import socket
import sys
from typing import Any, Final, NoReturn

EXIT_REFUSED: Final = 126  # as a shell's "found but cannot run"
PR_SET_NO_NEW_PRIVS: Final = 38
READ_RIGHTS: Final = ("EXECUTE", "READ_FILE", "READ_DIR")
DEVICES: Final = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
READ_ALWAYS: Final = ("/proc", "/dev")  # what runtimes read at start; the sandbox's own under bwrap


def refuse(reason: str) -> NoReturn:
    sys.stderr.write(f"sandbox: {reason}\n")
    sys.stderr.flush()
    os._exit(EXIT_REFUSED)


def read_policy(fd: int) -> dict[str, Any]:
    with os.fdopen(fd, "rb") as stream:  # closes it: the backend never sees its environment's copy
        return json.loads(stream.read())


def set_rlimits(limits: dict[str, int]) -> None:
    for name, value in limits.items():
        which = getattr(resource, f"RLIMIT_{name}")
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def no_new_privs() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        refuse(f"no_new_privs: {os.strerror(ctypes.get_errno())}")


def landlock(rules: dict[str, Any]) -> None:
    from landlockpy import AccessFS, AccessNet, Ruleset

    read = AccessFS(0)
    for right in READ_RIGHTS:
        read |= AccessFS[right]
    handled_net = AccessNet.BIND_TCP | AccessNet.CONNECT_TCP if rules["net"] else AccessNet.NONE
    with Ruleset(handled_net=handled_net) as ruleset:
        everything = ruleset.handled_fs
        for path in [*rules["read"], *READ_ALWAYS]:
            _allow(ruleset, path, read)
        for path in [*rules["write"], *DEVICES]:
            _allow(ruleset, path, everything)
        ruleset.restrict(no_new_privs=True)


def _allow(ruleset: Any, path: str, rights: Any) -> None:
    try:
        is_dir = os.path.isdir(path)
        ruleset.allow_path(path, rights if is_dir else rights & _file_rights())
    except FileNotFoundError:
        pass  # an optional part of {runtime} this machine lacks
    except OSError as exc:
        refuse(f"landlock rule for {path}: {exc.strerror}")


def _file_rights() -> Any:
    from landlockpy import AccessFS

    rights = AccessFS(0)
    for name in ("EXECUTE", "WRITE_FILE", "READ_FILE", "TRUNCATE", "IOCTL_DEV"):
        rights |= AccessFS[name]
    return rights


def deny_inet() -> None:
    import pyseccomp

    rule = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    for family in (socket.AF_INET, socket.AF_INET6, socket.AF_PACKET, socket.AF_NETLINK):
        rule.add_rule(pyseccomp.ERRNO(errno.EACCES), "socket", pyseccomp.Arg(0, pyseccomp.EQ, family))
    rule.load()


def main(argv: list[str]) -> NoReturn:
    if len(argv) != 2 or not argv[1].isdigit():
        refuse("usage: python -I actors/sandbox/exec.py POLICY_FD")
    try:
        policy = read_policy(int(argv[1]))
        sys.path[:0] = policy.get("sys_path", [])  # run by path under another uid: the bindings' folders
        set_rlimits(policy["rlimits"])
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        refuse(f"policy: {exc}")
    no_new_privs()
    if policy["landlock"] is not None:
        try:
            landlock(policy["landlock"])
        except (OSError, ImportError) as exc:
            refuse(f"landlock: {exc}")
    if policy["deny_inet"]:
        try:
            deny_inet()
        except (OSError, ImportError, RuntimeError, ValueError) as exc:
            refuse(f"seccomp: {exc}")
    command = policy["argv"]
    try:
        os.chdir(policy["cwd"])
        os.execve(command[0], command, policy["env"])
    except OSError as exc:
        refuse(f"cannot run {command[0]!r}: {exc.strerror}")


if __name__ == "__main__":
    main(sys.argv)
