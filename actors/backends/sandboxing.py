"""The sandbox (actors/sandbox/) at a backend's spawn: the probe (once, in a worker thread), the plan, what
`require` refuses and `auto` says once, the report `status` shows; and, at the run's end, whether the
sandbox explains it (refused at start, killed by a limit), as errors the supervisor and catalog act on."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import trio
from loguru import logger

from actors.backends.errors import BackendError, BackendExitedError, BackendStartError
from actors.config.sandbox_schema import SandboxMode, SandboxSettings
from actors.sandbox.exec import EXIT_REFUSED
from actors.sandbox.launch import Launch, prepare
from actors.sandbox.plan import Plan, plan
from actors.sandbox.probe import Primitives, primitives

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
) -> Launch | None:
    """The launch of a backend's spawn under its sandbox (None when it is off), its report given to
    `report_to` (for status). `require` with a rule missing raises SandboxUnavailableError; `auto` logs one
    DEGRADED line per backend (`warned` holds the names already told)."""
    if settings is None or settings.mode is SandboxMode.OFF:
        report_to(None)
        return None
    found = await probed()
    chosen = plan(settings, found)
    launch = prepare(name, argv, cwd=cwd, env=env, settings=settings, plan=chosen)
    report_to({**report(settings, chosen, found), "missing": list(launch.missing)})
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


def _why(missing: Sequence[str], found: Primitives) -> str:
    reasons = {
        "read": f"no filesystem engine (bwrap: {found.bwrap.detail}; landlock: {found.landlock.detail})",
        "write": "",
        "hide": "",
        "network": f"no network namespace (bwrap: {found.bwrap.detail}) "
        f"and no seccomp ({found.seccomp.detail})",
        "tasks": "tasks needs a uid of its own (RLIMIT_NPROC never binds root; set `user`) or cgroup v2 "
        f"delegation ({found.cgroup_v2.detail})",
        "user": "`user` is honoured only when the gateway runs as root",
    }
    if "hide" in missing and "read" not in missing:
        reasons["hide"] = "hide inside a read or write path needs bwrap (Landlock only grants)"
    told = [reasons.get(rule) or "" for rule in missing]
    return f"cannot enforce {', '.join(missing)}: " + "; ".join(text for text in told if text)


def verdict(error: BackendError, returncode: int | None, stderr_tail: Sequence[str]) -> BackendError:
    """A sandboxed run's end as the sandbox explains it: refused at start (the launcher's or bwrap's own
    words, EACCES/EPERM) or killed by a limit; else the error as it was."""
    text = "\n".join(stderr_tail)
    if isinstance(error, BackendStartError) and (
        returncode == EXIT_REFUSED or any(DENIED_WORDS.search(line) for line in stderr_tail)
    ):
        return SandboxDeniedError(f"sandbox_denied: {error.without_stderr}", error.stderr)
    if isinstance(error, BackendExitedError | BackendStartError) and (
        returncode in LIMIT_SIGNALS or LIMIT_WORDS.search(text)
    ):
        return SandboxLimitError(f"sandbox_limit: {error.without_stderr}", error.stderr)
    return error
