"""The sandbox launcher, run as a backend's process: `python -I .../actors/sandbox/exec.py FD` (by its path:
it imports nothing of the gateway, so any python3 runs it, under any uid; the policy names the folders of
its two bindings, landlockpy and pyseccomp).

It reads the policy (JSON, launch.py) from the inherited FD and closes it, then: the run's cgroup joined
where v2 is delegated (cgroup.py; the gateway opened its cgroup.procs, this writes "0" to it), rlimits
(RLIMIT_DATA for memory, NOFILE, NPROC where it binds, CORE=0), no_new_privs, Landlock, a seccomp filter
denying AF_INET and AF_INET6 sockets where there is no network namespace, and exec of the backend's program
with exactly its environment. stdin and stdout pass through untouched. The uid drop happened at spawn
(Popen's user/group).

No PR_SET_PDEATHSIG on the backend (nor bwrap's --die-with-parent, the same thing): it fires when the gateway
*thread* that forked exits (see backends/process.py and probe.bwrap_isolation). The gateway's death is
watched instead through the run's lifeline: a pipe whose write end only the gateway holds (close-on-exec),
whose read end the policy names. Before the exec the launcher forks a watcher that blocks on it: a byte is
the gateway's own stop (the watcher stands down; the stop, stdin's end, the process group and the
descendants it tracks, ends the backend); end-of-file without one is the gateway's death however it came
(SIGKILL too), and the watcher kills the whole sandbox (every process of its pid namespace under bwrap; else
the backend's process group). A backend that ends first (on its own: the gateway writes the byte as soon as
it sees that; or on its stdin's end from a dying gateway, which closes the lifeline a moment later) leaves
the watcher GATEWAY_WORD_MS to hear either, then it ends quietly (bwrap's init waits for it).

Any failure ends it with EXIT_REFUSED and one `sandbox: ...` line on stderr, which the gateway classifies.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import select
import signal
import socket
import sys
from typing import Any, Final, NoReturn

EXIT_REFUSED: Final = 126  # as a shell's "found but cannot run"
PR_SET_NO_NEW_PRIVS: Final = 38
MAX_FD: Final = 1 << 20  # closerange's end: close_range(2) closes what is open below it at once
GATEWAY_WORD_MS: Final = 250  # after the backend's own end: the gateway's word (or its death) comes by then
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


def join_cgroup(fd: int) -> None:
    """Into the run's cgroup (its cgroup.procs, opened by the gateway): "0" moves the writer, and every
    process it starts is born inside."""
    try:
        os.write(fd, b"0")
    finally:
        os.close(fd)


def watch_lifeline(fd: int, whole_namespace: bool, word_ms: int = GATEWAY_WORD_MS) -> None:
    """Fork the watcher of the run's lifeline (see the module's doc); the launcher closes its copy."""
    backend = os.getpid()
    group = os.getpgrp()  # the backend's (bwrap --new-session, or start_new_session): its children's too
    ended = os.pidfd_open(backend)
    watcher = os.fork()
    if watcher:
        os.close(fd)
        os.close(ended)
        return
    try:
        low, high = sorted((fd, ended))
        os.closerange(0, low)  # holds nothing of the backend's: its stdout's end is the backend's end
        os.closerange(low + 1, high)
        os.closerange(high + 1, MAX_FD)
        waiting = select.poll()
        waiting.register(fd, select.POLLIN)
        waiting.register(ended, select.POLLIN)
        ready = {found for found, _ in waiting.poll()}
        if fd not in ready:
            # The backend ended first: on its own (the gateway, alive, says so at once), or on its stdin's
            # end from a gateway dying now, whose exit closes the lifeline a moment later.
            waiting.unregister(ended)
            if not waiting.poll(word_ms):
                os._exit(0)  # no word and no end: the gateway lives, its stop will do the rest
        if os.read(fd, 1):
            os._exit(0)  # the gateway stops the run itself
        # End-of-file with no word: the gateway is gone (SIGKILL, OOM, a crash), its stop never to come.
        if whole_namespace:
            os.kill(-1, signal.SIGKILL)  # bwrap's pid namespace: every process of the sandbox but init
        elif group > 1:
            os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os._exit(0)


def in_other_pid_namespace(gateway_ns: int) -> bool:
    """Whether this process is in a pid namespace other than the gateway's (bwrap's own): kill(-1) reaches
    only the sandbox there, and never anything else of the machine."""
    try:
        return gateway_ns > 0 and os.stat("/proc/self/ns/pid").st_ino != gateway_ns
    except OSError:
        return False


def main(argv: list[str]) -> NoReturn:
    if len(argv) != 2 or not argv[1].isdigit():
        refuse("usage: python -I actors/sandbox/exec.py POLICY_FD")
    try:
        policy = read_policy(int(argv[1]))
        cgroup = policy.get("cgroup_fd")
    except (OSError, ValueError, AttributeError) as exc:
        refuse(f"policy: {exc}")
    if isinstance(cgroup, int):  # first: all it does from here on is counted there
        try:
            join_cgroup(cgroup)
        except OSError as exc:
            refuse(f"cgroup: cannot join the run's cgroup: {exc.strerror or exc}")
    try:
        sys.path[:0] = policy.get("sys_path", [])  # run by path under another uid: the bindings' folders
        nproc = policy["rlimits"].pop("NPROC", None)  # after the watcher's fork: it is no task of the backend
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
    lifeline = policy.get("lifeline")
    if isinstance(lifeline, int):
        try:
            gateway_ns = int(policy.get("gateway_pid_ns", 0))
            whole = bool(policy.get("pid_namespace")) and in_other_pid_namespace(gateway_ns)
            word_ms = policy.get("word_ms", GATEWAY_WORD_MS)  # the tests' own, to hold the watcher
            watch_lifeline(lifeline, whole, word_ms if isinstance(word_ms, int) else GATEWAY_WORD_MS)
        except OSError as exc:
            refuse(f"lifeline watcher: {exc.strerror or exc}")
    if nproc is not None:
        try:
            set_rlimits({"NPROC": nproc})
        except (OSError, ValueError) as exc:
            refuse(f"policy: {exc}")
    command = policy["argv"]
    try:
        os.chdir(policy["cwd"])
        os.execve(command[0], command, policy["env"])
    except OSError as exc:
        refuse(f"cannot run {command[0]!r}: {exc.strerror}")


if __name__ == "__main__":
    main(sys.argv)
