"""Admission rules both network listeners apply before a connection or request reaches a session.

In order: the path (404), Host (421), Origin (403), the bearer token when auth is on (401); then, for a
new session, the client's share (429) and the listener's limit (503). A listener that can end an idle
session to make room (Streamable HTTP) is asked first; a refusal carries Retry-After.

Host and Origin are parsed strictly: `127.0.0.1:1@evil.com` is no host, `http://localhost:3000` is not the
listener's own origin. Sessions are counted per client (`client_key`: the token's principal, or the peer's
address when there is no auth, every loopback address as one), so one client cannot take every slot. The
address is the client's own, told by a trusted proxy only (`proxies`, client_address.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import attrs

from actors.config import HttpSettings, WebSocketSettings
from actors.frontends.auth import Principal, Refused
from actors.frontends.client_address import TrustedProxies
from actors.policy.context import LOOPBACK_CLIENT as LOOPBACK_CLIENT
from actors.policy.context import client_key as key_of_client

if TYPE_CHECKING:
    from actors.frontends.bearer import BearerRules  # jwt, cryptography: imported with auth only
    from actors.identity.keys import IssuerKeys
    from actors.routes import Routes

# reg-name (letters, digits, '-', '.') or IPv4, or an IPv6 literal in brackets; then an optional port.
_HOST: Final = re.compile(r"(?P<name>[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::(?P<port>[0-9]{1,5}))?")
_ORIGIN: Final = re.compile(r"(?P<scheme>https?)://" + _HOST.pattern, re.ASCII)
LOOPBACK_NAMES: Final = frozenset({"127.0.0.1", "localhost", "::1"})
# A refused client may try again after this long: a busy session's call or stream usually ends by then,
# and a client that retries sooner only adds load to a full listener.
RETRY_AFTER_S: Final = 5

# Ends the least recently active idle session of a client (None: of any client) to make room for a new
# one, the limit reached named for the log ("max_sessions = 1000"); True when it ended one.
MakeRoom = Callable[[str | None, str], bool]


def parse_host(value: str) -> tuple[str, int | None] | None:
    """`Localhost:8765` -> ("localhost", 8765); `[::1]` -> ("::1", None); anything else -> None."""
    match = _HOST.fullmatch(value)
    if match is None:
        return None
    port = int(match["port"]) if match["port"] else None
    if port is not None and port > 65535:
        return None
    return match["name"].strip("[]").lower(), port


def parse_origin(value: str) -> tuple[str, str, int] | None:
    """`http://localhost:8766` -> ("http", "localhost", 8766), default ports filled in; else None."""
    match = _ORIGIN.fullmatch(value)
    if match is None:
        return None
    scheme = match["scheme"]
    port = int(match["port"]) if match["port"] else (443 if scheme == "https" else 80)
    if port > 65535:
        return None
    return scheme, match["name"].strip("[]").lower(), port


def bearer_rules(
    settings: WebSocketSettings | HttpSettings, kept: dict[str, IssuerKeys] | None = None
) -> BearerRules | None:
    """The listener's token rules when it checks tokens (frontends/bearer.py, imported only then)."""
    if not settings.checks_tokens:
        return None
    from actors.frontends.bearer import BearerRules

    return BearerRules.of(settings, kept)


