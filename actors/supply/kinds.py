"""Which kind of pin a stdio backend gets, from its command: `npx` installs an npm package at start, `uvx`
a PyPI one; any other command is pinned by its executable's digest (and those of the files its arguments
name, such as the script `python server.py` runs)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

NPX_FLAGS: Final = frozenset({"-y", "--yes", "--no", "-q", "--quiet", "--silent"})
NPX_PACKAGE: Final = ("-p", "--package")
UVX_FLAGS: Final = frozenset({"-q", "--quiet", "--isolated"})
UVX_WITH_VALUE: Final = ("--from", "--with", "-w", "--python", "-p")
UVX_NAMES: Final = frozenset({"uvx"})


class UnpinnableError(Exception):
    """The backend's arguments do not say which package it runs; the message says what was not understood."""


def kind_of(command: str) -> str:
    """ "npm", "uv" or "exec", from the command's file name (`/usr/bin/npx` is npx)."""
    name = Path(command).name
    if name in ("npx", "npx.cmd"):
        return "npm"
    if name in UVX_NAMES:
        return "uv"
    return "exec"


def npx_packages(args: Sequence[str]) -> list[str]:
    """The package specs `npx ARGS` installs: each `-p/--package SPEC`, else its first positional argument."""
    packages: list[str] = []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg in NPX_FLAGS:
            continue
        if arg in NPX_PACKAGE and rest:
            packages.append(rest.pop(0))
        elif arg.startswith("--package="):
            packages.append(arg.partition("=")[2])
        elif arg == "--":
            return packages or rest[:1]
        elif arg.startswith("-"):
            raise UnpinnableError(f"npx option {arg!r} is not one prepare knows; write the package first")
        else:
            return packages or [arg]
    if not packages:
        raise UnpinnableError("npx is given no package")
    return packages


def package_name(spec: str) -> str:
    """npm's name of a spec: `@scope/name@1.2` -> `@scope/name`; a tarball path is returned as it is."""
    if spec.startswith("@"):
        scope, _, rest = spec.partition("/")
        return f"{scope}/{rest.partition('@')[0]}"
    return spec.partition("@")[0]


def file_arguments(args: Sequence[str], cwd: Path) -> list[Path]:
    """The arguments that name an existing file (taken against the backend's cwd), resolved: they are what
    an interpreter runs, so they are pinned with it."""
    found = []
    for arg in args:
        if arg.startswith("-"):
            continue
        path = cwd / os.path.expanduser(arg)
        if path.is_file():
            found.append(path.resolve())
    return found


def uvx_install(args: Sequence[str]) -> tuple[list[str], str]:
    """The options that make `uvx ARGS`'s environment (with `--from` set to the package when ARGS give it
    as the command), and that package's spec: `["--from", "mcp-server-fetch"], "mcp-server-fetch"`."""
    options: list[str] = []
    source: str | None = None
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        name, equals, value = arg.partition("=")
        if arg in UVX_FLAGS:
            options.append(arg)
        elif name in UVX_WITH_VALUE and (equals or rest):
            value = value if equals else rest.pop(0)
            if name == "--from":
                source = value
            options += [name, value]
        elif arg.startswith("-"):
            raise UnpinnableError(f"uvx option {arg!r} is not one prepare knows; write the package first")
        else:
            if source is None:
                source = arg
                options += ["--from", arg]
            return options, source
    raise UnpinnableError("uvx is given no command")


def npx_command(args: Sequence[str]) -> tuple[str | None, list[str]]:
    """What `npx ARGS` runs and with which arguments: the command named after `-p/--package` options, or
    None for the package's own bin (its first positional argument is then the package)."""
    index = _first_positional(args, NPX_PACKAGE)
    packaged = any(arg in NPX_PACKAGE or arg.startswith("--package=") for arg in args[:index])
    if packaged:
        return args[index], list(args[index + 1 :])
    return None, list(args[index + 1 :])


def uvx_command(args: Sequence[str]) -> tuple[str, list[str]]:
    """What `uvx ARGS` runs (`pkg@1.0` runs `pkg`) and with which arguments."""
    index = _first_positional(args, UVX_WITH_VALUE)
    return args[index].partition("@")[0], list(args[index + 1 :])


def _first_positional(args: Sequence[str], with_value: Sequence[str]) -> int:
    """The index of the first argument that is not an option (nor an option's value); after `--`, the one
    that follows it."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            index += 1
            break
        if arg in with_value:
            index += 2
        elif arg.startswith("-"):
            index += 1
        else:
            break
    if index >= len(args):
        raise UnpinnableError("no command is given")
    return index
