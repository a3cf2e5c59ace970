"""[websocket] and [http]: the network listeners, and [NAME.auth], the bearer tokens they accept.

Both listeners share most keys (ListenerSettings); each adds its own timeouts. `auth` is written as an
[NAME.auth] table (AuthTable: where the key comes from) and loaded into a JwtAuth (the key itself) by
resolve.py, so the settings the frontends get never name a file or a variable they must still read.
"""

from __future__ import annotations

import enum
import ipaddress
from pathlib import Path
from typing import Any, Final

import attrs

from actors.config.checks import at_least, every, message_size, positive, rule
from actors.config.oauth_schema import IssuerTable, OAuthSettings, ResourceServerKeys

LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost", "::1")
MAX_STREAMS_PER_SESSION: Final = 64  # calls open at once in one HTTP session: far more than clients make


@attrs.frozen(kw_only=True)
class AuthTable(ResourceServerKeys):
    """[NAME.auth] as written: where the static key comes from (never the key itself), and the trusted
    issuers ([[NAME.auth.issuers]]) with the resource-server keys. Set a static key, issuers, or both."""

    jwt_secret_env: str | None = None  # HS256: the secret is read from this environment variable
    jwt_public_key_file: Path | None = None  # RS256/ES256: a PEM public key, relative to the config file
    audience: str | None = None
    issuer: str | None = None
    issuers: tuple[IssuerTable, ...] = ()


@attrs.frozen(kw_only=True)
class JwtAuth:
    """What the handshake needs to verify a bearer token. `key` is secret: never logged, never repr'd."""

    key: str = attrs.field(repr=False)
    algorithms: tuple[str, ...]
    audience: str | None
    issuer: str | None
    secret_env: str | None = None  # the environment variable the key came from (HS256): no backend sees it


def listener_port(default: int) -> int:
    """The `port` field of a listener, with its default."""
    port_range = rule(lambda port: 0 <= port <= 65535, "must be between 0 and 65535 (0: any free port)")
    return attrs.field(default=default, validator=port_range)  # type: ignore[no-any-return]


class ForwardedHeader(enum.StrEnum):
    """[NAME] forwarded_header: the header a trusted proxy writes the client's address in."""

    X_FORWARDED_FOR = "x-forwarded-for"
    FORWARDED = "forwarded"  # RFC 7239: its `for=` parameters


def is_network(text: str) -> bool:
    """An address or a CIDR block (`10.0.0.0/8`, `::1`); host bits after the prefix are let be."""
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return True


def _needs_trusted_proxies(instance: Any, _attribute: Any, value: bool) -> None:
    if value and not instance.trusted_proxies:
        raise ValueError("needs trusted_proxies: the addresses whose PROXY header is taken")


@attrs.frozen(kw_only=True)
class ListenerSettings:
    """The keys [websocket] and [http] share."""

    host: str = "127.0.0.1"
    path: str = attrs.field(
        default="/mcp", validator=rule(lambda path: path.startswith("/"), "must start with '/'")
    )
    max_message_bytes: int = attrs.field(default=4 * 1024 * 1024, validator=message_size)
    max_sessions: int = attrs.field(default=1000, validator=at_least(1))
    allowed_origins: tuple[str, ...] = ()  # besides pages served from an allowed host on this port
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS  # Host header names; "*" allows any
    # per token subject, or per peer address without auth
    max_sessions_per_client: int = attrs.field(default=32, validator=at_least(1))
    # a session that has not finished initialize by then is closed
    initialize_timeout_s: float = attrs.field(default=30.0, validator=positive)
    # peers (addresses or CIDR blocks) whose word on the client's address is taken: a PROXY protocol
    # header, else the forwarded_header; everyone else is known by the address it connects from
    trusted_proxies: tuple[str, ...] = attrs.field(
        default=(), validator=every(rule(is_network, "{value!r} is not an IP address or CIDR block"))
    )
    # a trusted proxy's connections start with a PROXY protocol (v1 or v2) header, required of it
    proxy_protocol: bool = attrs.field(default=False, validator=_needs_trusted_proxies)
    forwarded_header: ForwardedHeader = ForwardedHeader.X_FORWARDED_FOR  # read when proxy_protocol is off
    auth: JwtAuth | None = None  # from [NAME.auth]: loaded by resolve.py, never structured from the file
    oauth: OAuthSettings | None = None  # [NAME.auth]'s issuers, when it names any: loaded by resolve.py

    @property
    def checks_tokens(self) -> bool:
        return self.auth is not None or self.oauth is not None


@attrs.frozen(kw_only=True)
class WebSocketSettings(ListenerSettings):
    """[websocket]: one session per WebSocket connection (subprotocol mcp)."""

    port: int = listener_port(8765)
    ping_interval_s: float = attrs.field(default=20.0, validator=positive)
    # a client that takes no pending frame this long is closed (1008)
    send_timeout_s: float = attrs.field(default=10.0, validator=positive)


@attrs.frozen(kw_only=True)
class HttpSettings(ListenerSettings):
    """[http]: Streamable HTTP, one session per Mcp-Session-Id; a POST over max_message_bytes gets 413."""

    port: int = listener_port(8766)
    # a POST body that has not arrived whole by then gets 408
    body_timeout_s: float = attrs.field(default=30.0, validator=positive)
    # no request for this long: the session is closed and its id forgotten
    session_idle_s: float = attrs.field(default=1800.0, validator=positive)
    # a dropped response stream may resume this long; then its call is cancelled
    resume_window_s: float = attrs.field(
        default=5.0, validator=at_least(0, "must be 0 (no resuming) or more")
    )
    # a session's POSTs whose answers are awaited, being written or kept for resuming; past it, 429
    max_streams_per_session: int = attrs.field(default=MAX_STREAMS_PER_SESSION, validator=at_least(1))
