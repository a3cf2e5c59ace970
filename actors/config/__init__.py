"""The TOML config: read with tomllib, structured by cattrs into frozen attrs classes, checked whole.

A bad file fails before anything starts. Every problem is reported, not just the first, each as
`FILE: key: reason` with keys written the way they appear in the file (`backends[1].restart.policy`).
"""

from __future__ import annotations

import importlib
import math
import os
import re
import shutil
import sys
import tomllib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)

from actors.config.tool_policy import HINTS, ToolPolicy

NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]+")
RESTART_POLICIES: Final = ("permanent", "transient", "temporary")
TOOL_NAMING: Final = ("prefix-on-collision", "always-prefix")
ROOTS_MODES: Final = ("none", "client")
MIN_MESSAGE_BYTES: Final = 1024
DEFAULT_BACKOFF_INITIAL_S: Final = 0.5

_T = TypeVar("_T")
TOP_LEVEL: Final = {
    "gateway": "[gateway]",
    "backends": "[[backends]]",
    "websocket": "[websocket]",
    "http": "[http]",
    "audit": "[audit]",
    "middleware": "[[middleware]]",
}


@attrs.frozen
class RestartConfig:
    policy: str = "permanent"
    max_restarts: int = 5
    window_s: float = 60.0
    backoff_initial_s: float = DEFAULT_BACKOFF_INITIAL_S
    backoff_max_s: float = 30.0
    stable_after_s: float = 120.0


@attrs.frozen
class HealthConfig:
    interval_s: float = 30.0  # a ping this often while the backend is up; 0 turns health checks off
    timeout_s: float = 10.0  # a ping not answered within this is a miss
    failures: int = 3  # this many misses in a row: the backend is declared hung and restarted


@attrs.frozen
class BackendConfig:
    name: str
    command: str | None = None  # a stdio backend: this program, with args, env and cwd
    url: str | None = None  # or a remote backend: ws(s):// (WebSocket) or http(s):// (Streamable HTTP)
    headers: Mapping[str, str] = attrs.field(factory=dict, repr=False)  # values may be secrets
    headers_env: Mapping[str, str] = attrs.field(
        factory=dict
    )  # header -> environment variable with its value
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict)  # set for the backend, over the safe default set
    inherit_env: tuple[str, ...] = ()  # the gateway's own variables passed on, besides the default set
    cwd: Path = Path(".")  # absolute once loaded: relative paths resolve against the config file's folder
    request_timeout_s: float | None = None  # None: the gateway's default
    startup_timeout_s: float | None = None
    restart: RestartConfig = RestartConfig()
    health: HealthConfig = HealthConfig()
    tools: ToolPolicy = attrs.field(factory=ToolPolicy)  # [backends.tools]: allow, deny, rename, annotations
    # Roots the backend sees: "none" (no roots capability), "client" (the one client session it serves),
    # or a fixed tuple of file:// URIs from the operator. None: "client" when the gateway has no network
    # listener, else "none" (see Config.roots_of).
    roots: str | tuple[str, ...] | None = None


@attrs.frozen
class GatewaySettings:
    name: str = "mcp-gateway"
    tool_names: str = "prefix-on-collision"
    request_timeout_s: float = 60.0
    startup_timeout_s: float = 30.0
    shutdown_s: float = 5.0
    max_message_bytes: int = 4 * 1024 * 1024
    page_size: int = 100  # entries per page of tools/list (and every aggregated list)
    initialize_hold_s: float = 10.0  # longest hold of a first initialize while backends are still starting
    max_inflight_per_session: int = 256  # requests one session may have in flight; past it, an error at once
    expose_backend_stderr: bool = False  # network clients' errors carry a backend's last stderr lines


@attrs.frozen
class AuthTable:
    """[websocket.auth] as written: where the key comes from, never the key itself."""

    jwt_secret_env: str | None = None  # HS256: the secret is read from this environment variable
    jwt_public_key_file: Path | None = None  # RS256/ES256: a PEM public key, relative to the config file
    audience: str | None = None
    issuer: str | None = None