@attrs.define(kw_only=True)
class Admission:
    """Who may reach one listener: its path, Host, Origin and bearer token, and the sessions per client."""

    path: str
    bearer: BearerRules | None  # None: no token is asked for
    allowed_hosts: frozenset[str]
    allowed_origins: frozenset[str]
    max_sessions: int
    per_client: int
    port: int = 0  # the listener's own port, once bound: pages it serves may call it
    proxies: TrustedProxies = attrs.field(factory=TrustedProxies)  # whose word on a client's address counts
    routes: Routes | None = None  # [[routes]]: their paths are served too (set by the gateway)
    _sessions: Counter[str] = attrs.field(factory=Counter)

    @classmethod
    def of(cls, settings: WebSocketSettings | HttpSettings) -> Admission:
        return cls(
            path=settings.path,
            bearer=bearer_rules(settings),
            allowed_hosts=frozenset(h if h == "*" else h.strip("[]").lower() for h in settings.allowed_hosts),
            allowed_origins=frozenset(settings.allowed_origins),
            max_sessions=settings.max_sessions,
            per_client=settings.max_sessions_per_client,
            proxies=TrustedProxies.of(settings),
        )

    def update(self, settings: WebSocketSettings | HttpSettings) -> None:
        """A reload's rules for the connections that come after; the sessions counted so far stay counted."""
        rules = Admission.of(settings)
        self.path, self.max_sessions, self.per_client = rules.path, rules.max_sessions, rules.per_client
        kept = self.bearer.keys if self.bearer is not None else None
        url = self.bearer.url if self.bearer is not None else ""
        self.bearer = bearer_rules(settings, kept)
        if self.bearer is not None:
            self.bearer.bound(url)
        self.allowed_hosts, self.allowed_origins = rules.allowed_hosts, rules.allowed_origins
        self.proxies = rules.proxies

    async def check(self, path: str, host: str | None, headers: dict[str, str]) -> Principal | None:
        """Path, Host, Origin, then the bearer token: its principal when auth is on, else None; Refused for
        a connection or request that may not go on. `headers` has lower-case names."""
        if path != self.path and (self.routes is None or self.routes.at(path) is None):
            raise Refused(404, f"no MCP endpoint at {path}; try {self.path}")
        self.check_host(host)
        self.check_origin(headers.get("origin"))
        if self.bearer is None:
            return None
        return await self.bearer.principal(headers, self.routes.at(path) if self.routes is not None else None)

    def check_host(self, host: str | None) -> None:
        """421 unless the Host header names an allowed host (DNS rebinding protection)."""
        if "*" in self.allowed_hosts:
            return
        parsed = parse_host(host or "")
        if parsed is None or parsed[0] not in self.allowed_hosts:
            raise Refused(421, f"Host {host or '(none)'} is not allowed (DNS rebinding protection)")

    def check_origin(self, origin: str | None) -> None:
        """403 unless there is no Origin (not a browser), it is listed, or it is a page of this listener
        itself (an allowed host on the listener's own port)."""
        if origin is None or origin in self.allowed_origins:
            return
        parsed = parse_origin(origin)
        if parsed is not None and "*" not in self.allowed_hosts:
            _, host, port = parsed
            if host in self.allowed_hosts and port == self.port:
                return
        raise Refused(403, f"origin {origin} is not allowed")

    def open_session(
        self,
        principal: Principal | None,
        address: str,
        open_now: int,
        make_room: MakeRoom | None = None,
    ) -> str:
        """Count one more session, with `open_now` open on this listener: the client it counts against.
        At the client's share, `make_room` may end one of the client's idle sessions first; at the
        listener's limit, one of the client's own, else any client's. When it cannot: 429 (the client's
        share) or 503 (the listener's limit), with Retry-After."""
        client = client_key(principal, address)
        if self._sessions[client] >= self.per_client:
            limit = f"max_sessions_per_client = {self.per_client}"
            if make_room is None or not make_room(client, limit):
                busy = " and each is busy" if make_room is not None else ""
                reason = f"this client already has {self.per_client} sessions{busy} (max_sessions_per_client)"
                raise _refusal(429, reason)
            open_now -= 1
        if open_now >= self.max_sessions:
            limit = f"max_sessions = {self.max_sessions}"
            if make_room is None or not (make_room(client, limit) or make_room(None, limit)):
                raise _refusal(503, f"the gateway is at its limit of {self.max_sessions} sessions")
        self._sessions[client] += 1
        return client

    def close_session(self, client: str) -> None:
        self._sessions[client] -= 1
        if self._sessions[client] <= 0:
            del self._sessions[client]


def _refusal(status: int, reason: str) -> Refused:
    retry = [(b"retry-after", str(RETRY_AFTER_S).encode())]
    return Refused(status, f"{reason}; try again in {RETRY_AFTER_S}s", retry)


def client_key(principal: Principal | None, address: str) -> str:
    """Whom a session is counted against: policy.context.client_key, the one key of a client (its token's
    issuer and subject, else its address, every loopback address as one), which [limits] count by too."""
    if principal is None:
        return key_of_client(None, None, address)
    return key_of_client(principal.issuer, principal.subject, address)
