"""Admission rules both network listeners apply before a connection or request reaches a session.

Host and Origin are parsed strictly: `127.0.0.1:1@evil.com` is no host, `http://localhost:3000` is not the
listener's own origin. Sessions are counted per client (the token's subject, or the peer's address when
there is no auth), so one client cannot take every slot.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Final

import attrs

from actors.frontends.auth import Refused

# reg-name (letters, digits, '-', '.') or IPv4, or an IPv6 literal in brackets; then an optional port.
_HOST: Final = re.compile(r"(?P<name>[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::(?P<port>[0-9]{1,5}))?")
_ORIGIN: Final = re.compile(r"(?P<scheme>https?)://" + _HOST.pattern, re.ASCII)
LOOPBACK_NAMES: Final = frozenset({"127.0.0.1", "localhost", "::1"})


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


@attrs.define
class Admission:
    """Host, Origin and the per-client session count for one listener."""

    allowed_hosts: frozenset[str]
    allowed_origins: frozenset[str]
    per_client: int
    port: int = 0  # the listener's own port, once bound: pages it serves may call it
    _sessions: Counter[str] = attrs.field(factory=Counter)

    @classmethod
    def of(cls, allowed_hosts: Iterable[str], allowed_origins: Iterable[str], per_client: int) -> Admission:
        hosts = frozenset(h if h == "*" else h.strip("[]").lower() for h in allowed_hosts)
        return cls(hosts, frozenset(allowed_origins), per_client)

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

    def open_session(self, client: str) -> None:
        """Count one more session for `client`, or 429 when it has its share."""
        if self._sessions[client] >= self.per_client:
            raise Refused(
                429, f"this client already has {self.per_client} sessions (max_sessions_per_client)"
            )
        self._sessions[client] += 1

    def close_session(self, client: str) -> None:
        self._sessions[client] -= 1
        if self._sessions[client] <= 0:
            del self._sessions[client]


def client_key(subject: str | None, peer_host: str) -> str:
    """Whom a session is counted against: its token's subject, else the address it comes from."""
    return f"subject:{subject}" if subject is not None else f"address:{peer_host}"