@attrs.frozen
class WebSocketTable:
    host: str = "127.0.0.1"
    port: int = 8765
    path: str = "/mcp"
    max_message_bytes: int = 4 * 1024 * 1024
    max_sessions: int = 1000
    allowed_origins: tuple[str, ...] = ()  # besides pages served from an allowed host on this port
    allowed_hosts: tuple[str, ...] = ("127.0.0.1", "localhost", "::1")  # Host header names; "*" allows any
    max_sessions_per_client: int = 32  # per token subject, or per peer address without auth
    initialize_timeout_s: float = 30.0  # a session that has not finished initialize by then is closed
    ping_interval_s: float = 20.0
    send_timeout_s: float = 10.0  # a client that takes no pending frame this long is closed (1008)
    auth: AuthTable | None = None


@attrs.frozen
class HttpTable:
    host: str = "127.0.0.1"
    port: int = 8766
    path: str = "/mcp"
    max_message_bytes: int = 4 * 1024 * 1024  # a larger POST body is refused with 413
    max_sessions: int = 1000
    allowed_origins: tuple[str, ...] = ()  # besides pages served from an allowed host on this port
    allowed_hosts: tuple[str, ...] = ("127.0.0.1", "localhost", "::1")  # Host header names; "*" allows any
    max_sessions_per_client: int = 32  # per token subject, or per peer address without auth
    initialize_timeout_s: float = 30.0  # a session that has not finished initialize by then is closed
    body_timeout_s: float = 30.0  # a POST body that has not arrived whole by then gets 408
    session_idle_s: float = 1800.0  # no request for this long: the session is closed and its id forgotten
    resume_window_s: float = 5.0  # a dropped response stream may resume this long; then its call is cancelled
    auth: AuthTable | None = None


@attrs.frozen
class JwtAuth:
    """What the handshake needs to verify a bearer token. `key` is secret: never logged, never repr'd."""

    key: str = attrs.field(repr=False)
    algorithms: tuple[str, ...]
    audience: str | None
    issuer: str | None
    secret_env: str | None = None  # the environment variable the key came from (HS256): no backend sees it


@attrs.frozen
class WebSocketSettings:
    host: str
    port: int
    path: str
    max_message_bytes: int
    max_sessions: int
    allowed_origins: tuple[str, ...]
    allowed_hosts: tuple[str, ...]
    max_sessions_per_client: int
    initialize_timeout_s: float
    ping_interval_s: float
    send_timeout_s: float
    auth: JwtAuth | None


@attrs.frozen
class HttpSettings:
    host: str
    port: int
    path: str
    max_message_bytes: int
    max_sessions: int
    allowed_origins: tuple[str, ...]
    allowed_hosts: tuple[str, ...]
    max_sessions_per_client: int
    initialize_timeout_s: float
    body_timeout_s: float
    session_idle_s: float
    resume_window_s: float
    auth: JwtAuth | None


@attrs.frozen
class AuditSettings:
    """[audit]: the built-in audit middleware, on when the table is present."""

    path: Path = Path("audit.sqlite3")  # relative to the config file's folder
    max_bytes: int = 10 * 1024 * 1024  # rotate once the file is larger than this
    backups: int = 3  # rotated files kept: audit.sqlite3.1 (newest) ... .N
    include_arguments: bool = False  # argument values in the records (sizes always)
    max_age_s: float = 86400.0  # rotate once the file's first record is older than this; 0: by size only
    max_argument_bytes: int = 4096  # stored arguments are cut to this many bytes (and marked as cut)


@attrs.frozen
class MiddlewareTable:
    """[[middleware]] as written."""

    use: (
        str  # dotted path of a Middleware subclass or factory: "package.module.Name" or "package.module:Name"
    )
    options: Mapping[str, Any] = attrs.field(factory=dict)  # keyword arguments for it


@attrs.frozen
class MiddlewareSpec:
    use: str
    factory: Callable[..., Any] = attrs.field(eq=False, repr=False)
    options: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Config:
    path: Path
    gateway: GatewaySettings
    backends: tuple[BackendConfig, ...]
    websocket: WebSocketSettings | None = None
    audit: AuditSettings | None = None
    middleware: tuple[MiddlewareSpec, ...] = ()
    http: HttpSettings | None = None

    def request_timeout_s(self, backend: BackendConfig) -> float:
        return (
            backend.request_timeout_s
            if backend.request_timeout_s is not None
            else self.gateway.request_timeout_s
        )

    def startup_timeout_s(self, backend: BackendConfig) -> float:
        return (
            backend.startup_timeout_s
            if backend.startup_timeout_s is not None
            else self.gateway.startup_timeout_s
        )

    def secret_variables(self) -> frozenset[str]:
        """Environment variables no backend may inherit: where the listeners' token secrets come from."""
        listeners = (self.websocket, self.http)
        return frozenset(
            listener.auth.secret_env
            for listener in listeners
            if listener is not None and listener.auth is not None and listener.auth.secret_env
        )

    def roots_of(self, backend: BackendConfig) -> str | tuple[str, ...]:
        """ "none", "client" or the operator's URIs. Unset: a client's roots reach a backend only when the
        gateway can have no more than one client (no network listener), since backends are shared."""
        if backend.roots is not None:
            return backend.roots
        return "client" if self.websocket is None and self.http is None else "none"


