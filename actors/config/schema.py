"""The config file's top level: [gateway], [audit], [[middleware]], and Config, the whole file as loaded.

Each key is one attrs field with its type, its default and its rule (an attrs validator, see checks.py);
closed sets of words are enums. [[backends]] is in backend_schema.py, [websocket] and [http] in
listener_schema.py. Nothing here reads the environment or the filesystem: that is resolve.py.
"""

from __future__ import annotations

import base64
import enum
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlsplit

import attrs
from attrs.validators import optional

from actors.config.admin_schema import AdminSettings
from actors.config.backend_schema import BackendConfig, RootsMode
from actors.config.checks import (
    at_least,
    environment_name,
    message_size,
    not_above,
    not_below,
    not_blank,
    positive,
)
from actors.config.fleet_schema import FleetSettings
from actors.config.listener_schema import HttpSettings, WebSocketSettings
from actors.config.oauth_schema import StdioPrincipal
from actors.config.route_schema import RouteConfig
from actors.config.sandbox_schema import SandboxSettings, SandboxTable, sandbox_settings
from actors.config.secret import Secret
from actors.config.tool_policy import output_chars
from actors.config.tracing_schema import TracingSettings
from actors.config.trust_schema import TrustSettings
from actors.discovery import DiscoverySettings
from actors.limits import LimitSettings
from actors.output.settings import OutputLimits
from actors.policy.rules import Policy
from actors.trust import TrustMode

MAX_REQUEST_BYTES: Final = 4 * 1024 * 1024  # one request's raw size: as max_message_bytes' default
MAX_CLIENT_BYTES: Final = 16 * 1024 * 1024  # one client's, in flight and parked: 4 of the largest requests
MAX_UNREAD_BYTES: Final = 64 * 1024 * 1024  # answers one session's client has not read: 16 of the largest


class BlockSecrets(enum.StrEnum):
    """[gateway] block_secrets: what a known secret value in a tool's arguments or result does."""

    OFF = "off"  # nothing looked for
    WARN = "warn"  # the call goes on; the log and its audit row name the secret (never its value)
    BLOCK = "block"  # the call is refused (arguments) or its result withheld (result), said the same way


class ToolNaming(enum.StrEnum):
    """[gateway] tool_names: how tool names are published (see actors.catalog)."""

    PREFIX_ON_COLLISION = "prefix-on-collision"  # a bare name unless an earlier backend has it
    ALWAYS_PREFIX = "always-prefix"  # every tool as {backend}__{tool}


@attrs.frozen(kw_only=True)
class GatewaySettings:
    """[gateway]."""

    name: str = attrs.field(default="mcp-gateway", validator=not_blank)
    tool_names: ToolNaming = ToolNaming.PREFIX_ON_COLLISION
    request_timeout_s: float = attrs.field(default=60.0, validator=positive)
    startup_timeout_s: float = attrs.field(default=30.0, validator=positive)
    shutdown_s: float = attrs.field(default=5.0, validator=positive)
    max_message_bytes: int = attrs.field(default=4 * 1024 * 1024, validator=message_size)
    # entries per page of tools/list (and every aggregated list)
    page_size: int = attrs.field(default=100, validator=at_least(1))
    # longest hold of a first initialize while backends are still starting
    initialize_hold_s: float = attrs.field(default=10.0, validator=positive)
    # requests one session may have in flight; past it, an error at once
    max_inflight_per_session: int = attrs.field(default=256, validator=at_least(1))
    # what one request may hold, counted as its raw frame (decoded it costs ~7-12x, up to 24x)
    max_request_bytes: int = attrs.field(
        default=MAX_REQUEST_BYTES, validator=[message_size, not_above("max_client_bytes")]
    )
    # what one client (its token principal, else its session) may hold in requests in flight and parked calls
    max_client_bytes: int = attrs.field(
        default=MAX_CLIENT_BYTES, validator=[message_size, not_below("max_request_bytes")]
    )
    # answers waiting for one session's client to read them; past it the session is ended as not reading
    max_unread_bytes: int = attrs.field(
        default=MAX_UNREAD_BYTES, validator=[message_size, not_below("max_message_bytes")]
    )
    expose_backend_stderr: bool = False  # network clients' errors carry a backend's last stderr lines
    watch_config: bool = False  # reload when the config file changes (as on SIGHUP)
    block_secrets: BlockSecrets = BlockSecrets.OFF  # a secret's value in a tool's arguments or result
    # the characters of a tool's result a client gets, unless the tool's own says otherwise (None: all)
    max_output_chars: int | None = attrs.field(default=None, validator=optional(output_chars))


