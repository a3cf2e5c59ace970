"""`mcp-gateway prepare [--config F] (BACKEND... | --all)`: each stdio backend prepared (actors/supply/): an
`npx` or `uvx` package installed once, with network, into `F.cache/NAME/` and pinned to its exact version
and digest; any other command pinned by its executable's sha256 (and its file arguments'). The pins go to
`F.lock.toml`; every spawn checks them. Exit 0 when every backend named was prepared; 1 when one could not
be (its reason on stderr, the others' pins still written); 2 when the config or the lock cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Final

from actors.backends.process import backend_environment
from actors.config.backend_schema import StdioBackend
from actors.config.errors import ConfigError, ConfigProblem
from actors.config.load import load_config
from actors.config.schema import Config
from actors.config.secret import revealed
from actors.runtime.log import escape_controls
from actors.supply import LockEntry, PrepareError, cache_folder, lock_path, prepare, read_lock, write_lock

EXIT_FAILED: Final = 1
EXIT_CONFIG_ERROR: Final = 2


def add_parser(commands: Any, default_config: str) -> None:
    command = commands.add_parser(
        "prepare",
        help="install npx/uvx backends once; pin each stdio backend's package or executable in the lock file",
    )
    command.add_argument(
        "--config", default=default_config, help=f"TOML config file (default {default_config})"
    )
    which = command.add_mutually_exclusive_group(required=True)
    which.add_argument("backends", nargs="*", default=[], metavar="BACKEND", help="a stdio backend's name")
    which.add_argument("--all", action="store_true", help="every stdio backend (and drop stale lock entries)")


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
        lock = lock_path(config.path)
        entries = read_lock(lock)
        chosen = _chosen(config, args.backends, args.all)
    except ConfigError as exc:
        for problem in exc.problems:
            _say(str(problem))
        return EXIT_CONFIG_ERROR
    if args.all:
        entries = {name: entry for name, entry in entries.items() if name in {b.name for _, b in chosen}}
    failed = 0
    for index, backend in chosen:
        env = backend_environment(revealed(backend.env), backend.inherit_env, config.secret_variables())
        try:
            entry = prepare(backend, cache_folder(config.path, backend.name), env)
        except PrepareError as exc:
            _say(f"{config.path}: backends[{index}].{exc.key}: {exc}")
            failed += 1
            continue
        entries[backend.name] = entry
        print(escape_controls(f"prepared {backend.name}: {_summary(entry)}"))
    write_lock(lock, entries)
    print(f"{lock}: {len(entries)} pinned")
    return EXIT_FAILED if failed else 0


def _chosen(config: Config, names: list[str], every: bool) -> list[tuple[int, StdioBackend]]:
    """(index in the config, backend) of the stdio backends named, or of all with --all."""
    stdio = {b.name: (i, b) for i, b in enumerate(config.backends) if isinstance(b, StdioBackend)}
    if every:
        return list(stdio.values())
    problems = [
        ConfigProblem(str(config.path), "backends", f"no stdio backend is named {name!r}")
        for name in names
        if name not in stdio
    ]
    if problems:
        raise ConfigError(problems)
    return [stdio[name] for name in dict.fromkeys(names)]


def _summary(entry: LockEntry) -> str:
    if entry.kind == "exec":
        return ", ".join(f"{Path(path).name} {digest}" for path, digest in sorted(entry.files.items()))
    return f"{entry.kind} {entry.package} {entry.version} {entry.integrity}"


def _say(line: str) -> None:
    print(escape_controls(f"mcp-gateway prepare: {line}"), file=sys.stderr)