@attrs.frozen
class ConfigProblem:
    file: str
    key: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.key}: {self.reason}" if self.key else f"{self.file}: {self.reason}"


class ConfigError(Exception):
    """The config cannot be used; `problems` lists every reason."""

    def __init__(self, problems: list[ConfigProblem]) -> None:
        super().__init__("\n".join(map(str, problems)))
        self.problems = problems


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read, structure and check a config file; raise ConfigError naming every problem."""
    file = Path(path)
    shown = str(path)
    try:
        with file.open("rb") as stream:
            document = tomllib.load(stream)
    except FileNotFoundError:
        raise ConfigError([ConfigProblem(shown, "", "no such file")]) from None
    except IsADirectoryError:
        raise ConfigError([ConfigProblem(shown, "", "is a directory, not a TOML file")]) from None
    except OSError as exc:
        raise ConfigError([ConfigProblem(shown, "", f"cannot read: {exc.strerror or exc}")]) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigProblem(shown, "", f"not valid TOML: {exc}")]) from None
    problems: list[tuple[str, str]] = []
    config = _structure(document, file.resolve(), problems)
    if problems or config is None:
        raise ConfigError([ConfigProblem(shown, key, reason) for key, reason in problems])
    return config


def resolve_command(backend: BackendConfig) -> str | None:
    """The program to run for `backend`, or None when it cannot be found.

    A command with a slash is a path, relative to the backend's cwd. A bare name is looked up first beside the
    gateway's own interpreter (so `python` and console scripts of this environment win), then on PATH.
    """
    if backend.command is None:
        return None
    command = os.path.expanduser(backend.command)
    if os.sep in command or (os.altsep and os.altsep in command):
        candidate = Path(command) if os.path.isabs(command) else backend.cwd / command
        return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None
    here = os.path.dirname(sys.executable)
    search = os.pathsep.join(p for p in (here, backend.env.get("PATH") or os.environ.get("PATH", "")) if p)
    return shutil.which(command, path=search)


def command_problems(config: Config) -> list[ConfigProblem]:
    """`check`'s look before a start: every stdio backend's command must resolve to an executable."""
    problems = []
    for index, backend in enumerate(config.backends):
        if backend.command is not None and resolve_command(backend) is None:
            where = "on PATH" if os.sep not in backend.command else f"in {backend.cwd}"
            reason = f"{backend.command!r} is not found {where}, or is not executable"
            problems.append(ConfigProblem(str(config.path), f"backends[{index}].command", reason))
    return problems


# --- structuring ---------------------------------------------------------------------------------------


def _structure(document: dict[str, Any], file: Path, problems: list[tuple[str, str]]) -> Config | None:
    for key in document:
        if key not in TOP_LEVEL:
            problems.append((key, f"unknown key; the top level has {', '.join(TOP_LEVEL.values())}"))
    gateway = GatewaySettings()
    if "gateway" in document:
        raw_gateway = document["gateway"]
        gateway = _convert(raw_gateway, GatewaySettings, "gateway", problems) or gateway
        problems.extend(_check_gateway(_table(raw_gateway)))
    raw_backends = document.get("backends")
    backends: list[BackendConfig] = []
    if raw_backends is None:
        problems.append(("backends", "missing: add at least one [[backends]] table"))
    elif not isinstance(raw_backends, list):
        problems.append(
            ("backends", f"expected an array of tables ([[backends]]), got {_kind(raw_backends)}")
        )
    elif not raw_backends:
        problems.append(("backends", "empty: add at least one [[backends]] table"))
    else:
        for index, raw in enumerate(raw_backends):
            backend = _convert(raw, BackendConfig, f"backends[{index}]", problems)
            if isinstance(raw, dict):  # not a table: _convert has said so, once
                problems.extend(_check_backend(raw, f"backends[{index}]"))
            if backend is not None:
                cwd = (file.parent / backend.cwd.expanduser()).resolve()
                if backend.command is not None and not cwd.is_dir():
                    problems.append((f"backends[{index}].cwd", f"no such directory: {cwd}"))
                from_env = {header: os.environ.get(var, "") for header, var in backend.headers_env.items()}
                backends.append(attrs.evolve(backend, cwd=cwd, headers={**backend.headers, **from_env}))
        problems.extend(_check_names(raw_backends))
    websocket = _listener(
        document, "websocket", WebSocketTable, WebSocketSettings, WEBSOCKET_RANGES, file.parent, problems
    )
    http = _listener(document, "http", HttpTable, HttpSettings, HTTP_RANGES, file.parent, problems)
    audit = None
    if "audit" in document:
        audit = _convert(document["audit"], AuditSettings, "audit", problems)
        problems.extend(_in_range(_table(document["audit"]), "audit", AUDIT_RANGES))
        if audit is not None:
            audit = attrs.evolve(audit, path=(file.parent / audit.path.expanduser()).resolve())
            if audit.path.is_dir():
                problems.append(("audit.path", f"{audit.path} is a directory; name a file"))
    middleware = _middleware(document.get("middleware"), file.parent, problems)
    if problems:
        return None
    return Config(file, gateway, tuple(backends), websocket, audit, middleware, http)


def _middleware(raw: Any, folder: Path, problems: list[tuple[str, str]]) -> tuple[MiddlewareSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.append(("middleware", f"expected an array of tables ([[middleware]]), got {_kind(raw)}"))
        return ()
    specs = []
    for index, entry in enumerate(raw):
        table = _convert(entry, MiddlewareTable, f"middleware[{index}]", problems)
        if table is None:
            continue
        factory = resolve_dotted(table.use, folder)
        if isinstance(factory, str):
            problems.append((f"middleware[{index}].use", factory))
            continue
        specs.append(MiddlewareSpec(table.use, factory, dict(table.options)))
    return tuple(specs)


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


def _listener(
    document: dict[str, Any],
    name: str,
    table_type: type[WebSocketTable | HttpTable],
    settings: type[_T],
    ranges: Mapping[str, Range],
    folder: Path,
    problems: list[tuple[str, str]],
) -> _T | None:
    """[websocket] or [http] as settings, or None when the table is absent or wrong."""
    if name not in document:
        return None
    raw = document[name]
    table = _convert(raw, table_type, name, problems)
    problems.extend(_check_listener(_table(raw), name, ranges))
    return None if table is None else _listener_settings(table, settings, name, folder, problems)


def _listener_settings(
    table: WebSocketTable | HttpTable,
    settings: type[_T],
    prefix: str,
    folder: Path,
    problems: list[tuple[str, str]],
) -> _T:
    """A listener's table as settings: the same fields, with [PREFIX.auth] turned into a loaded key."""
    auth = None
    if table.auth is not None:
        auth = _jwt_auth(table.auth, f"{prefix}.auth", folder, problems)
    fields = attrs.asdict(table, recurse=False)
    fields["auth"] = auth
    return settings(**fields)


