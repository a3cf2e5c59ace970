"""The control files of one `serve`: how `mcp-gateway reload` and `status` find every gateway serving a
config, and what each one's last reload did.

The folder: `$XDG_RUNTIME_DIR` when it is set and is a real folder of this user that nobody else may enter
(owner == euid, not a symlink, mode 0700); else `<tmp>/mcp-gateway-<uid>`, created 0700 and checked the
same way. A folder that fails the check is skipped with a warning: a start never fails for it, the
gateway then only cannot be reached by `reload` (SIGHUP still works).

In it each gateway owns two files, named after the config's resolved path (its key) and its own pid, so
that several gateways on one config never share a name:

    mcp-gateway-<key>-<pid>.pid           {"pid", "start", "config"}, created O_EXCL|O_NOFOLLOW 0600
    mcp-gateway-<key>-<pid>.reload.json   the last reload's outcome: {"serial", "pid", "ok", "lines"}

The outcome is written under a fresh temporary name (O_EXCL|O_NOFOLLOW) and renamed over the old one,
so a reader never sees half of it. Both files are removed when the gateway ends; a file left by a
process that died is removed by the next `reload` or `status` that sees it (control_peers.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Protocol

import attrs
import orjson
from loguru import logger

PRIVATE_FILE: Final = 0o600
PRIVATE_FOLDER: Final = 0o700
CREATE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a planted FIFO
RECORD_MAX_BYTES: Final = 256 * 1024  # a pid record or an outcome read back: larger is not one of ours
KEY_CHARS: Final = 16  # hex digits of the config path's sha256 in the file names


class Outcome(Protocol):
    """What a reload did (reload.ReloadOutcome; the runtime knows no config)."""

    @property
    def ok(self) -> bool: ...

    @property
    def lines(self) -> Sequence[str]: ...


def config_key(config_path: Path | str) -> str:
    return hashlib.sha256(str(Path(config_path).resolve()).encode()).hexdigest()[:KEY_CHARS]


def pid_file_pattern(key: str) -> re.Pattern[str]:
    """The names of the pid files of one config: the pid is in the name."""
    return re.compile(rf"mcp-gateway-{re.escape(key)}-([1-9][0-9]{{0,9}})\.pid")


def folder_problem(folder: Path) -> str | None:
    """Why `folder` may not hold control files, or None: it must be this user's own and closed to others."""
    try:
        info = os.lstat(folder)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder"
    if info.st_uid != os.geteuid():
        return f"belongs to uid {info.st_uid}, not {os.geteuid()}"
    if stat.S_IMODE(info.st_mode) & 0o077:
        return f"has mode {stat.S_IMODE(info.st_mode):04o}; it must be 0700"
    return None


def runtime_folder() -> Path | None:
    """$XDG_RUNTIME_DIR, if set."""
    value = os.environ.get("XDG_RUNTIME_DIR")
    return Path(value) if value else None


def fallback_folder() -> Path:
    return Path(tempfile.gettempdir()) / f"mcp-gateway-{os.geteuid()}"


def control_folders(*, create: bool) -> list[Path]:
    """The folders control files may be in, best first, each checked (a warning for one that fails).
    With `create`, the fallback folder is made (0700) when it is missing and no runtime folder is usable."""
    usable: list[Path] = []
    runtime = runtime_folder()
    if runtime is not None:
        problem = folder_problem(runtime)
        if problem is None:
            usable.append(runtime)
        else:
            logger.warning("XDG_RUNTIME_DIR {} {}: not used for control files", runtime, problem)
    fallback = fallback_folder()
    if create and not usable:
        with contextlib.suppress(OSError):  # there already (checked below), or cannot be made
            os.mkdir(fallback, PRIVATE_FOLDER)
    if os.path.lexists(fallback) and fallback not in usable:
        problem = folder_problem(fallback)
        if problem is None:
            usable.append(fallback)
        elif create and not usable:
            logger.warning("{} {}: not used for control files", fallback, problem)
    return usable


def read_private(path: Path, max_bytes: int = RECORD_MAX_BYTES) -> bytes | None:
    """The bytes of `path` if it is a regular file of this user's that only they may write, at most
    `max_bytes` long; else None. Never follows a symbolic link, never blocks on a FIFO."""
    try:
        descriptor = os.open(path, READ_FLAGS)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as stream:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
            return None
        data = stream.read(max_bytes + 1)
    return data if len(data) <= max_bytes else None


def write_new(path: Path, data: bytes) -> None:
    """Create `path` (it must not exist; a symbolic link there is not followed), 0600, with `data`."""
    descriptor = os.open(path, CREATE_FLAGS, PRIVATE_FILE)
    with os.fdopen(descriptor, "wb") as stream:
        stream.write(data)


def replace_private(path: Path, data: bytes) -> None:
    """Whole or not at all (a reader never sees half): written under a fresh name, then renamed over."""
    partial = path.with_name(f"{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        write_new(partial, data)
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise


@attrs.define
class ControlFiles:
    """Owns: this process's pid file and outcome file for one config; `release` removes both."""

    folder: Path
    key: str
    pid: int
    serial: int = 0

    @property
    def pid_path(self) -> Path:
        return self.folder / f"mcp-gateway-{self.key}-{self.pid}.pid"

    @property
    def outcome_path(self) -> Path:
        return self.folder / f"mcp-gateway-{self.key}-{self.pid}.reload.json"

    @classmethod
    def claim(cls, config_path: Path) -> ControlFiles | None:
        """This process serves the config now: its pid file, in the first usable folder. None (and a
        warning) when no folder will do; the start goes on."""
        key, record = config_key(config_path), _pid_record(config_path)
        for folder in control_folders(create=True):
            files = cls(folder, key, os.getpid())
            try:
                files._create(record)
            except OSError as exc:
                logger.warning("cannot write a control file in {}: {}", folder, exc.strerror or exc)
                continue
            return files
        logger.warning("no folder for control files: `mcp-gateway reload` will not find this gateway")
        return None

    def _create(self, record: bytes) -> None:
        with contextlib.suppress(OSError):
            self.outcome_path.unlink()  # a dead process's of the same pid
        try:
            write_new(self.pid_path, record)
        except FileExistsError:
            # The name holds this pid: what is there was left by a process that had it before.
            self.pid_path.unlink()
            write_new(self.pid_path, record)

    def release(self) -> None:
        for path in (self.pid_path, self.outcome_path):
            with contextlib.suppress(OSError):
                path.unlink()

    def tell(self, outcome: Outcome) -> None:
        self.serial += 1
        record = {"serial": self.serial, "pid": self.pid, "ok": outcome.ok, "lines": list(outcome.lines)}
        try:
            replace_private(self.outcome_path, orjson.dumps(record))
        except OSError as exc:
            logger.warning("cannot write the reload outcome {}: {}", self.outcome_path, exc.strerror or exc)


def _pid_record(config_path: Path) -> bytes:
    pid = os.getpid()
    return orjson.dumps({"pid": pid, "start": process_start(pid), "config": str(Path(config_path).resolve())})


def process_start(pid: int) -> int | None:
    """When the process started (ticks since boot, /proc/PID/stat field 22): with the pid, one process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return None
