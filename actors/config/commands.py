"""The program a stdio backend runs, looked up the one way both `check` and a backend's start use, so that
`check` fails exactly where a start would, and says why in the operator's terms.

A command with a slash is a path: `~` expanded, a relative one taken against the backend's cwd (which the
loader made absolute against the config file's folder). A bare name is looked up beside the gateway's own
interpreter first (so `python` and console scripts of this environment win), then on PATH: the backend's
`env.PATH` when it sets one, else the gateway's.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Final

from actors.config.backend_schema import StdioBackend
from actors.config.files import shown_path as shown_path
from actors.config.secret import revealed

PYTHON_NAME: Final = re.compile(r"python[0-9.]*")
PYTHON_OPTIONS_WITH_VALUE: Final = frozenset(["-W", "-X", "--check-hash-based-pycs"])


class CommandNotFoundError(Exception):
    """The backend's command names no program that can run; the message says what was looked at."""


def locate_command(backend: StdioBackend) -> str:
    """The absolute path of the program `backend.command` names, or CommandNotFoundError saying why."""
    command = backend.command
    expanded = os.path.expanduser(command)
    if os.sep in expanded or (os.altsep and os.altsep in expanded):
        resolved = Path(os.path.normpath(backend.cwd / expanded))  # an absolute path ignores cwd
        return _runnable(resolved, shown_path(command, resolved))
    here = os.path.dirname(sys.executable)
    own_path = revealed(backend.env).get("PATH") or None  # empty: as if unset
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


def python_entry_problem(backend: StdioBackend, program: str) -> tuple[int, str] | None:
    """When the program is a Python interpreter: (index in args, reason) if the script it is told to run is
    not there, or, for the gateway's own interpreter, the `-m` module it is told to run is not importable.
    Nothing is imported: modules are only found. Other programs' arguments are their own business."""
    if not PYTHON_NAME.fullmatch(os.path.basename(program)):
        return None
    args = backend.args
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in ("-c", "-"):
            return None
        if arg == "-m" and index + 1 < len(args):
            own = _same_file(program, sys.executable)
            missing = own and not _module_found(args[index + 1], backend)
            reason = f"module {args[index + 1]!r} is not found by the gateway's Python ({sys.executable})"
            return (index + 1, reason) if missing else None
        if arg in PYTHON_OPTIONS_WITH_VALUE:
            index += 2
            continue
        if arg.startswith("-"):
            index += 1
            continue
        script = Path(os.path.normpath(backend.cwd / os.path.expanduser(arg)))
        return None if script.is_file() else (index, f"{shown_path(arg, script)} does not exist")
    return None


def _same_file(one: str, other: str) -> bool:
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


def _module_found(name: str, backend: StdioBackend) -> bool:
    """Whether `python -m name` in the backend's cwd finds the module: the cwd and the backend's PYTHONPATH
    first, then what this interpreter finds (its site-packages, editable installs)."""
    top, *rest = name.split(".")
    first = [str(backend.cwd), *filter(None, revealed(backend.env).get("PYTHONPATH", "").split(os.pathsep))]
    try:
        spec = importlib.machinery.PathFinder.find_spec(top, first) or importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    for part in rest:
        locations = spec.submodule_search_locations if spec is not None else None
        if not locations:
            return False
        spec = importlib.machinery.PathFinder.find_spec(part, list(locations))
    return spec is not None