def _jwt_auth(table: AuthTable, key: str, folder: Path, problems: list[tuple[str, str]]) -> JwtAuth | None:
    if (table.jwt_secret_env is None) == (table.jwt_public_key_file is None):
        problems.append((key, "set exactly one of jwt_secret_env and jwt_public_key_file"))
        return None
    if table.jwt_secret_env is not None:
        secret = os.environ.get(table.jwt_secret_env)
        if not secret:
            reason = f"environment variable {table.jwt_secret_env} is not set or empty"
            problems.append((f"{key}.jwt_secret_env", reason))
            return None
        return JwtAuth(secret, ("HS256",), table.audience, table.issuer, table.jwt_secret_env)
    assert table.jwt_public_key_file is not None
    key_file = folder / table.jwt_public_key_file.expanduser()
    try:
        pem = key_file.read_text(encoding="utf-8")
    except OSError as exc:
        reason = f"cannot read {key_file}: {exc.strerror or exc}"
        problems.append((f"{key}.jwt_public_key_file", reason))
        return None
    if "PUBLIC KEY" not in pem:
        problems.append((f"{key}.jwt_public_key_file", f"{key_file} is not a PEM public key"))
        return None
    return JwtAuth(pem, ("RS256", "ES256"), table.audience, table.issuer)


