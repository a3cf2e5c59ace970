"""The lock file `prepare` writes beside the config (`gateway.toml` -> `gateway.lock.toml`) and every spawn
reads, and the per-backend cache folders beside it (`gateway.cache/NAME/`).

    # written by `mcp-gateway prepare`; checked at every spawn of a backend named here
    version = 1

    [backends.memory]
    kind = "npm"                  # npm (npx), uv (uvx) or exec (any other command)
    argv = ["npx", "-y", "@modelcontextprotocol/server-memory"]   # the command it was prepared for
    package = "@modelcontextprotocol/server-memory"
    version = "2026.1.26"
    integrity = "sha512-..."      # npm's digest of the package's tarball
    cache = "/srv/gw/gateway.cache/memory/npm"   # npm_config_cache at spawn, read-only in a sandbox
    run = ["/srv/gw/gateway.cache/memory/npm/_npx/0a1b2c3d4e5f6789/node_modules/.bin/mcp-server-memory"]

    [backends.memory.files]       # what every spawn checks: a file's sha256, a folder's tree digest
    "/srv/gw/gateway.cache/memory/npm/_npx/0a1b2c3d4e5f6789/node_modules" = "sha256:..."

Backends, and the keys within one, are written in sorted order, so a lock file changes only where a pin did.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from actors.config.errors import ConfigError, ConfigProblem

LOCK_VERSION: Final = 1
KINDS: Final = ("npm", "uv", "exec")
HEADER: Final = "# written by `mcp-gateway prepare`; checked at every spawn of a backend named here\n"


@attrs.frozen(kw_only=True)
class LockEntry:
    """One prepared backend: what it was prepared for and the digests its spawns must find."""

    kind: str
    argv: tuple[str, ...]
    files: Mapping[str, str]  # absolute path -> sha256:HEX (a folder's: its tree digest)
    package: str | None = None
    version: str | None = None
    integrity: str | None = None  # npm's sha512 of the tarball; a wheel's sha256
    cache: str | None = None  # the package manager's cache folder, pointed at offline at spawn
    run: tuple[str, ...] | None = None  # npm, uv: what a spawn runs instead of npx/uvx (the installed bin)


def lock_path(config_path: Path) -> Path:
    """`gateway.toml` -> `gateway.lock.toml`, in the same folder."""
    return config_path.with_name(f"{config_path.stem}.lock.toml")


def cache_folder(config_path: Path, backend: str) -> Path:
    """`gateway.toml`, backend `memory` -> `gateway.cache/memory/`, in the same folder."""
    return config_path.with_name(f"{config_path.stem}.cache") / backend


def read_lock(path: Path) -> dict[str, LockEntry]:
    """The entries of the lock file at `path` ({} when there is none); ConfigError `FILE: key: reason`."""
    try:
        with path.open("rb") as file:
            data = tomllib.load(file)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise _error(path, "", f"cannot be read: {exc}") from None
    if data.get("version") != LOCK_VERSION:
        raise _error(path, "version", f"must be {LOCK_VERSION} (this gateway's lock format)")
    backends = data.get("backends", {})
    if not isinstance(backends, dict):
        raise _error(path, "backends", "must be a table of backends")
    return {name: _entry(path, name, table) for name, table in backends.items()}


def _entry(path: Path, name: str, table: object) -> LockEntry:
    key = f"backends.{name}"
    if not isinstance(table, dict):
        raise _error(path, key, "must be a table")
    kind, argv, files = table.get("kind"), table.get("argv"), table.get("files", {})
    if kind not in KINDS:
        raise _error(path, f"{key}.kind", f"must be one of {', '.join(KINDS)}")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise _error(path, f"{key}.argv", "must be a non-empty list of strings")
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise _error(path, f"{key}.files", "must be a table of path = digest strings")
    optional = {k: table.get(k) for k in ("package", "version", "integrity", "cache")}
    for field, value in optional.items():
        if value is not None and not isinstance(value, str):
            raise _error(path, f"{key}.{field}", "must be a string")
    run = table.get("run")
    if run is not None and (not isinstance(run, list) or not run or not all(isinstance(a, str) for a in run)):
        raise _error(path, f"{key}.run", "must be a non-empty list of strings")
    return LockEntry(
        kind=kind, argv=tuple(argv), files=dict(files), run=tuple(run) if run else None, **optional
    )


def _error(path: Path, key: str, reason: str) -> ConfigError:
    return ConfigError([ConfigProblem(str(path), key, reason)])


def write_lock(path: Path, entries: Mapping[str, LockEntry]) -> None:
    """The lock file with `entries`, in sorted order, replaced whole (written beside it, then renamed)."""
    lines = [HEADER, f"version = {LOCK_VERSION}\n"]
    for name in sorted(entries):
        entry = entries[name]
        lines.append(f"\n[backends.{_key(name)}]\n")
        lines.append(f"kind = {_string(entry.kind)}\n")
        lines.append(f"argv = {_strings(entry.argv)}\n")
        for field in ("cache", "integrity", "package", "version"):
            value = getattr(entry, field)
            if value is not None:
                lines.append(f"{field} = {_string(value)}\n")
        if entry.run is not None:
            lines.append(f"run = {_strings(entry.run)}\n")
        lines.append(f"\n[backends.{_key(name)}.files]\n")
        lines += [f"{_string(file)} = {_string(entry.files[file])}\n" for file in sorted(entry.files)]
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text("".join(lines), encoding="utf-8")
    os.replace(temporary, path)


def _string(value: str) -> str:
    """A TOML basic string: JSON's escapes (\\uXXXX for anything outside ASCII) are TOML's too."""
    return json.dumps(value, ensure_ascii=True)


def _strings(values: Sequence[str]) -> str:
    return "[" + ", ".join(_string(v) for v in values) + "]"


def _key(name: str) -> str:
    bare = name.replace("-", "").replace("_", "").isalnum() and name.isascii()
    return name if bare else _string(name)
