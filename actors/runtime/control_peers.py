"""Every gateway serving a config, found by its control files (control.py) and checked before it is signalled.

A pid file counts only if it is a regular file of this user's (not a symbolic link, nobody else may write
it), named `mcp-gateway-<key>-<pid>.pid` with the same pid inside. The process with that pid counts as a
gateway serving the config only when all of these hold:

1. it is alive: a pidfd is opened on it first, so the checks below and the signal are about one process,
   even if it ends meanwhile and its pid is given to another;
2. its real and effective uid are this user's (/proc/PID/status);
3. it started when the file says (the start time in /proc/PID/stat, written by the gateway at its claim):
   a pid given to another process since is not taken for the gateway;
4. its command line (/proc/PID/cmdline) runs `serve`: either the `mcp-gateway` launcher (argv[0], or
   argv[1] after its interpreter) followed by `serve`, or a Python interpreter with `-m actors serve`.

A file whose pid is not alive is removed when seen. A process that fails 2-4 is never signalled: the
caller says why. Outcome files are read with the same care and checked field by field.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from actors.runtime.control import (
    ControlFiles,
    config_key,
    control_folders,
    pid_file_pattern,
    process_start,
    read_private,
)

LAUNCHER: Final = "mcp-gateway"
MODULE: Final = "actors"
SERVE: Final = "serve"
OPTIONS_WITH_VALUE: Final = frozenset({"-X", "-W", "--check-hash-based-pycs"})  # the interpreter's own
LINES_MAX: Final = 1000  # lines of one outcome printed; a refused file lists every problem, not thousands
LINE_CHARS_MAX: Final = 2000


@attrs.frozen
class Peer:
    """A gateway's pid file and what the checks found: `problem` says why it may not be signalled."""

    pid: int
    files: ControlFiles
    problem: str | None = None


@attrs.frozen
class OutcomeRecord:
    serial: int
    ok: bool
    lines: tuple[str, ...]


def find_peers(config_path: Path | str) -> list[Peer]:
    """Each pid file for the config in the usable folders, its process checked; dead ones removed."""
    key, peers = config_key(config_path), []
    pattern = pid_file_pattern(key)
    for folder in control_folders(create=False):
        try:
            names = sorted(entry.name for entry in os.scandir(folder))
        except OSError:
            continue
        for name in names:
            match = pattern.fullmatch(name)
            if match is None:
                continue
            files = ControlFiles(folder, key, int(match.group(1)))
            peer = _check_file(files)
            if peer is not None:
                peers.append(peer)
    return peers


def _check_file(files: ControlFiles) -> Peer | None:
    record = _record(files.pid_path)
    if record is None or record.get("pid") != files.pid:
        return Peer(files.pid, files, f"its control file {files.pid_path} is not one a gateway wrote")
    try:
        with _pinned(files.pid):
            return Peer(files.pid, files, process_problem(files.pid, record.get("start")))
    except ProcessLookupError:
        files.release()  # stale: the gateway that wrote it is gone
        return None
    except OSError as exc:
        return Peer(files.pid, files, f"cannot be checked: {exc.strerror or exc}")


def signal_peer(peer: Peer, signum: signal.Signals) -> str | None:
    """Send `signum` to the peer if it still passes every check (on a pidfd): None, or why not."""
    start = (_record(peer.files.pid_path) or {}).get("start")
    try:
        with _pinned(peer.pid) as pidfd:
            problem = process_problem(peer.pid, start)
            if problem is None:
                signal.pidfd_send_signal(pidfd, signum)
            return problem
    except ProcessLookupError:
        peer.files.release()
        return "it has ended"
    except OSError as exc:
        return f"cannot be checked or signalled: {exc.strerror or exc}"


@contextlib.contextmanager
def _pinned(pid: int) -> Iterator[int]:
    """A pidfd of `pid`: whatever is checked and signalled through it is that one process."""
    pidfd = os.pidfd_open(pid)
    try:
        yield pidfd
    finally:
        os.close(pidfd)


def process_problem(pid: int, start: object) -> str | None:
    """Why the live process `pid` is not a gateway of this user's that started at `start`, or None."""
    status = _proc(pid, "status")
    uids = next((line.split()[1:3] for line in status.splitlines() if line.startswith(b"Uid:")), None)
    if uids is None:
        return "its owner cannot be read"
    if any(int(uid) != os.geteuid() for uid in uids):
        return f"it belongs to uid {int(uids[1])}, not to this user ({os.geteuid()})"
    argv = _proc(pid, "cmdline").split(b"\0")
    if not is_serve_command([arg.decode("utf-8", "replace") for arg in argv if arg]):
        return "it is not an mcp-gateway serve process"
    if start != process_start(pid):
        return "it started after its control file was written (another process has that pid now)"
    return None


def is_serve_command(argv: list[str]) -> bool:
    """`mcp-gateway serve`, `INTERPRETER .../mcp-gateway serve`, `PYTHON [options] -m actors serve`."""
    for index in (0, 1):
        if len(argv) > index + 1 and Path(argv[index]).name == LAUNCHER and argv[index + 1] == SERVE:
            return True
    if not argv or not Path(argv[0]).name.startswith("python"):
        return False
    index = 1
    while index < len(argv) and argv[index].startswith("-"):
        if argv[index] == "-m":
            return argv[index + 1 : index + 3] == [MODULE, SERVE]
        index += 2 if argv[index] in OPTIONS_WITH_VALUE else 1
    return False  # a script, or no -m


def read_outcome(files: ControlFiles) -> OutcomeRecord | None:
    """The peer's last reload outcome, if its file is there, its own, and well formed."""
    record = _record(files.outcome_path)
    if record is None or record.get("pid") != files.pid:
        return None
    serial, ok, lines = record.get("serial"), record.get("ok"), record.get("lines")
    if type(serial) is not int or type(ok) is not bool or not isinstance(lines, list):
        return None
    kept = tuple(str(line)[:LINE_CHARS_MAX] for line in lines[:LINES_MAX])
    return OutcomeRecord(serial, ok, kept)


def _record(path: Path) -> dict[str, Any] | None:
    data = read_private(path)
    if data is None:
        return None
    try:
        record = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def _proc(pid: int, name: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return b""