def _check_listener(
    raw: dict[str, Any], prefix: str, ranges: Mapping[str, Range]
) -> Iterator[tuple[str, str]]:
    yield from _in_range(raw, prefix, ranges)
    path = _typed(raw, "path", str)
    if path is not None and not path.startswith("/"):
        yield f"{prefix}.path", "must start with '/'"


# Checks beyond types read the raw tables, so a table with a type error still has its other problems reported.


def _table(raw: Any) -> dict[str, Any]:
    return raw if isinstance(raw, dict) else {}


def _typed(table: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = table.get(key)
    return None if isinstance(value, bool) or not isinstance(value, kind) else value


# Range rules: key -> (type, the test a value must pass, what to say when it does not). nan and inf were
# refused while structuring, so the tests only see finite numbers.
Range = tuple[type | tuple[type, ...], Callable[[Any], bool], str]
NUMBER: Final = (int, float)
POSITIVE: Final[Range] = (NUMBER, lambda value: value > 0, "must be greater than 0")


def _at_least(lowest: int, kind: type | tuple[type, ...] = int, reason: str | None = None) -> Range:
    return (kind, lambda value: value >= lowest, reason or f"must be {lowest} or more")


GATEWAY_RANGES: Final[dict[str, Range]] = {
    "request_timeout_s": POSITIVE,
    "startup_timeout_s": POSITIVE,
    "shutdown_s": POSITIVE,
    "max_message_bytes": _at_least(MIN_MESSAGE_BYTES, reason=f"must be at least {MIN_MESSAGE_BYTES}"),
    "page_size": _at_least(1),
    "initialize_hold_s": POSITIVE,
    "max_inflight_per_session": _at_least(1),
}
BACKEND_RANGES: Final[dict[str, Range]] = {"request_timeout_s": POSITIVE, "startup_timeout_s": POSITIVE}
RESTART_RANGES: Final[dict[str, Range]] = {
    "max_restarts": _at_least(0),
    "window_s": POSITIVE,
    "stable_after_s": POSITIVE,
    "backoff_initial_s": _at_least(0, NUMBER),
}
HEALTH_RANGES: Final[dict[str, Range]] = {
    "interval_s": _at_least(0, NUMBER, "must be 0 (off) or more"),
    "timeout_s": POSITIVE,
    "failures": _at_least(1),
}
AUDIT_RANGES: Final[dict[str, Range]] = {
    "max_bytes": _at_least(4096),
    "backups": _at_least(0),
    "max_age_s": _at_least(0, NUMBER, "must be 0 (size only) or more"),
    "max_argument_bytes": _at_least(16),
}
LISTENER_RANGES: Final[dict[str, Range]] = {  # the keys both [websocket] and [http] have
    "port": (int, lambda port: 0 <= port <= 65535, "must be between 0 and 65535 (0: any free port)"),
    "max_message_bytes": GATEWAY_RANGES["max_message_bytes"],
    "max_sessions": _at_least(1),
    "max_sessions_per_client": _at_least(1),
    "initialize_timeout_s": POSITIVE,
}
WEBSOCKET_RANGES: Final[dict[str, Range]] = {
    **LISTENER_RANGES,
    "ping_interval_s": POSITIVE,
    "send_timeout_s": POSITIVE,
}
HTTP_RANGES: Final[dict[str, Range]] = {
    **LISTENER_RANGES,
    "body_timeout_s": POSITIVE,
    "session_idle_s": POSITIVE,
    "resume_window_s": _at_least(0, NUMBER, "must be 0 (no resuming) or more"),
}


def _in_range(raw: dict[str, Any], prefix: str, ranges: Mapping[str, Range]) -> Iterator[tuple[str, str]]:
    """Checks beyond types, on the raw table: a key of the wrong type was reported while structuring."""
    for key, (kind, passes, reason) in ranges.items():
        value = _typed(raw, key, kind)
        if value is not None and math.isfinite(value) and not passes(value):
            yield f"{prefix}.{key}", reason


def _check_gateway(raw: dict[str, Any]) -> Iterator[tuple[str, str]]:
    name = _typed(raw, "name", str)
    if name is not None and not name.strip():
        yield "gateway.name", "must not be empty"
    naming = _typed(raw, "tool_names", str)
    if naming is not None and naming not in TOOL_NAMING:
        yield "gateway.tool_names", f"{naming!r} is not one of {', '.join(map(repr, TOOL_NAMING))}"
    yield from _in_range(raw, "gateway", GATEWAY_RANGES)


def _check_names(raw: list[Any]) -> Iterator[tuple[str, str]]:
    first_seen: dict[str, int] = {}
    for index, entry in enumerate(raw):
        name = _typed(_table(entry), "name", str)
        if name is None:
            continue
        if not NAME_PATTERN.fullmatch(name):
            yield f"backends[{index}].name", f"{name!r} may use only letters, digits, '_' and '-'"
        elif name in first_seen:
            yield f"backends[{index}].name", f"duplicate name {name!r} (also backends[{first_seen[name]}])"
        else:
            first_seen[name] = index


def _check_backend(raw: dict[str, Any], key: str) -> Iterator[tuple[str, str]]:
    command, url = _typed(raw, "command", str), _typed(raw, "url", str)
    if "command" not in raw and "url" not in raw:
        yield f"{key}.command", "required key is missing (or url, for a remote backend)"
    elif "command" in raw and "url" in raw:
        yield f"{key}.url", "set either command (a stdio backend) or url (a remote backend), not both"
    if command is not None and not command.strip():
        yield f"{key}.command", "must not be empty"
    if url is not None and not url.startswith(("ws://", "wss://", "http://", "https://")):
        yield (
            f"{key}.url",
            "must start with ws:// or wss:// (WebSocket) or http:// or https:// (Streamable HTTP)",
        )
    inherit = raw.get("inherit_env")
    for index, name in enumerate(inherit if isinstance(inherit, list) else ()):
        if isinstance(name, str) and (not name or "=" in name or "\0" in name):
            yield f"{key}.inherit_env[{index}]", f"{name!r} is not a valid environment variable name"
    if "url" in raw:
        for field in ("args", "env", "inherit_env", "cwd"):
            if field in raw:
                yield f"{key}.{field}", "applies to command backends only"
    for header, variable in _table(raw.get("headers_env")).items():
        if isinstance(variable, str) and not os.environ.get(variable):
            yield f"{key}.headers_env.{header}", f"environment variable {variable} is not set or empty"
    yield from _in_range(raw, key, BACKEND_RANGES)
    yield from _check_restart(_table(raw.get("restart")), f"{key}.restart")
    yield from _in_range(_table(raw.get("health")), f"{key}.health", HEALTH_RANGES)
    for old, new in _table(_table(raw.get("tools")).get("rename")).items():
        if isinstance(new, str) and not new.strip():
            yield f"{key}.tools.rename.{old}", "must not be empty"


def _check_restart(raw: dict[str, Any], key: str) -> Iterator[tuple[str, str]]:
    policy = _typed(raw, "policy", str)
    if policy is not None and policy not in RESTART_POLICIES:
        yield f"{key}.policy", f"{policy!r} is not one of {', '.join(map(repr, RESTART_POLICIES))}"
    yield from _in_range(raw, key, RESTART_RANGES)
    initial = _typed(raw, "backoff_initial_s", (int, float))
    longest = _typed(raw, "backoff_max_s", (int, float))
    if longest is not None and longest < (DEFAULT_BACKOFF_INITIAL_S if initial is None else initial):
        yield f"{key}.backoff_max_s", "must not be less than backoff_initial_s"


def _convert(raw: Any, cls: type[_T], key: str, problems: list[tuple[str, str]]) -> _T | None:
    if not isinstance(raw, dict):
        problems.append((key, f"expected a table, got {_kind(raw)}"))
        return None
    try:
        return _converter.structure(raw, cls)
    except (ClassValidationError, IterableValidationError) as exc:
        problems.extend(_explain(exc, key))
        return None


def _explain(exc: BaseException, key: str) -> Iterator[tuple[str, str]]:
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
    elif isinstance(exc, KeyError):
        yield key, "required key is missing"
    else:
        yield key, str(exc)


# Strict scalar hooks: TOML already has types, so nothing is coerced (true is not 1, "5" is not 5).


def _kind(value: Any) -> str:
    names = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "a table",
    }
    return names.get(type(value), type(value).__name__)


