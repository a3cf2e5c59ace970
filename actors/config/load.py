"""Loading a config file: read the TOML, structure each table (converter.py), look up what it names outside
itself (resolve.py), and report every problem, not just the first, as `FILE: key: reason` with keys written
the way they appear in the file (`backends[1].restart.policy`).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, TypeVar

import attrs
from cattrs.errors import AttributeValidationNote, ForbiddenExtraKeysError, IterableValidationNote

from actors.config.admin_schema import AdminTable
from actors.config.backend_schema import (
    NAME_PATTERN,
    STDIO_ONLY_KEYS,
    BackendConfig,
    RemoteBackend,
    StdioBackend,
)
from actors.config.converter import STRUCTURE_ERRORS, kind_of, make_converter
from actors.config.errors import ConfigError, ConfigProblem, Problem
from actors.config.files import NotReadableError, read_regular_file
from actors.config.fleet_schema import FleetTable
from actors.config.listener_schema import AuthTable, HttpSettings, ListenerSettings, WebSocketSettings
from actors.config.oauth_schema import StdioPrincipal
from actors.config.policy_schema import PolicyTable
from actors.config.resolve import (
    command_problem,
    host_problem,
    resolve_admin,
    resolve_audit,
    resolve_auth,
    resolve_backend,
    resolve_middleware,
    resolve_oauth,
)
from actors.config.resolve_fleet import resolve_fleet
from actors.config.route_schema import RouteConfig, route_problems
from actors.config.sandbox_schema import SandboxTable
from actors.config.schema import AuditSettings, Config, GatewaySettings, MiddlewareSpec, MiddlewareTable
from actors.config.tracing_schema import TracingSettings
from actors.config.trust_schema import TrustSettings, resolve_trust
from actors.discovery import DiscoverySettings
from actors.limits import LimitSettings
from actors.policy.rules import MAX_RULES, Policy

_T = TypeVar("_T")
_Listener = TypeVar("_Listener", bound=ListenerSettings)
TOP_LEVEL: Final = {
    "gateway": "[gateway]",
    "backends": "[[backends]]",
    "websocket": "[websocket]",
    "http": "[http]",
    "audit": "[audit]",
    "middleware": "[[middleware]]",
    "admin": "[admin]",
    "policy": "[policy]",
    "limits": "[limits]",
    "stdio": "[stdio]",
    "fleet": "[fleet]",
    "tracing": "[tracing]",
    "discovery": "[discovery]",
    "trust": "[trust]",
    "sandbox": "[sandbox]",
    "routes": "[[routes]]",
}
_converter: Final = make_converter()
MAX_CONFIG_BYTES: Final = 1 << 20  # a config naming a thousand backends is a few hundred KB


def load_config(path: str | os.PathLike[str], *, check_start: bool = False) -> Config:
    """Read, structure and check a config file; raise ConfigError naming every problem. With
    `check_start` (`mcp-gateway check`), what a start would trip on is reported with the rest: a stdio
    backend's program (a start fails that backend alone) and a listener's host this machine cannot listen
    on (a start exits 2)."""
    document = _read(path)
    problems: list[Problem] = []
    config = _structure(document, Path(path).resolve(), problems, check_start)
    if problems or config is None:
        raise ConfigError([ConfigProblem(str(path), key, reason) for key, reason in problems])
    return config


def load_auth_tables(path: str | os.PathLike[str]) -> dict[str, AuthTable]:
    """The listeners' [NAME.auth] tables as written, by listener name, nothing read from the environment:
    what `mcp-gateway token` needs, without the rest of the file having to load on the machine it runs on."""
    document = _read(path)
    problems: list[Problem] = []
    tables = {}
    for name in ("websocket", "http"):
        listener = document.get(name)
        if isinstance(listener, dict) and "auth" in listener:
            table = _convert(listener["auth"], AuthTable, f"{name}.auth", problems)
            if table is not None:
                tables[name] = table
    if problems:
        raise ConfigError([ConfigProblem(str(path), key, reason) for key, reason in problems])
    return tables


def _read(path: str | os.PathLike[str]) -> dict[str, Any]:
    shown = str(path)
    try:
        return tomllib.loads(
            read_regular_file(Path(path), MAX_CONFIG_BYTES, what="a TOML file").decode("utf-8")
        )
    except FileNotFoundError:
        reason = "no such file"
        if not Path(path).is_absolute():  # the default, or a path meant for another folder
            reason += f" (looked for {Path(path).absolute()}; pass --config with the gateway's config file)"
        raise ConfigError([ConfigProblem(shown, "", reason)]) from None
    except IsADirectoryError:
        raise ConfigError([ConfigProblem(shown, "", "is a directory, not a TOML file")]) from None
    except NotReadableError as exc:
        raise ConfigError([ConfigProblem(shown, "", str(exc))]) from None
    except OSError as exc:
        raise ConfigError([ConfigProblem(shown, "", f"cannot read: {exc.strerror or exc}")]) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigProblem(shown, "", f"not valid TOML: {exc}")]) from None


def _structure(
    document: dict[str, Any], file: Path, problems: list[Problem], check_start: bool
) -> Config | None:
    folder = file.parent
    for key in document:
        if key not in TOP_LEVEL:
            problems.append((key, f"unknown key; the top level has {', '.join(TOP_LEVEL.values())}"))
    gateway = GatewaySettings()
    if "gateway" in document:
        gateway = _convert(document["gateway"], GatewaySettings, "gateway", problems) or gateway
    backends = _backends(document.get("backends"), folder, problems, check_start)
    websocket = _listener(document, "websocket", WebSocketSettings, folder, problems)
    http = _listener(document, "http", HttpSettings, folder, problems)
    audit = None
    if "audit" in document:
        audit = _convert(document["audit"], AuditSettings, "audit", problems)
        audit = audit and resolve_audit(audit, folder, problems)
    middleware = _middleware(document.get("middleware"), folder, problems)
    admin, admin_table = None, None
    if "admin" in document:
        admin_table = _convert(document["admin"], AdminTable, "admin", problems)
        admin = admin_table and resolve_admin(admin_table, problems)
    policy = _policy(document["policy"], problems) if "policy" in document else None
    limits = _convert(document["limits"], LimitSettings, "limits", problems) if "limits" in document else None
    stdio = _convert(document["stdio"], StdioPrincipal, "stdio", problems) if "stdio" in document else None
    fleet = None
    if "fleet" in document:
        fleet_table = _convert(document["fleet"], FleetTable, "fleet", problems)
        fleet = fleet_table and resolve_fleet(fleet_table, folder, problems)
    tracing = None
    if "tracing" in document:
        tracing = _convert(document["tracing"], TracingSettings, "tracing", problems)
    discovery = None
    if "discovery" in document:
        discovery = _convert(document["discovery"], DiscoverySettings, "discovery", problems)
    trust = TrustSettings()
    if "trust" in document:
        trust = _convert(document["trust"], TrustSettings, "trust", problems) or trust
    trust = resolve_trust(
        trust, folder, audit.path if audit is not None and audit.postgres_url is None else None
    )
    if trust.path is not None and trust.path.is_dir():
        problems.append(("trust.path", f"{trust.path} is a directory; name a file"))
    sandbox = SandboxTable()
    if "sandbox" in document:
        sandbox = _convert(document["sandbox"], SandboxTable, "sandbox", problems) or sandbox
    routes: tuple[RouteConfig, ...] = ()
    if "routes" in document and _route_rules_bounded(document["routes"], problems):
        routes = _convert(document["routes"], tuple[RouteConfig, ...], "routes", problems) or ()
        listener_paths = [table.path for table in (websocket, http) if table is not None]
        problems += route_problems(routes, listener_paths)
    if check_start:
        for name, table in (("websocket", websocket), ("http", http), ("admin", admin_table)):
            reason = table and host_problem(table.host)
            if reason:
                problems.append((f"{name}.host", reason))
    if problems:
        return None
    return Config(
        path=file,
        gateway=gateway,
        backends=backends,
        websocket=websocket,
        http=http,
        audit=audit,
        middleware=middleware,
        admin=admin,
        policy=policy,
        limits=limits,
        stdio=stdio,
        fleet=fleet,
        tracing=tracing,
        trust=trust,
        discovery=discovery,
        sandbox=sandbox,
        routes=routes,
    )


def _backends(
    raw: Any, folder: Path, problems: list[Problem], check_start: bool
) -> tuple[BackendConfig, ...]:
    if raw is None:
        problems.append(("backends", "missing: add at least one [[backends]] table"))
        return ()
    if isinstance(raw, list) and not raw:
        problems.append(("backends", "empty: add at least one [[backends]] table"))
    backends = []
    for index, entry in enumerate(_array_of_tables(raw, "backends", problems)):
        key = f"backends[{index}]"
        table, kind = _backend_kind(entry, key, problems)
        backend = _convert(table, kind, key, problems)
        if backend is not None:
            backends.append(resolve_backend(backend, key, folder, problems))
            missing = check_start and command_problem(backends[-1], key)
            if missing:
                problems.append(missing)
    problems.extend(_duplicate_names(raw if isinstance(raw, list) else []))
    return tuple(backends)


def _backend_kind(entry: Any, key: str, problems: list[Problem]) -> tuple[Any, type[BackendConfig]]:
    """A table with `url` is a remote backend, and any key only a command backend has is a mistake in it;
    a table without is a command backend (whose `command` is then required)."""
    if not isinstance(entry, dict) or "url" not in entry:
        return entry, StdioBackend
    misplaced = [name for name in STDIO_ONLY_KEYS if name in entry]
    for name in misplaced:
        if name == "command":
            reason = "set either command (a stdio backend) or url (a remote backend), not both"
            problems.append((f"{key}.url", reason))
        else:
            problems.append((f"{key}.{name}", "applies to command backends only"))
    return {name: value for name, value in entry.items() if name not in misplaced}, RemoteBackend


def _duplicate_names(raw: list[Any]) -> Iterator[Problem]:
    """Names are unique in a file. A name of the wrong shape was reported with its backend."""
    first_seen: dict[str, int] = {}
    for index, entry in enumerate(raw):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            continue
        if name in first_seen:
            yield f"backends[{index}].name", f"duplicate name {name!r} (also backends[{first_seen[name]}])"
        else:
            first_seen[name] = index


def _listener(
    document: dict[str, Any], name: str, cls: type[_Listener], folder: Path, problems: list[Problem]
) -> _Listener | None:
    """[websocket] or [http] as settings, or None when the table is absent or wrong. Its [NAME.auth] is
    structured as an AuthTable and loaded by resolve_auth."""
    if name not in document:
        return None
    raw = document[name]
    written = {key: value for key, value in raw.items() if key != "auth"} if isinstance(raw, dict) else raw
    settings = _convert(written, cls, name, problems)
    auth, oauth = None, None
    if isinstance(raw, dict) and "auth" in raw:
        table = _convert(raw["auth"], AuthTable, f"{name}.auth", problems)
        auth = table and resolve_auth(table, f"{name}.auth", folder, problems)
        oauth = table and resolve_oauth(table, f"{name}.auth", folder, problems)
    return None if settings is None else attrs.evolve(settings, auth=auth, oauth=oauth)


def _middleware(raw: Any, folder: Path, problems: list[Problem]) -> tuple[MiddlewareSpec, ...]:
    specs = []
    for index, entry in enumerate(_array_of_tables(raw, "middleware", problems)):
        key = f"middleware[{index}]"
        table = _convert(entry, MiddlewareTable, key, problems)
        spec = table and resolve_middleware(table, key, folder, problems)
        if spec is not None:
            specs.append(spec)
    return tuple(specs)


def _policy(raw: Any, problems: list[Problem]) -> Policy | None:
    """[policy] with its rules compiled; a rule that does not compile is reported under its `when`."""
    rules = raw.get("rules") if isinstance(raw, dict) else None
    if rules is not None and (not isinstance(rules, list) or len(rules) > MAX_RULES):
        problems.append(("policy.rules", f"expected at most {MAX_RULES} [[policy.rules]] tables"))
        return None
    table = _convert(raw, PolicyTable, "policy", problems)
    return table.compiled() if table is not None else None


def _route_rules_bounded(raw: Any, problems: list[Problem]) -> bool:
    """Each route's [[routes.policy.rules]] counted before any is compiled."""
    for index, route in enumerate(raw if isinstance(raw, list) else ()):
        table = route.get("policy") if isinstance(route, dict) else None
        rules = table.get("rules") if isinstance(table, dict) else None
        if rules is not None and (not isinstance(rules, list) or len(rules) > MAX_RULES):
            reason = f"expected at most {MAX_RULES} [[routes.policy.rules]] tables"
            problems.append((f"routes[{index}].policy.rules", reason))
            return False
    return True


def _array_of_tables(raw: Any, name: str, problems: list[Problem]) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append((name, f"expected an array of tables ([[{name}]]), got {kind_of(raw)}"))
        return []
    return raw


def _convert(raw: Any, cls: type[_T], key: str, problems: list[Problem]) -> _T | None:
    try:
        return _converter.structure(raw, cls)
    except STRUCTURE_ERRORS as exc:
        problems.extend(_explain(exc, key))
        return None


def _explain(exc: BaseException, key: str) -> Iterator[Problem]:
    """cattrs' errors as (key, reason): each inner error's notes say which key or item it is about."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            where = key
            for note in getattr(inner, "__notes__", ()):
                if isinstance(note, AttributeValidationNote):
                    where = f"{key}.{note.name}"
                elif isinstance(note, IterableValidationNote):
                    where = f"{key}[{note.index}]"
            yield from _explain(inner, where)
    elif isinstance(exc, ForbiddenExtraKeysError):
        known = ", ".join(field.name for field in attrs.fields(exc.cl))
        for extra in sorted(exc.extra_fields):
            yield f"{key}.{extra}", f"unknown key (known keys: {known})"
    else:
        yield key, str(exc)
