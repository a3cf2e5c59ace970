"""At every spawn of a backend the lock file names: its recorded digests checked against what is on disk, and
what a prepared backend needs to run offline (its package manager pointed at its cache; the paths a sandbox
binds read-only)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs
from loguru import logger

from actors.config.diff import ConfigDiff
from actors.config.errors import ConfigError
from actors.config.schema import Config
from actors.supply.digest import digest_of
from actors.supply.lockfile import LockEntry, lock_path, read_lock

# What points each package manager at a prepared cache with no network.
OFFLINE_ENV: Final[Mapping[str, Mapping[str, str]]] = {
    # no log files: a sandbox binds the cache read-only
    "npm": {"npm_config_offline": "true", "npm_config_update_notifier": "false", "npm_config_logs_max": "0"},
    "uv": {"UV_OFFLINE": "1"},
}
CACHE_VARIABLE: Final = {"npm": "npm_config_cache", "uv": "UV_CACHE_DIR"}


class PinMismatchError(Exception):
    """The backend's files are not those its lock entry records (or the lock cannot be read); the message
    names the path, the expected and the found digest, and what to do."""


@attrs.frozen
class Prepared:
    """What a prepared backend's spawn adds: environment over its own, paths a sandbox binds read-only."""

    env: Mapping[str, str] = attrs.field(factory=dict)
    read_only: tuple[str, ...] = ()
    argv: tuple[str, ...] | None = None  # npx/uvx: the installed bin, run directly (None: as configured)


UNPREPARED: Final = Prepared()


def offline_env(entry: LockEntry) -> dict[str, str]:
    """npm_config_cache + npm_config_offline=true for npm; UV_CACHE_DIR + UV_OFFLINE=1 for uv; {} for exec."""
    if entry.cache is None or entry.kind not in CACHE_VARIABLE:
        return {}
    return {CACHE_VARIABLE[entry.kind]: entry.cache, **OFFLINE_ENV[entry.kind]}


def cache_paths(entry: LockEntry) -> tuple[str, ...]:
    """The folders a prepared backend reads at run time and never writes: its cache."""
    return (entry.cache,) if entry.cache is not None else ()


def drift(entry: LockEntry, argv: Sequence[str]) -> str | None:
    """Why `argv` (the command and args as configured) may not run under `entry`; None when every recorded
    digest is found again."""
    if tuple(argv) != entry.argv:
        return f"the lock was prepared for {list(entry.argv)}, the config now runs {list(argv)}"
    for path, expected in sorted(entry.files.items()):
        found = digest_of(Path(path))
        if found != expected:
            return f"{path}: expected {expected}, found {found}"
    return None


def pinned(lock: Path, name: str, argv: Sequence[str]) -> Prepared:
    """The check at a spawn of backend `name` (blocking: run it in a worker thread). UNPREPARED when the lock
    does not name it; PinMismatchError when it drifted or the lock cannot be read."""
    try:
        entries = read_lock(lock)
    except ConfigError as exc:
        raise PinMismatchError(f"{exc}; a backend is not started unchecked") from None
    entry = entries.get(name)
    if entry is None:
        return UNPREPARED
    why = drift(entry, argv)
    if why is not None:
        raise PinMismatchError(
            f"{why} (lock {lock}); if the change is yours, run `mcp-gateway prepare {name}`"
        )
    return Prepared(env=offline_env(entry), read_only=cache_paths(entry), argv=entry.run)


def pins_of(config: Config) -> dict[str, LockEntry]:
    """The lock entries beside `config` as a reload compares them; {} when the lock cannot be read (each
    spawn then refuses its backend, saying why)."""
    try:
        return read_lock(lock_path(config.path))
    except ConfigError as exc:
        logger.warning("{}", exc)
        return {}


def repinned(change: ConfigDiff, old: Mapping[str, LockEntry], new: Mapping[str, LockEntry]) -> ConfigDiff:
    """A reload restarts the backends whose lock entries changed (`prepare` ran again: a backend left
    pin_mismatch starts, a running one moves to what was prepared), besides those whose config changed."""
    moved = tuple(name for name in change.unchanged if old.get(name) != new.get(name))
    if not moved:
        return change
    unchanged = tuple(name for name in change.unchanged if name not in moved)
    return attrs.evolve(change, changed=(*change.changed, *moved), unchanged=unchanged)