@attrs.frozen(kw_only=True)
class AuditSettings:
    """[audit]: the built-in audit middleware, on when the table is present."""

    path: Path = Path("audit.sqlite3")  # relative to the config file's folder; absolute once loaded
    # rotate once the file is larger than this
    max_bytes: int = attrs.field(default=10 * 1024 * 1024, validator=at_least(4096))
    backups: int = attrs.field(default=3, validator=at_least(0))  # rotated files kept: .1 (newest) ... .N
    include_arguments: bool = False  # argument values in the records (sizes always)
    # rotate once the file's first record is older than this; 0: by size only
    max_age_s: float = attrs.field(default=86400.0, validator=at_least(0, "must be 0 (size only) or more"))
    # stored arguments are cut to this many bytes (and marked as cut)
    max_argument_bytes: int = attrs.field(default=4096, validator=at_least(16))
    # the records go to PostgreSQL instead of the file: the variable holding its URL (a password may be in
    # it, so never the file); `path` and the rotation keys then do not apply (retention is the database's)
    postgres_url_env: str | None = attrs.field(default=None, validator=optional(environment_name))
    postgres_url: str | None = attrs.field(default=None, repr=False)  # read from postgres_url_env


@attrs.frozen(kw_only=True)
class MiddlewareTable:
    """[[middleware]] as written."""

    # dotted path of a Middleware subclass or factory: "package.module.Name" or "package.module:Name"
    use: str
    options: Mapping[str, Any] = attrs.field(factory=dict)  # keyword arguments for it


@attrs.frozen(kw_only=True)
class MiddlewareSpec(MiddlewareTable):
    """A [[middleware]] table with what `use` names imported (resolve.py)."""

    factory: Callable[..., Any] = attrs.field(eq=False, repr=False)


