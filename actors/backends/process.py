"""A backend MCP server as a child process: newline-delimited JSON-RPC on its stdin/stdout, stderr drained.

Each child starts in its own session (so its own process group). Stopping follows the MCP stdio lifecycle:
close stdin, wait, SIGTERM to the whole group, wait, SIGKILL to the group; whatever is left in the group
afterwards (grandchildren) is killed too. Descendants that left the group (setsid, double fork) are tracked
and ended alongside, within the same waits (see descendants.py). If the gateway itself is killed outright,
each child sees the end of its stdin, which is how an MCP stdio server knows to exit.

When the gateway shuts down, the waits are its shutdown's (runtime/shutdown.py): a signal during the
shutdown ends the polite wait at once (SIGTERM now), another ends the SIGTERM wait too (SIGKILL now).

No PR_SET_PDEATHSIG: it fires when the *thread* that forked the child exits, and trio forks in worker threads
that retire after a few idle seconds; every backend would be SIGTERMed a while after its start. It would reach
the backend alone, never what the backend started (descendants.py's business). The gateway instead handles
SIGINT, SIGTERM and SIGHUP until its backends are gone, and ends them within its shutdown budget, before the
clients' SDKs escalate to SIGKILL.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

import trio
from loguru import logger

from actors.backends import descendants
from actors.backends.errors import BackendStartError
from actors.framing.lines import READ_SIZE, LineStream
from actors.framing.pipes import PipeStream
from actors.runtime.log import RateLimiter
from actors.runtime.redact import redact
from actors.runtime.shutdown import Budget, Shutdown, Urgency

if TYPE_CHECKING:
    from actors.sandbox.launch import Launch

STDERR_TAIL_LINES: Final = 20  # kept to explain a crash in the log
STDERR_LINE_MAX: Final = 4096  # longer stderr lines are cut when logged
STDERR_LOG_RATE: Final = 50.0  # stderr lines logged per second, per backend; the rest are counted
KILL_WAIT_S: Final = 1.0  # after SIGKILL, how long to wait for the reaper (less in a shorter shutdown)
UNHURRIED: Final = Budget(0.0, 0.0, 0.0, KILL_WAIT_S)  # the kill wait of a backend stopped alone
DESCENDANTS_NOTE_S: Final = 2.0  # how often a running backend's descendants are noted (a walk of its tree)
# What the official MCP SDKs (Python and TypeScript) pass to a stdio server of the client's environment.
DEFAULT_INHERITED_ENV: Final = (
    (
        "APPDATA",
        "HOMEDRIVE",
        "HOMEPATH",
        "LOCALAPPDATA",
        "PATH",
        "PATHEXT",
        "PROCESSOR_ARCHITECTURE",
        "SYSTEMDRIVE",
        "SYSTEMROOT",
        "TEMP",
        "USERNAME",
        "USERPROFILE",
    )
    if sys.platform == "win32"
    else ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
)


def backend_environment(
    env: Mapping[str, str], inherit: Iterable[str] = (), withheld: Collection[str] = frozenset()
) -> dict[str, str]:
    """A backend's whole environment: the SDKs' default set and the `inherit` names, read from the gateway's
    own environment (never a `withheld` name, nor a default whose value is a shell function), then `env`."""
    chosen: dict[str, str] = {}
    for name in DEFAULT_INHERITED_ENV:
        value = os.environ.get(name)
        if value is not None and not value.startswith("()") and name not in withheld:
            chosen[name] = value
    for name in inherit:
        value = os.environ.get(name)
        if value is not None and name not in withheld:
            chosen[name] = value
    return {**chosen, **env}


class ProcessTransport:
    """A Transport over a child process. Owns the process: `stop()` must run on every exit path."""

    def __init__(self, process: trio.Process, max_bytes: int, shutdown: Shutdown | None = None) -> None:
        assert process.stdin and process.stdout and process.stderr
        self.process = process
        self.shutdown = shutdown or Shutdown()  # the gateway's: a signal during its shutdown hurries stop()
        stdout, stdin = process.stdout, process.stdin
        assert isinstance(stdout, trio.lowlevel.FdStream) and isinstance(stdin, trio.lowlevel.FdStream)
        self._lines = LineStream(PipeStream(stdout), PipeStream(stdin), max_bytes)
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self.ended = trio.Event()  # stderr has closed: the process has gone and its last words are in
        self.family = descendants.Family(process.pid)
        descendants.running(self.family)
        self.sandbox: Launch | None = None  # its sandbox's launch (actors/sandbox/), closed by stop()

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        max_bytes: int,
        shutdown: Shutdown | None = None,
        sandbox: Launch | None = None,
    ) -> ProcessTransport:
        """Start `argv` with exactly the environment `env` (see backend_environment); with a `sandbox`,
        its launch instead (the launcher gets `argv` and `env` through its policy)."""
        line, options = (sandbox.argv, sandbox.options) if sandbox else (list(argv), {})
        process: trio.Process | None = None
        try:
            process = await trio.lowlevel.open_process(
                line,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=sandbox.env if sandbox else dict(env),
                start_new_session=True,
                **options,
            )
        except OSError as exc:
            raise BackendStartError(
                f"cannot start {line[0]!r} in {str(cwd)!r}: {exc.strerror or exc}"
            ) from None
        finally:
            if sandbox and process is None:  # not started (a cancellation at open_process's checkpoint too)
                sandbox.close()  # its {tmp}, lifeline and cgroup: nothing joined it, nothing to wait for
            elif sandbox:
                sandbox.close_policy()  # the child has its copy
        descendants.become_subreaper()
        transport = cls(process, max_bytes, shutdown)
        transport.sandbox = sandbox
        return transport

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def label(self) -> str:
        return f"process {self.pid}"

    @property
    def ended_cleanly(self) -> bool:
        return self.process.returncode == 0

    async def drain(self) -> None:
        """Its stderr, and a note of its descendants every DESCENDANTS_NOTE_S while it runs."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._note_descendants)
            await self.drain_stderr()
            nursery.cancel_scope.cancel()

    async def _note_descendants(self) -> None:
        while True:
            self.family.note(descendants.SHARED_SCAN_S)  # every backend's note shares one scan of ours
            descendants.reap_adopted(descendants.SHARED_SCAN_S)
            await trio.sleep(DESCENDANTS_NOTE_S)

    async def receive(self) -> bytes | None:
        return await self._lines.receive()

    async def send(self, frame: bytes) -> None:
        await self._lines.send(frame)

    async def send_many(self, frames: Sequence[bytes]) -> None:
        await self._lines.send_many(frames)

    def send_nowait(self, frames: Sequence[bytes]) -> bool:
        return self._lines.send_nowait(frames)

    def cork_with(self, nursery: trio.Nursery) -> None:
        self._lines.cork_with(nursery)

    async def aclose(self) -> None:
        await self.stop(close_wait_s=0.0, term_wait_s=0.0)

    async def drain_stderr(self, log_line: Callable[[str], None] | None = None) -> None:
        """Read stderr until it closes, logging each line (rate-limited) and keeping a tail for crash reports.
        Never stops reading, so a chatty server can never block on a full stderr pipe."""
        assert self.process.stderr
        emit = log_line or _log_stderr_line
        limiter, pending = RateLimiter(STDERR_LOG_RATE), bytearray()
        try:
            while chunk := await self.process.stderr.receive_some(READ_SIZE):
                pending += chunk
                *lines, rest = pending.split(b"\n")
                pending = bytearray(rest[-STDERR_LINE_MAX:]) if len(rest) > STDERR_LINE_MAX else rest
                for raw in lines:
                    self._stderr_line(raw, limiter, emit)
            if pending:
                self._stderr_line(bytes(pending), limiter, emit)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass
        finally:
            self.ended.set()
            if limiter.suppressed:
                logger.warning("{} stderr lines not logged (over {}/s)", limiter.suppressed, STDERR_LOG_RATE)

    def _stderr_line(self, raw: bytes | bytearray, limiter: RateLimiter, emit: Callable[[str], None]) -> None:
        line = raw[:STDERR_LINE_MAX].decode("utf-8", "replace").rstrip()
        if not line:
            return
        line = redact(line)  # at the source: the tail, the log, the status page and clients' errors get this
        self.stderr_tail.append(line)
        suppressed = limiter.suppressed
        if limiter.allow():
            if suppressed:
                logger.warning("{} stderr lines not logged (over {}/s)", suppressed, STDERR_LOG_RATE)
            emit(line)

    def describe_end(self) -> str:
        code = self.process.returncode
        if code is None:
            what = "is still running"
        elif code < 0:
            what = f"was killed by {signal.Signals(-code).name}"
        else:
            what = f"exited with code {code}"
        return f"process {self.pid} {what}"

    def last_stderr(self) -> str:
        """The last lines the process wrote to stderr, for the log (and only the log, by default)."""
        return " | ".join(self.stderr_tail)

    async def wait_exit(self, timeout_s: float) -> int | None:
        with trio.move_on_after(timeout_s):
            await self.process.wait()
        return self.process.returncode

    async def stop(self, *, close_wait_s: float, term_wait_s: float) -> None:
        """Close stdin, wait, SIGTERM the group, wait, SIGKILL the group. Its descendants outside the group
        get SIGTERM and SIGKILL alongside, in the same waits. Shielded: runs to the end even while the
        caller is being cancelled, bounded by the two waits plus the wait after SIGKILL; a hurried
        shutdown cuts the first wait, a forced one both."""
        with trio.CancelScope(shield=True):
            if self.sandbox is not None:
                self.sandbox.release()  # its lifeline's watcher stands down: this stop ends the sandbox
            self.family.note()  # while it runs its tree is whole
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await self.process.stdin.aclose()  # type: ignore[union-attr]
            with self.shutdown.phase(close_wait_s, until=Urgency.HURRIED):
                await self.process.wait()
            exited = self.process.returncode is not None
            rest = self._descendants_left()
            if not exited:
                logger.info("did not exit after stdin closed; sending SIGTERM")
                self._signal_group(signal.SIGTERM)
            if rest:
                logger.info("ending {} processes it started: {}", len(rest), _pids(rest))
                descendants.signal_all(rest, signal.SIGTERM)
            with self.shutdown.phase(term_wait_s, until=Urgency.FORCED):
                await self.process.wait()
                await descendants.wait_gone(rest, math.inf)
            exited, rest = self.process.returncode is not None, descendants.still_running(rest)
            if not exited or rest:
                await self._kill(exited, rest)
            self._signal_group(signal.SIGKILL)  # grandchildren left in the group
            descendants.reap_adopted()
            for stream in (self.process.stdout, self.process.stderr):
                with contextlib.suppress(trio.ClosedResourceError, OSError):
                    await stream.aclose()  # type: ignore[union-attr]
            if self.sandbox is not None:  # its private {tmp}, its cgroup (which waits for it to empty)
                await trio.to_thread.run_sync(self.sandbox.close)

    def _descendants_left(self) -> list[descendants.Proc]:
        """What it started that still runs, and the strays that no running backend claims."""
        self.family.note()
        descendants.stopping(self.pid)
        rest = self.family.alive()
        mine = {proc.pid for proc in rest}
        return rest + [proc for proc in descendants.strays() if proc.pid not in mine]

    async def _kill(self, exited: bool, rest: list[descendants.Proc]) -> None:
        if not exited:
            logger.warning("did not exit after SIGTERM; sending SIGKILL")
            self._signal_group(signal.SIGKILL)
        if rest:
            logger.warning("{} processes it started did not exit after SIGTERM: SIGKILL", _pids(rest))
            descendants.signal_all(rest, signal.SIGKILL)
        kill_wait_s = min(KILL_WAIT_S, self.shutdown.budget_or(UNHURRIED).kill_s)
        deadline = trio.current_time() + kill_wait_s
        if not exited:
            await self.wait_exit(kill_wait_s)
        await descendants.wait_gone(rest, deadline - trio.current_time())

    def _signal_group(self, signum: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signum)


def _pids(procs: list[descendants.Proc]) -> str:
    return ", ".join(str(proc.pid) for proc in procs)


def _log_stderr_line(line: str) -> None:
    logger.info("stderr: {}", line)
