"""What a config names outside itself, looked up: paths against the config file's folder, secrets from
environment variables, key files, middleware modules, and the program a stdio backend runs.

Every function here reads the environment, the filesystem or imports; the schema and the loader do not.
Problems are appended to `problems` as (key, reason), the key as written in the file.
"""

from __future__ import annotations

import errno
import importlib
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from actors.config.admin_schema import NEEDS_TOKEN, AdminSettings, AdminTable
from actors.config.backend_auth import resolve_remote
from actors.config.backend_schema import BackendConfig, StdioBackend
from actors.config.commands import CommandNotFoundError, locate_command, python_entry_problem, shown_path
from actors.config.errors import Problem
from actors.config.listener_schema import AuthTable, JwtAuth
from actors.config.oauth_schema import OAuthSettings
from actors.config.schema import AuditSettings, MiddlewareSpec, MiddlewareTable
from actors.config.secret import HEADER, VARIABLE, Carrier, Secret, SecretSource, resolve_secret


def resolve_backend(backend: BackendConfig, key: str, folder: Path, problems: list[Problem]) -> BackendConfig:
    """Its secrets read (`headers_env` becomes secrets in `headers`); a stdio backend's cwd made absolute
    (and checked)."""
    headers = {
        **backend.headers,
        **{header: Secret(SecretSource.ENV, variable) for header, variable in backend.headers_env.items()},
    }
    headers = {
        header: _resolved(value, f"{key}.{_where(backend, header)}.{header}", folder, problems, HEADER)
        for header, value in headers.items()
    }
    if not isinstance(backend, StdioBackend):
        return resolve_remote(attrs.evolve(backend, headers=headers), key, folder, problems)
    env = {
        name: _resolved(value, f"{key}.env.{name}", folder, problems, VARIABLE)
        for name, value in backend.env.items()
    }
    cwd = (folder / backend.cwd.expanduser()).resolve()
    if not cwd.is_dir():
        what = "is not a directory" if cwd.exists() else "does not exist"
        problems.append((f"{key}.cwd", f"{shown_path(backend.cwd, cwd)} {what}"))
    return attrs.evolve(backend, cwd=cwd, headers=headers, env=env)


def _where(backend: BackendConfig, header: str) -> str:
    return "headers_env" if header in backend.headers_env else "headers"


def _resolved(
    value: str | Secret, key: str, folder: Path, problems: list[Problem], carrier: Carrier
) -> str | Secret:
    """A plain value as it is; a secret read (refused when `carrier` cannot hold its value)."""
    return resolve_secret(value, key, folder, problems, carrier) if isinstance(value, Secret) else value


def resolve_command(backend: BackendConfig) -> str | None:
    """The program to run for `backend`, or None when it cannot be found (or it is not a stdio backend);
    commands.locate_command says why."""
    if not isinstance(backend, StdioBackend):
        return None
    try:
        return locate_command(backend)
    except CommandNotFoundError:
        return None


def command_problem(backend: BackendConfig, key: str) -> Problem | None:
    """`check`'s look before a start: what a start of this stdio backend would fail on, as (key, reason):
    its program, and for a Python interpreter the script or `-m` module it is told to run."""
    if not isinstance(backend, StdioBackend):
        return None
    try:
        program = locate_command(backend)
    except CommandNotFoundError as exc:
        return f"{key}.command", str(exc)
    entry = python_entry_problem(backend, program)
    return None if entry is None else (f"{key}.args[{entry[0]}]", entry[1])


def host_problem(host: str) -> str | None:
    """Why a listener could not listen on `host` here, or None: the name resolved as a listener resolves it
    and each address bound on a free port, so a gateway already serving the real port is no problem."""
    try:
        addresses = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, ValueError) as exc:  # ValueError: a NUL, a label too long for IDNA
        return f"{host!r} does not resolve: {getattr(exc, 'strerror', None) or exc}"
    for family, kind, protocol, _, address in addresses:
        try:
            probe = socket.socket(family, kind, protocol)
        except OSError as exc:
            if exc.errno == errno.EAFNOSUPPORT:  # an IPv6 address on an IPv4-only host: skipped, as trio does
                continue
            return f"cannot listen on {host!r} here: {exc.strerror or exc}"
        try:
            with probe:
                if family == socket.AF_INET6:
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                probe.bind(address)
        except OSError as exc:
            return f"cannot listen on {host!r} here: {exc.strerror or exc}"
    return None