@attrs.frozen(kw_only=True)
class Config:
    """The whole file, loaded: paths absolute, secrets read, middleware imported."""

    path: Path
    gateway: GatewaySettings
    backends: tuple[BackendConfig, ...]
    websocket: WebSocketSettings | None = None
    http: HttpSettings | None = None
    audit: AuditSettings | None = None
    middleware: tuple[MiddlewareSpec, ...] = ()
    admin: AdminSettings | None = None  # [admin]: health, readiness, metrics and status (actors/admin/)
    policy: Policy | None = None  # [policy]: which caller sees and calls what (actors/policy/), compiled
    limits: LimitSettings | None = None  # [limits]: rates and calls in flight per caller (actors/limits/)
    stdio: StdioPrincipal | None = None  # [stdio]: the stdio session's principal
    fleet: FleetSettings | None = None  # [fleet]: replicas sharing sessions through Redis (actors/fleet/)
    tracing: TracingSettings | None = None  # [tracing]: OpenTelemetry traces (actors/telemetry/tracing*.py)
    trust: TrustSettings = attrs.field(factory=TrustSettings)  # [trust]: pinned definitions (actors/trust/)
    discovery: DiscoverySettings | None = None  # [discovery]: search for big catalogs (actors/discovery/)
    sandbox: SandboxTable = attrs.field(factory=SandboxTable)  # [sandbox]: every stdio backend's default
    routes: tuple[RouteConfig, ...] = ()  # [[routes]]: chosen subsets at their own paths (actors/routes/)

    def sandbox_rules(self, backend: BackendConfig) -> SandboxSettings | None:
        """Its sandbox as the tables write it (what a reload compares); None for a remote backend."""
        if backend.command is None:
            return None
        return sandbox_settings(getattr(backend, "sandbox", None), self.sandbox)

    def sandbox_of(self, backend: BackendConfig) -> SandboxSettings | None:
        """A stdio backend's sandbox (its own table over [sandbox]); None for a remote backend. Its `hide`
        always has the gateway's own files: this config, the secret files it reads, the audit and trust
        stores (masked where a read or write path would show them, e.g. a cwd beside the config)."""
        settings = self.sandbox_rules(backend)
        if settings is None:
            return None
        own = [self.path, *(secret.path for _, secret in self.secrets() if secret.path is not None)]
        own += [self.audit.path] if self.audit is not None else []
        own += [self.trust.path] if self.trust.path is not None else []
        return attrs.evolve(settings, hide=(*settings.hide, *dict.fromkeys(str(path) for path in own)))

    def trust_mode(self, backend: BackendConfig) -> TrustMode:
        """The backend's own `trust`, else [trust] mode."""
        return backend.trust if backend.trust is not None else self.trust.mode

    def trust_modes(self) -> dict[str, TrustMode]:
        return {backend.name: self.trust_mode(backend) for backend in self.backends}

    def tool_scopes(self) -> dict[str, frozenset[str]]:
        """The scopes each tool needs, as the listeners' [NAME.auth] tables say (both merged)."""
        merged: dict[str, frozenset[str]] = {}
        for listener in (self.websocket, self.http):
            if listener is not None and listener.oauth is not None:
                for tool, scopes in listener.oauth.tool_scopes.items():
                    merged[tool] = merged.get(tool, frozenset()) | scopes
        return merged

    def request_timeout_s(self, backend: BackendConfig) -> float:
        own = backend.request_timeout_s
        return own if own is not None else self.gateway.request_timeout_s

    def output_limits(self) -> OutputLimits:
        """max_output_chars: the gateway's and each backend's per tool (actors/output/)."""
        tools = {b.name: b.tools.max_output_chars for b in self.backends if b.tools.max_output_chars}
        return OutputLimits(self.gateway.max_output_chars, tools)

    def startup_timeout_s(self, backend: BackendConfig) -> float:
        own = backend.startup_timeout_s
        return own if own is not None else self.gateway.startup_timeout_s

    def secret_variables(self) -> frozenset[str]:
        """Environment variables no backend may inherit: where the listeners' token secrets come from."""
        listeners = (self.websocket, self.http)
        admin = {self.admin.token_env} if self.admin is not None and self.admin.token_env else set()
        return (
            frozenset(
                listener.auth.secret_env
                for listener in listeners
                if listener is not None and listener.auth is not None and listener.auth.secret_env
            )
            | admin
            | (self.fleet.secret_variables if self.fleet is not None else frozenset())
            | (
                {self.audit.postgres_url_env}
                if self.audit is not None and self.audit.postgres_url_env
                else set()
            )
        )

    def forwarded_headers(self) -> frozenset[str]:
        """Every client header some backend's forward_headers names, lower-case."""
        return frozenset(
            name.lower() for backend in self.backends for name in getattr(backend, "forward_headers", ())
        )

    def secrets(self) -> Iterator[tuple[str, Secret]]:
        """Every secret reference in the file, with its key: what `check` looks at."""
        for index, backend in enumerate(self.backends):
            for table in ("headers", "env"):
                for name, value in getattr(backend, table, {}).items():
                    if isinstance(value, Secret):
                        yield f"backends[{index}].{table}.{name}", value
            auth = getattr(backend, "auth", None)
            for name in ("secret", "client_secret"):
                if isinstance(getattr(auth, name, None), Secret):
                    yield f"backends[{index}].auth.{name}", getattr(auth, name)

    def secret_values(self) -> dict[str, str]:
        """Every secret value this config resolved, by the name the redactor shows in its place: the
        references, and what the older `*_env` and `*_file` keys read (listener and admin tokens, the fleet's
        keys, the password in a URL: the fleet's Redis, the audit's database, a backend's)."""
        values = {secret.name: secret.reveal() for _, secret in self.secrets() if secret.resolved}
        for listener in (self.websocket, self.http):
            if listener is not None and listener.auth is not None and listener.auth.secret_env:
                values[f"env:{listener.auth.secret_env}"] = listener.auth.key
        if self.admin is not None and self.admin.token is not None:
            values[f"env:{self.admin.token_env}"] = self.admin.token
        if self.audit is not None and self.audit.postgres_url:
            values.update(_url_secrets(f"env:{self.audit.postgres_url_env}", self.audit.postgres_url))
        if self.fleet is not None:
            values.update(_url_secrets("fleet.redis_url", self.fleet.redis_url))
            for number, key in enumerate(self.fleet.keys, 1):
                for form, text in _key_forms(key).items():
                    values[f"fleet.keys[{number}].{form}"] = text
        for index, backend in enumerate(self.backends):
            if backend.url is not None:
                values.update(_url_secrets(f"backends[{index}].url", backend.url))
        return values

    def roots_of(self, backend: BackendConfig) -> RootsMode | tuple[str, ...]:
        """ "none", "client" or the operator's URIs. Unset: a client's roots reach a backend only when the
        gateway can have no more than one client (no network listener), since backends are shared."""
        if backend.roots is not None:
            return backend.roots
        return RootsMode.CLIENT if self.websocket is None and self.http is None else RootsMode.NONE


def _url_secrets(label: str, url: str) -> dict[str, str]:
    """The password a URL holds, if any (the rest of the URL says where, and stays readable)."""
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    return {f"{label}.password": unquote(password)} if password else {}


def _key_forms(key: bytes) -> dict[str, str]:
    """A fleet key as it may be written: hex (either case) and base64url (with or without its padding)."""
    text = base64.urlsafe_b64encode(key).decode()
    return {"hex": key.hex(), "HEX": key.hex().upper(), "base64": text.rstrip("=")}
