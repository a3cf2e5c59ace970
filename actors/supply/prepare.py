"""`prepare`: a backend installed once, with network, into its own cache folder, resolved to an exact
version, and its lock entry made from what is now on disk.

npx: `npx --yes --package=SPEC... -c true` with npm_config_cache set to the backend's cache (the `_npx`
folder `npx SPEC` itself would use); the version and npm's integrity come from the installed package-lock,
the installed node_modules tree is what every spawn checks, and the bin npx would run (its `.bin/NAME`) is
what every spawn runs, with the backend's arguments (`run`): npx itself writes into its cache at every run.
uvx: `uvx OPTIONS python -c pass` with UV_CACHE_DIR set to the backend's cache makes the environment `uvx
OPTIONS COMMAND` would use, its bytecode compiled (so that no run writes into it); the version comes from
the installed dist-info, the integrity is the wheel's sha256 for a wheel file, else the sha256 of the wheel's
RECORD (which holds each of its files' sha256); the environment's tree is what every spawn checks and its
`bin/COMMAND` what every spawn runs. Any other command (exec): its executable's sha256 and those of the
files its arguments name.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from actors.config.backend_schema import StdioBackend
from actors.config.commands import CommandNotFoundError, locate_command
from actors.supply.digest import digest_of, file_sha256
from actors.supply.kinds import (
    UnpinnableError,
    file_arguments,
    kind_of,
    npx_command,
    npx_packages,
    package_name,
    uvx_command,
    uvx_install,
)
from actors.supply.lockfile import LockEntry

INSTALL_TIMEOUT_S: Final = 600.0  # a first npx install of a large package over a slow network
STDERR_LINES: Final = 5  # of a failed install, in its error
PYTHON_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a requirement's project name, at its start


class PrepareError(Exception):
    """The backend could not be prepared: `key` is the backend's key that explains it (`command`, `args`),
    the message says why in one line."""

    def __init__(self, message: str, key: str = "command") -> None:
        super().__init__(message)
        self.key = key


def prepare(backend: StdioBackend, cache: Path, env: Mapping[str, str]) -> LockEntry:
    """The lock entry for `backend`, installing its package into `cache` first (npx) with `env` (its own
    environment, as a spawn gives it). Blocking."""
    try:
        command = locate_command(backend)
    except CommandNotFoundError as exc:
        raise PrepareError(str(exc)) from None
    argv = (backend.command, *backend.args)
    kind = kind_of(command)
    if kind == "npm":
        return _prepare_npm(backend, command, cache / "npm", env)
    if kind == "uv":
        return _prepare_uv(backend, command, cache / "uv", env)
    files = [Path(command), *file_arguments(backend.args, backend.cwd)]
    return LockEntry(kind="exec", argv=argv, files={str(p): digest_of(p) for p in files})


def _prepare_npm(backend: StdioBackend, npx: str, cache: Path, env: Mapping[str, str]) -> LockEntry:
    try:
        specs = npx_packages(backend.args)
        command, rest = npx_command(backend.args)
    except UnpinnableError as exc:
        raise PrepareError(str(exc), key="args") from None
    install = [npx, "--yes", *(f"--package={spec}" for spec in specs), "-c", "true"]
    with fresh(cache / "_npx"):  # one install in it: the one made now
        _install(
            "npx",
            install,
            backend.cwd,
            {**env, "npm_config_cache": str(cache), "npm_config_update_notifier": "false"},
        )
        locks = sorted((cache / "_npx").glob("*/package-lock.json"))
        if len(locks) != 1:
            raise PrepareError(f"npx left {len(locks)} installs in {cache / '_npx'}, not one")
        installed = json.loads(locks[0].read_text(encoding="utf-8"))
        name, package = _main_package(installed, specs[0])
    tree = locks[0].parent / "node_modules"
    run = _runnable(tree / ".bin" / (command or _bin_of(tree / name / "package.json", name)), rest)
    return LockEntry(
        kind="npm",
        argv=(backend.command, *backend.args),
        files={str(tree): digest_of(tree)},
        package=name,
        version=package.get("version"),
        integrity=package.get("integrity"),
        cache=str(cache),
        run=run,
    )


def _bin_of(manifest: Path, name: str) -> str:
    """The bin npx runs for package `name` (npm's rule): its only bin, else the one named as the package."""
    declared = json.loads(manifest.read_text(encoding="utf-8")).get("bin")
    unscoped = name.rpartition("/")[2]
    if isinstance(declared, str):
        return unscoped
    if isinstance(declared, dict) and len(declared) == 1:
        return str(next(iter(declared)))
    if isinstance(declared, dict) and unscoped in declared:
        return unscoped
    raise PrepareError(f"{name} names no bin npx would run; give it as `-p {name} BIN`", key="args")


def _runnable(program: Path, args: list[str]) -> tuple[str, ...]:
    """What a spawn runs in place of npx/uvx: the installed program itself, with the backend's arguments."""
    if not program.exists():
        raise PrepareError(f"the install has no {program.name} (looked for {program})", key="args")
    return (str(program), *args)


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


@contextlib.contextmanager
def fresh(folder: Path) -> Iterator[None]:
    """`folder` emptied for an install, and put back as it was when the install fails: a prepare that
    fails leaves the backend as its last prepare made it (its pins still match)."""
    previous = folder.with_name(f"{folder.name}.previous")
    shutil.rmtree(previous, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    if folder.exists():
        folder.rename(previous)
    try:
        yield
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        if previous.exists():
            previous.rename(folder)
        raise
    shutil.rmtree(previous, ignore_errors=True)


def _install(tool: str, argv: list[str], cwd: Path, env: Mapping[str, str]) -> None:
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PrepareError(f"{tool} install failed: {exc}") from None
    if done.returncode != 0:
        last = " | ".join(done.stderr.strip().splitlines()[-STDERR_LINES:])
        raise PrepareError(f"{tool} install exited {done.returncode}: {last}")


def _prepare_uv(backend: StdioBackend, uvx: str, cache: Path, env: Mapping[str, str]) -> LockEntry:
    """`uvx OPTIONS python -c pass` makes the environment `uvx OPTIONS COMMAND` finds later (uv keys it by
    its requirements, not the command), its bytecode compiled now so that no run writes any."""
    try:
        options, source = uvx_install(backend.args)
        command, rest = uvx_command(backend.args)
    except UnpinnableError as exc:
        raise PrepareError(str(exc), key="args") from None
    made = {**env, "UV_CACHE_DIR": str(cache), "UV_COMPILE_BYTECODE": "1"}
    with fresh(cache / "environments-v2"):  # one environment in it: the one made now
        _install("uvx", [uvx, *options, "python", "-c", "pass"], backend.cwd, made)
        made_now = sorted((cache / "environments-v2").glob("*/*"))
        environments = [path for path in made_now if not path.name.endswith(".lock")]
        if len(environments) != 1:
            where = cache / "environments-v2"
            raise PrepareError(f"uvx left {len(environments)} environments in {where}, not one")
        venv = environments[0].resolve()
        name, version, record = _distribution(venv, source)
    wheel = backend.cwd / source
    integrity = file_sha256(wheel) if source.endswith(".whl") and wheel.is_file() else record
    return LockEntry(
        kind="uv",
        argv=(backend.command, *backend.args),
        files={str(venv): digest_of(venv)},
        package=name,
        version=version,
        integrity=integrity,
        cache=str(cache),
        run=_runnable(venv / "bin" / command, rest),
    )


def _distribution(venv: Path, source: str) -> tuple[str, str, str]:
    """The installed project `source` names: its name, version and its RECORD's sha256 (every file of the
    wheel, each with its own sha256)."""
    wanted = _project(source)
    for record in sorted(venv.glob("lib*/python*/site-packages/*.dist-info/RECORD")):
        name, _, version = record.parent.name.removesuffix(".dist-info").partition("-")
        if _normal(name) == wanted:
            return name, version, file_sha256(record)
    raise PrepareError(f"the environment uvx made has no {source!r} installed")


def _project(source: str) -> str:
    """The project a requirement (`mcp-server-fetch==1.2`, `pkg@1.0`) or a wheel file names, normalized."""
    text = Path(source).name.split("-")[0] if source.endswith(".whl") else source
    match = PYTHON_NAME.match(text)
    return _normal(match.group(0) if match else text)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503
