"""The program a stdio backend runs, looked up the one way both `check` and a backend's start use, so that
`check` fails exactly where a start would, and says why in the operator's terms.

A command with a slash is a path: `~` expanded, a relative one taken against the backend's cwd (which the
loader made absolute against the config file's folder). A bare name is looked up beside the gateway's own
interpreter first (so `python` and console scripts of this environment win), then on PATH: the backend's
`env.PATH` when it sets one, else the gateway's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from actors.config.backend_schema import StdioBackend


class CommandNotFoundError(Exception):
    """The backend's command names no program that can run; the message says what was looked at."""


def shown_path(written: str | os.PathLike[str], resolved: Path) -> str:
    """A path as the file has it and, when that differs, as it was resolved: 'data' (/etc/gw/data)."""
    text = os.fspath(written)
    return repr(text) if text == str(resolved) else f"{text!r} ({resolved})"


def locate_command(backend: StdioBackend) -> str:
    """The absolute path of the program `backend.command` names, or CommandNotFoundError saying why."""
    command = backend.command
    expanded = os.path.expanduser(command)
    if os.sep in expanded or (os.altsep and os.altsep in expanded):
        resolved = Path(os.path.normpath(backend.cwd / expanded))  # an absolute path ignores cwd
        return _runnable(resolved, shown_path(command, resolved))
    here = os.path.dirname(sys.executable)
    own_path = backend.env.get("PATH") or None  # empty: as if unset
    searched = [here, *(own_path if own_path is not None else os.environ.get("PATH", "")).split(os.pathsep)]
    first_found: Path | None = None
    for folder in filter(None, searched):
        candidate = Path(folder) / expanded
        if candidate.is_file():
            if os.access(candidate, os.X_OK):
                return str(candidate)
            first_found = first_found or candidate
    if first_found is not None:
        raise CommandNotFoundError(f"{command!r} is found at {first_found}, which is not executable")
    where = "the backend's env.PATH" if own_path is not None else "PATH"
    raise CommandNotFoundError(f"{command!r} is not found beside the gateway's Python ({here}) or on {where}")


def _runnable(path: Path, shown: str) -> str:
    if not path.exists():
        raise CommandNotFoundError(f"{shown} does not exist")
    if path.is_dir():
        raise CommandNotFoundError(f"{shown} is a directory, not a program")
    if not os.access(path, os.X_OK):
        raise CommandNotFoundError(f"{shown} is not executable (chmod +x it, or run it with its interpreter)")
    return str(path)
