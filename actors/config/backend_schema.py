"""[[backends]]: what the gateway runs or connects to, and how it supervises it.

A backend is one of two kinds, told apart by its keys: a `command` the gateway runs (StdioBackend) or a
`url` it connects to (RemoteBackend, over WebSocket or Streamable HTTP by the url's scheme). Each kind has
only its own keys, so a remote backend cannot carry `args` or a `cwd` it would never use.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Final

import attrs
from attrs.validators import optional

from actors.config.auth_schema import BackendAuth, header_name
from actors.config.checks import (
    WHEN_MISSING,
    at_least,
    environment_name,
    every,
    not_below,
    not_blank,
    positive,
    rule,
)
from actors.config.sandbox_schema import SandboxTable
from actors.config.secret import Secret
from actors.config.tool_policy import ToolPolicy
from actors.trust import TrustMode

NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]+")


class BackendKind(enum.Enum):
    STDIO = "stdio"  # a child process: newline-delimited JSON on its stdin and stdout
    WEBSOCKET = "websocket"  # ws:// or wss://: one message per text frame
    HTTP = "http"  # http:// or https://: Streamable HTTP


URL_SCHEMES: Final = {
    "ws://": BackendKind.WEBSOCKET,
    "wss://": BackendKind.WEBSOCKET,
    "http://": BackendKind.HTTP,
    "https://": BackendKind.HTTP,
}


class RestartPolicyName(enum.StrEnum):
    """[backends.restart] policy; actors.runtime.supervisor.Restart has the same values."""

    PERMANENT = "permanent"
    TRANSIENT = "transient"
    TEMPORARY = "temporary"


class BackendEra(enum.StrEnum):
    """Which MCP era the gateway speaks with the backend (MCP 2026-07-28 beside the initialize era)."""

    AUTO = "auto"  # probe with server/discover at each start; legacy unless it answers as a modern server
    LEGACY = "legacy"  # initialize, as before 2026-07-28; no probe
    MODERN = "modern"  # 2026-07-28: no initialize, the envelope in every request's _meta


class RootsMode(enum.StrEnum):
    NONE = "none"  # no roots capability offered to the backend
    CLIENT = "client"  # the roots of the one client session it serves


@attrs.frozen(kw_only=True)
class RestartConfig:
    """[backends.restart]: when a backend that stopped is started again (OTP terms)."""

    policy: RestartPolicyName = RestartPolicyName.PERMANENT
    max_restarts: int = attrs.field(default=5, validator=at_least(0))
    window_s: float = attrs.field(default=60.0, validator=positive)
    backoff_initial_s: float = attrs.field(default=0.5, validator=at_least(0))
    backoff_max_s: float = attrs.field(default=30.0, validator=not_below("backoff_initial_s"))
    stable_after_s: float = attrs.field(default=120.0, validator=positive)


@attrs.frozen(kw_only=True)
class HealthConfig:
    """[backends.health]: pings while the backend is up."""

    # a ping this often; 0 turns health checks off
    interval_s: float = attrs.field(default=30.0, validator=at_least(0, "must be 0 (off) or more"))
    timeout_s: float = attrs.field(default=10.0, validator=positive)  # a ping not answered by then is a miss
    # this many misses in a row: the backend is declared hung and restarted
    failures: int = attrs.field(default=3, validator=at_least(1))


@attrs.frozen(kw_only=True)
class BaseBackend:
    """The keys both kinds of backend have."""

    name: str = attrs.field(
        validator=rule(NAME_PATTERN.fullmatch, "{value!r} may use only letters, digits, '_' and '-'")
    )
    # a value is a plain string (not secret: X-Team = "tools") or a secret reference (config/secret.py)
    headers: Mapping[str, str | Secret] = attrs.field(factory=dict, repr=False)
    # header -> variable holding its value: the same as { env = "VARIABLE" } in headers (resolved into it)
    headers_env: Mapping[str, str] = attrs.field(factory=dict)
    request_timeout_s: float | None = attrs.field(
        default=None, validator=optional(positive)
    )  # None: [gateway]'s
    startup_timeout_s: float | None = attrs.field(default=None, validator=optional(positive))
    era: BackendEra = BackendEra.AUTO
    probe_timeout_s: float = attrs.field(
        default=10.0, validator=positive
    )  # server/discover unanswered: legacy
    # a legacy lane (backends/lane.py) with no call for this long is closed; the next legacy call opens one
    lane_idle_s: float = attrs.field(default=600.0, validator=positive)
    restart: RestartConfig = attrs.field(factory=RestartConfig)
    required: bool = False  # the admin listener's /readyz answers 503 while this backend is not ready
    health: HealthConfig = attrs.field(factory=HealthConfig)
    tools: ToolPolicy = attrs.field(factory=ToolPolicy)  # [backends.tools]: allow, deny, rename, annotations
    trust: TrustMode | None = None  # off, pin, scan or manual; None: [trust] mode (actors/trust/)
    # Roots the backend sees: "none", "client", or a fixed tuple of file:// URIs from the operator. None:
    # "client" when the gateway has no network listener, else "none" (see Config.roots_of).
    roots: RootsMode | tuple[str, ...] | None = None


@attrs.frozen(kw_only=True)
class StdioBackend(BaseBackend):
    """A program the gateway runs, speaking MCP on its stdin and stdout."""

    url: ClassVar[None] = None  # the other kind's key, so code may ask any backend for either

    command: str = attrs.field(
        validator=not_blank, metadata={WHEN_MISSING: "required key is missing (or url, for a remote backend)"}
    )
    args: tuple[str, ...] = ()
    # set for the backend, over the safe default set: a plain string (not secret: LOG_LEVEL = "debug") or
    # a secret reference ({ env = ... }, { file = ... }, { value = ... }), handed on through its environment
    env: Mapping[str, str | Secret] = attrs.field(factory=dict, repr=False)
    # the gateway's own variables passed on, besides the default set
    inherit_env: tuple[str, ...] = attrs.field(default=(), validator=every(environment_name))
    cwd: Path = Path(".")  # absolute once loaded: relative paths resolve against the config file's folder
    sandbox: SandboxTable | None = None  # [backends.sandbox]: over [sandbox] (actors/sandbox/)

    @property
    def kind(self) -> BackendKind:
        return BackendKind.STDIO


@attrs.frozen(kw_only=True)
class RemoteBackend(BaseBackend):
    """A server the gateway connects to: ws(s):// for WebSocket, http(s):// for Streamable HTTP."""

    command: ClassVar[None] = None

    url: str = attrs.field(
        validator=rule(
            lambda url: url.startswith(tuple(URL_SCHEMES)),
            "must start with ws:// or wss:// (WebSocket) or http:// or https:// (Streamable HTTP)",
        )
    )
    # [backends.auth]: the gateway's credential for it (config/auth_schema.py); None: only `headers`
    auth: BackendAuth | None = None
    # client headers a request of this backend carries as the client sent them (HTTP backends only):
    # trace and tenant headers; authorization and cookie only with allow_client_credentials
    forward_headers: tuple[str, ...] = attrs.field(default=(), validator=every(header_name))
    allow_client_credentials: bool = False

    @property
    def kind(self) -> BackendKind:
        return next(kind for scheme, kind in URL_SCHEMES.items() if self.url.startswith(scheme))


BackendConfig = StdioBackend | RemoteBackend
# The keys that only a command backend has: in a table with `url` they are a mistake, not unknown keys.
STDIO_ONLY_KEYS: Final = tuple(
    field.name for field in attrs.fields(StdioBackend) if field.name not in attrs.fields_dict(RemoteBackend)
)