def _string(value: Any, _: type) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {_kind(value)}")
    return value


def _integer(value: Any, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {_kind(value)}")
    return value


def _number(value: Any, _: type) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {_kind(value)}")
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value}")
    return float(value)


def _optional_number(value: Any, _: type) -> float | None:
    return None if value is None else _number(value, float)


def _strings(value: Any, _: type) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise TypeError(f"expected an array of strings, got {_kind(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise TypeError(f"item {index} is {_kind(item)}; every item must be a string")
    return tuple(value)


def _optional_strings(value: Any, _: type) -> tuple[str, ...] | None:
    return None if value is None else _strings(value, tuple)


def _hint_overrides(value: Any, _: type) -> Mapping[str, Mapping[str, bool]]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a table of tools, got {_kind(value)}")
    for tool, hints in value.items():
        if not isinstance(hints, dict):
            raise TypeError(f"{tool}: expected a table such as {{ readOnlyHint = true }}, got {_kind(hints)}")
        for hint, flag in hints.items():
            if hint not in HINTS:
                raise ValueError(f"{tool}.{hint}: not one of {', '.join(HINTS)}")
            if not isinstance(flag, bool):
                raise TypeError(f"{tool}.{hint}: expected true or false, got {_kind(flag)}")
    return {tool: dict(hints) for tool, hints in value.items()}


def _environment(value: Any, _: type) -> Mapping[str, str]:
    if not isinstance(value, dict):
        raise TypeError(f'expected a table of strings such as {{ TZ = "UTC" }}, got {_kind(value)}')
    for name, item in value.items():
        if not name or "=" in name or "\0" in name:
            raise ValueError(f"{name!r} is not a valid environment variable name")
        if not isinstance(item, str):
            raise TypeError(f"{name} is {_kind(item)}; every value must be a string")
    return dict(value)


def _roots(value: Any, _: type) -> str | tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        if value not in ROOTS_MODES:
            modes = ", ".join(map(repr, ROOTS_MODES))
            raise ValueError(f"{value!r} is not one of {modes} or an array of file:// URIs")
        return value
    uris = _strings(value, tuple)
    for index, uri in enumerate(uris):
        if not uri.startswith("file://"):
            raise ValueError(f"item {index} ({uri!r}) is not a file:// URI")
    return uris


def _boolean(value: Any, _: type) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {_kind(value)}")
    return value


def _options(value: Any, _: type) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a table, got {_kind(value)}")
    return value


def _path(value: Any, _: type) -> Path:
    return Path(_string(value, str))


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    converter.register_structure_hook(str, _string)
    converter.register_structure_hook(int, _integer)
    converter.register_structure_hook(float, _number)
    for kind, hook in (
        (float | None, _optional_number),
        (tuple[str, ...], _strings),
        (Mapping[str, str], _environment),
    ):
        converter.register_structure_hook_func(lambda t, kind=kind: t == kind, hook)
    converter.register_structure_hook(Path, _path)
    converter.register_structure_hook(bool, _boolean)
    converter.register_structure_hook_func(lambda t: t == Mapping[str, Any], _options)
    converter.register_structure_hook_func(lambda t: t == tuple[str, ...] | None, _optional_strings)
    converter.register_structure_hook_func(lambda t: t == str | tuple[str, ...] | None, _roots)
    converter.register_structure_hook_func(lambda t: t == Mapping[str, Mapping[str, bool]], _hint_overrides)
    for table, name in (
        (RestartConfig, "backends.restart"),
        (HealthConfig, "backends.health"),
        (ToolPolicy, "backends.tools"),
        (AuthTable, "websocket.auth or http.auth"),
    ):
        converter.register_structure_hook(table, _sub_table(converter.get_structure_hook(table), name))
    return converter


def _sub_table(structure: Callable[[Any, type], Any], name: str) -> Callable[[Any, type], Any]:
    """A [backends.NAME] table: refuse anything that is not a table before cattrs looks inside."""

    def hook(value: Any, kind: type) -> Any:
        if not isinstance(value, dict):
            raise TypeError(f"expected a table ([{name}]), got {_kind(value)}")
        return structure(value, kind)

    return hook


_converter: Final = _make_converter()
