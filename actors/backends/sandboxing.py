"""The sandbox (actors/sandbox/) at a backend's spawn: the probe (once, in a worker thread), the plan, what
`require` refuses and `auto` says once, the report `status` shows; and, at the run's end, whether the
sandbox explains it (refused at start, killed by a limit), as errors the supervisor and catalog act on."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

import attrs
import trio
from loguru import logger

from actors.backends.errors import BackendError, BackendExitedError, BackendStartError
from actors.config.sandbox_schema import SandboxMode, SandboxSettings
from actors.sandbox.cgroup import CgroupParent, RunCgroup
from actors.sandbox.exec import EXIT_REFUSED
from actors.sandbox.launch import Launch, prepare
from actors.sandbox.plan import Plan, plan
from actors.sandbox.probe import Primitive, Primitives, primitives

# stderr words of a process that hit a limit: Python's, Node's, glibc's, the shell's
LIMIT_WORDS: Final = re.compile(
    r"MemoryError|Cannot allocate memory|out of memory|JavaScript heap|Resource temporarily unavailable"
    r"|Too many open files|EAGAIN|EMFILE|ENOMEM|bad_alloc",
    re.IGNORECASE,
)
DENIED_WORDS: Final = re.compile(r"^(sandbox|bwrap): |Permission denied|Operation not permitted|EACCES|EPERM")
# Only the signals a limit itself sends: a SIGKILL, SIGSEGV or SIGABRT alone may be anyone's (an operator, a
# crash, scripts/chaos), so those count only with a limit's words on stderr. Under bwrap a death by signal N
# reaches the gateway as exit code 128 + N.
LIMIT_SIGNALS: Final = frozenset(
    code for signum in (signal.SIGXCPU, signal.SIGXFSZ) for code in (-signum, 128 + signum)
)

LIMITS_BACKOFF_S: Final = 300.0  # a backend killed by its limits or refused by the sandbox: no restart storm


class SandboxUnavailableError(BackendStartError):
    """mode = "require" and a rule this kernel cannot enforce: not started, and not restarted (the kernel
    will not change by itself; a config reload or a restart of the gateway tries again)."""

    final = True  # supervisor: stays down, no restart loop
    state = "sandbox_unavailable"  # catalog: the backend's state (actors/catalog/status.py)


class SandboxDeniedError(BackendStartError):
    """The sandbox refused the backend at start (EACCES/EPERM, a bwrap error): restarted after a long wait."""

    backoff_min_s = LIMITS_BACKOFF_S


class SandboxLimitError(BackendExitedError):
    """The backend died on one of its limits (memory_mb, tasks, nofile): restarted after a long wait."""

    backoff_min_s = LIMITS_BACKOFF_S


async def probed() -> Primitives:
    """The probe's result, run once per process, off the event loop (a bwrap smoke run: a few ms)."""
    return await trio.to_thread.run_sync(primitives)


def report(settings: SandboxSettings, chosen: Plan | None, found: Primitives | None) -> dict[str, Any]:
    """What status shows of one backend's sandbox: its mode, the engines per rule, what is missing."""
    if chosen is None or found is None:
        return {"mode": settings.mode.value}
    return {**chosen.as_json(), "primitives": found.as_json()}