def resolve_auth(table: AuthTable, key: str, folder: Path, problems: list[Problem]) -> JwtAuth | None:
    """[NAME.auth] loaded: the HS256 secret from its variable, or the RS256/ES256 public key from its file."""
    if table.jwt_secret_env is not None and table.jwt_public_key_file is not None:
        problems.append((key, "set at most one of jwt_secret_env and jwt_public_key_file"))
        return None
    if table.jwt_secret_env is None and table.jwt_public_key_file is None:
        if not table.issuers:
            problems.append((key, "set jwt_secret_env, jwt_public_key_file or [[" + key + ".issuers]]"))
        return None
    if table.jwt_secret_env is not None:
        secret = os.environ.get(table.jwt_secret_env)
        if not secret:
            reason = f"environment variable {table.jwt_secret_env} is not set or empty"
            problems.append((f"{key}.jwt_secret_env", reason))
            return None
        return JwtAuth(
            key=secret,
            algorithms=("HS256",),
            audience=table.audience,
            issuer=table.issuer,
            secret_env=table.jwt_secret_env,
        )
    assert table.jwt_public_key_file is not None
    key_file = (folder / table.jwt_public_key_file.expanduser()).resolve()
    shown = shown_path(table.jwt_public_key_file, key_file)
    try:
        pem = key_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        problems.append((f"{key}.jwt_public_key_file", f"cannot read {shown}: {reason}"))
        return None
    if "PUBLIC KEY" not in pem:
        problems.append((f"{key}.jwt_public_key_file", f"{shown} is not a PEM public key"))
        return None
    return JwtAuth(key=pem, algorithms=("RS256", "ES256"), audience=table.audience, issuer=table.issuer)


def resolve_oauth(table: AuthTable, key: str, folder: Path, problems: list[Problem]) -> OAuthSettings | None:
    """[NAME.auth]'s trusted issuers, their JWKS files made absolute and checked; None when it names none."""
    if not table.issuers:
        return None
    issuers, seen = [], set()
    for index, issuer in enumerate(table.issuers):
        where = f"{key}.issuers[{index}]"
        if issuer.issuer in seen:
            problems.append((f"{where}.issuer", f"{issuer.issuer} is listed twice"))
        seen.add(issuer.issuer)
        if issuer.jwks_url is not None and issuer.jwks_file is not None:
            problems.append((where, "set at most one of jwks_url and jwks_file (neither: discovery)"))
        if issuer.jwks_file is not None:
            path = (folder / issuer.jwks_file.expanduser()).resolve()
            if not path.is_file():
                problems.append((f"{where}.jwks_file", f"{shown_path(issuer.jwks_file, path)} is not a file"))
            issuer = attrs.evolve(issuer, jwks_file=path)
        issuers.append(issuer)
    return OAuthSettings(
        issuers=tuple(issuers),
        resource=table.resource,
        scopes_supported=table.scopes_supported,
        required_scopes=table.required_scopes,
        tool_scopes={tool: frozenset(scopes) for tool, scopes in table.tool_scopes.items()},
        insufficient_scope=table.insufficient_scope,
    )


def resolve_audit(audit: AuditSettings, folder: Path, problems: list[Problem]) -> AuditSettings:
    """The audit file's path made absolute; it must not be a folder. With postgres_url_env, the URL read."""
    if audit.postgres_url is not None:
        problems.append(
            ("audit.postgres_url", "not read from the file: name its variable with postgres_url_env")
        )
    if audit.postgres_url_env is not None:
        url = os.environ.get(audit.postgres_url_env, "")
        if not url.startswith(("postgresql://", "postgres://")):
            what = "is not set" if not url else "does not hold a postgresql:// URL"
            problems.append(
                ("audit.postgres_url_env", f"environment variable {audit.postgres_url_env} {what}")
            )
        return attrs.evolve(audit, postgres_url=url)
    path = (folder / audit.path.expanduser()).resolve()
    if path.is_dir():
        problems.append(("audit.path", f"{shown_path(audit.path, path)} is a directory; name a file"))
    return attrs.evolve(audit, path=path)


def resolve_middleware(
    table: MiddlewareTable, key: str, folder: Path, problems: list[Problem]
) -> MiddlewareSpec | None:
    factory = resolve_dotted(table.use, folder)
    if isinstance(factory, str):
        problems.append((f"{key}.use", factory))
        return None
    return MiddlewareSpec(use=table.use, options=dict(table.options), factory=factory)


def resolve_dotted(path: str, folder: Path) -> Callable[..., Any] | str:
    """The callable that `package.module.Name` (or `package.module:Name`) names, or why there is none.
    Modules are imported with the config file's folder on sys.path, so a middleware may sit beside it."""
    module_name, colon, attribute = path.partition(":")
    if not colon:
        module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        return f"{path!r} is not a dotted path like 'package.module.Name'"
    if str(folder) not in sys.path:
        sys.path.append(str(folder))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any error while importing the operator's module is this key's problem
        return f"cannot import {module_name!r}: {type(exc).__name__}: {exc}"
    target = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            return f"module {module_name!r} has no {attribute!r}"
        target = getattr(target, part)
    if not callable(target):
        return f"{path!r} is not a class or function"
    return target  # type: ignore[no-any-return]


def resolve_admin(table: AdminTable, problems: list[Problem]) -> AdminSettings | None:
    """[admin] loaded: its token read from `token_env`, which a host off loopback must name."""
    if table.token_env is None:
        if not table.loopback:
            problems.append(("admin.token_env", NEEDS_TOKEN))
            return None
        return AdminSettings(host=table.host, port=table.port)
    # As the listener reads a client's token: without the spaces or line break around it (a secret mounted
    # into the environment often ends with one, and would otherwise lock everyone out)
    token = os.environ.get(table.token_env, "").strip()
    if not token:
        problems.append(("admin.token_env", f"environment variable {table.token_env} is not set or empty"))
        return None
    return AdminSettings(host=table.host, port=table.port, token_env=table.token_env, token=token)
