"""`prepare`: a backend installed once, with network, into its own cache folder, resolved to an exact
version, and its lock entry made from what is now on disk.

npx: `npx --yes --package=SPEC... -c true` with npm_config_cache set to the backend's cache (the same `_npx`
folder the backend's own `npx` finds later, offline); the version and npm's integrity come from the
installed package-lock, and the installed node_modules tree is what every spawn checks. Any other command
(exec): its executable's sha256 and those of the files its arguments name. uvx: not yet (see README).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from actors.config.backend_schema import StdioBackend
from actors.config.commands import CommandNotFoundError, locate_command
from actors.supply.digest import digest_of
from actors.supply.kinds import UnpinnableError, file_arguments, kind_of, npx_packages, package_name
from actors.supply.lockfile import LockEntry

INSTALL_TIMEOUT_S: Final = 600.0  # a first npx install of a large package over a slow network
STDERR_LINES: Final = 5  # of a failed install, in its error


class PrepareError(Exception):
    """The backend could not be prepared; the message says why, in one line."""


def prepare(backend: StdioBackend, cache: Path, env: Mapping[str, str]) -> LockEntry:
    """The lock entry for `backend`, installing its package into `cache` first (npx) with `env` (its own
    environment, as a spawn gives it). Blocking."""
    try:
        command = locate_command(backend)
    except CommandNotFoundError as exc:
        raise PrepareError(f"command: {exc}") from None
    argv = (backend.command, *backend.args)
    kind = kind_of(command)
    if kind == "npm":
        return _prepare_npm(backend, command, cache / "npm", env)
    if kind == "uv":
        raise PrepareError("uvx backends cannot be prepared yet; pin the package version in its args")
    files = [Path(command), *file_arguments(backend.args, backend.cwd)]
    return LockEntry(kind="exec", argv=argv, files={str(p): digest_of(p) for p in files})


def _prepare_npm(backend: StdioBackend, npx: str, cache: Path, env: Mapping[str, str]) -> LockEntry:
    try:
        specs = npx_packages(backend.args)
    except UnpinnableError as exc:
        raise PrepareError(f"args: {exc}") from None
    shutil.rmtree(cache / "_npx", ignore_errors=True)  # one install in it: the one made now
    cache.mkdir(parents=True, exist_ok=True)
    install = [npx, "--yes", *(f"--package={spec}" for spec in specs), "-c", "true"]
    try:
        done = subprocess.run(
            install,
            cwd=backend.cwd,
            env={**env, "npm_config_cache": str(cache), "npm_config_update_notifier": "false"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PrepareError(f"npx install failed: {exc}") from None
    if done.returncode != 0:
        last = " | ".join(done.stderr.strip().splitlines()[-STDERR_LINES:])
        raise PrepareError(f"npx install exited {done.returncode}: {last}")
    locks = sorted((cache / "_npx").glob("*/package-lock.json"))
    if len(locks) != 1:
        raise PrepareError(f"npx left {len(locks)} installs in {cache / '_npx'}, not one")
    installed = json.loads(locks[0].read_text(encoding="utf-8"))
    name, package = _main_package(installed, specs[0])
    tree = locks[0].parent / "node_modules"
    return LockEntry(
        kind="npm",
        argv=(backend.command, *backend.args),
        files={str(tree): digest_of(tree)},
        package=name,
        version=package.get("version"),
        integrity=package.get("integrity"),
        cache=str(cache),
    )


def _main_package(installed: dict[str, Any], spec: str) -> tuple[str, dict[str, Any]]:
    """The name and package-lock entry of the package `spec` installed (the only one, for a tarball spec)."""
    packages = installed.get("packages", {})
    dependencies = list(packages.get("", {}).get("dependencies", {}))
    wanted = package_name(spec)
    name = wanted if wanted in dependencies else (dependencies[0] if len(dependencies) == 1 else None)
    entry = packages.get(f"node_modules/{name}") if name else None
    if name is None or not isinstance(entry, dict):
        raise PrepareError(f"the installed package-lock does not name {spec!r}")
    return name, entry