async def sandboxed(
    name: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    settings: SandboxSettings | None,
    warned: set[str],
    report_to: Callable[[dict[str, Any] | None], None],
    read_only: Sequence[str] = (),
) -> Launch | None:
    """The launch of a backend's spawn under its sandbox (None when it is off), its report given to
    `report_to` (for status); `read_only` adds to its read paths (a prepared backend's cache). `require`
    with a rule missing raises SandboxUnavailableError; `auto` logs one DEGRADED line per backend (`warned`
    holds the names already told)."""
    if settings is None or settings.mode is SandboxMode.OFF:
        report_to(None)
        return None
    found = await probed()
    chosen = plan(settings, found)
    cgroup = None
    if chosen.use_cgroup:
        cgroup, why = await _run_cgroup(name, settings, found)
        if cgroup is None:  # the probe said yes, the kernel no: planned again without it
            found = attrs.evolve(found, cgroup_v2=Primitive(ok=False, detail=why))
            chosen = plan(settings, found)
    try:
        launch = prepare(
            name, argv, cwd=cwd, env=env, settings=settings, plan=chosen, read_only=read_only, cgroup=cgroup
        )
    except BaseException:
        if cgroup is not None:
            cgroup.remove()  # empty yet: nothing to wait for
        raise
    shown = {**report(settings, chosen, found), "missing": list(launch.missing)}
    report_to({**shown, "cgroup": str(cgroup.folder)} if cgroup is not None else shown)
    if launch.missing and settings.mode is SandboxMode.REQUIRE:
        launch.close()
        why = _why(launch.missing, found)
        raise SandboxUnavailableError(f"sandbox_unavailable: mode=require but {why}")
    if launch.missing and name not in warned:
        warned.add(name)
        logger.warning(
            "DEGRADED sandbox missing={} engines={} ({})",
            ",".join(launch.missing),
            ",".join(chosen.engines),
            _why(launch.missing, found),
        )
    return launch


_PARENTS: Final[dict[str, CgroupParent]] = {}  # the parent of the runs' cgroups, by folder: one per process


async def _run_cgroup(
    name: str, settings: SandboxSettings, found: Primitives
) -> tuple[RunCgroup | None, str]:
    """The run's own cgroup under the delegated one (made ready at the first), or None and why not."""
    folder = found.cgroup_v2.detail  # the probe's: the delegated folder
    parent = _PARENTS.setdefault(folder, CgroupParent(Path(folder)))
    problem = await trio.to_thread.run_sync(parent.ready)
    if problem is not None:
        return None, problem
    try:
        made = partial(RunCgroup.make, Path(folder), name, memory_mb=settings.memory_mb, tasks=settings.tasks)
        return await trio.to_thread.run_sync(made), ""
    except OSError as exc:
        return None, f"{folder}: cannot make the run's cgroup: {exc.strerror or exc}"


def _why(missing: Sequence[str], found: Primitives) -> str:
    reasons = {
        "read": f"no filesystem engine (bwrap: {found.bwrap.detail}; landlock: {found.landlock.detail})",
        "write": "",
        "hide": "",
        "network": f"no network namespace (bwrap: {found.bwrap.detail}) "
        f"and no seccomp ({found.seccomp.detail})",
        "tasks": "tasks needs cgroup v2 delegation or, without it, a uid of its own (RLIMIT_NPROC never "
        f"binds root; set `user`); cgroup v2: {found.cgroup_v2.detail}",
        "user": "`user` is honoured only when the gateway runs as root",
    }
    if "hide" in missing and "read" not in missing:
        reasons["hide"] = "hide inside a read or write path needs bwrap (Landlock only grants)"
    told = [reasons.get(rule) or "" for rule in missing]
    return f"cannot enforce {', '.join(missing)}: " + "; ".join(text for text in told if text)


def verdict(
    error: BackendError, returncode: int | None, stderr_tail: Sequence[str], cgroup: RunCgroup | None = None
) -> BackendError:
    """A sandboxed run's end as the sandbox explains it: refused at start (the launcher's or bwrap's own
    words, EACCES/EPERM) or killed by a limit (its words, its signal, or its cgroup's events: an OOM kill
    by the cgroup leaves no words); else the error as it was."""
    text = "\n".join(stderr_tail)
    hit = cgroup.limit_hit() if cgroup is not None else None
    if hit is not None and isinstance(error, BackendExitedError | BackendStartError):
        why = f"sandbox_limit: its cgroup held it to its {hit} limit; {error.without_stderr}"
        return SandboxLimitError(why, error.stderr)
    if isinstance(error, BackendStartError) and (
        returncode == EXIT_REFUSED or any(DENIED_WORDS.search(line) for line in stderr_tail)
    ):
        return SandboxDeniedError(f"sandbox_denied: {error.without_stderr}", error.stderr)
    if isinstance(error, BackendExitedError | BackendStartError) and (
        returncode in LIMIT_SIGNALS or LIMIT_WORDS.search(text)
    ):
        return SandboxLimitError(f"sandbox_limit: {error.without_stderr}", error.stderr)
    return error
