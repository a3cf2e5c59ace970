"""Whose address a request comes from, behind a load balancer: the client's, told by a trusted proxy.

A listener's `trusted_proxies` (addresses and CIDR blocks) are the only peers whose word is taken. With
`proxy_protocol = true` that word is the PROXY header each of their connections starts with
(proxy_protocol.py); else it is the `forwarded_header` of each request (`X-Forwarded-For`, or RFC 7239
`Forwarded`'s `for=`). A header lists the hops from the client to the proxy, each proxy appending the one it
heard from: the client is the rightmost hop that is not a trusted proxy (a client can write any hops to the
left of that, never that one). Anyone else is known by the address it connects from, whatever it sends. The
address is given in one spelling (IPv4-mapped IPv6 as IPv4, IPv6 compressed), so every table keyed by it
(sessions per client, [limits], policy, the audit and the log) sees one client per address.

A header the client's hop cannot be read from is refused (400), never guessed past.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from typing import Final

import attrs

from actors.config import ListenerSettings
from actors.config.listener_schema import ForwardedHeader
from actors.frontends.auth import Refused
from actors.protocol.codec import clip

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_FORWARDED_BYTES: Final = 4096  # a header naming more hops than this holds is no proxy's doing
# RFC 7239 section 6: an obfuscated node, or a proxy that does not know the client
_OBFUSCATED: Final = re.compile(r"_[A-Za-z0-9._-]{1,64}|unknown", re.ASCII)
_PAIR: Final = re.compile(r'\s*([A-Za-z0-9!#$%&\'*+.^_`|~-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;,"\s]*)\s*')


def ip_of(text: str) -> IP | None:
    """`text` as an address (IPv4-mapped IPv6 as IPv4), or None when it is none."""
    try:
        ip: IP = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


@attrs.frozen
class TrustedProxies:
    """Owns: a listener's trusted proxies and where their word on the client's address is read."""

    networks: tuple[Network, ...] = ()
    proxy_protocol: bool = False
    header: ForwardedHeader = ForwardedHeader.X_FORWARDED_FOR

    @classmethod
    def of(cls, settings: ListenerSettings) -> TrustedProxies:
        networks = tuple(ipaddress.ip_network(text, strict=False) for text in settings.trusted_proxies)
        return cls(networks, settings.proxy_protocol, settings.forwarded_header)

    def trusts(self, address: str) -> bool:
        ip = ip_of(address)
        return ip is not None and any(ip in network for network in self.networks)

    def wants_proxy_header(self, peer: str) -> bool:
        """A connection from `peer` must start with a PROXY header."""
        return self.proxy_protocol and self.trusts(peer)

    def client_of(self, peer: str, headers: Iterable[tuple[bytes, bytes]]) -> str:
        """The client's address for a request from `peer` (the connection's, or its PROXY header's) with
        `headers`; Refused (400) when a trusted proxy's header does not say it readably."""
        if self.proxy_protocol or not self.trusts(peer):
            return spelled(peer)
        name = self.header.value.encode()
        values = [value.decode("latin-1") for key, value in headers if key.lower() == name]
        if not values:
            return spelled(peer)  # the proxy's own request (a health check)
        text = ",".join(values)
        if len(text) > MAX_FORWARDED_BYTES:
            raise Refused(400, f"the {self.header.value} header is over {MAX_FORWARDED_BYTES} bytes")
        named = self.header is ForwardedHeader.FORWARDED
        hops = forwarded_hops(text) if named else text.split(",")
        return self._rightmost_untrusted(hops, named=named)

    def _rightmost_untrusted(self, hops: Sequence[str], *, named: bool) -> str:
        """Read from the right, each hop until the first that is no trusted proxy: what a client wrote to
        the left of that is never read."""
        for hop in reversed(hops):
            node = _node(hop, named=named)
            if not self.trusts(node):
                return node
        return _node(hops[0], named=named)  # every hop a trusted proxy: the first is the client


def spelled(address: str) -> str:
    """An address in its one spelling; anything else (no address known, "?") as it is."""
    ip = ip_of(address)
    return address if ip is None else ip.compressed


def _node(text: str, *, named: bool) -> str:
    """One hop's address: `1.2.3.4`, `1.2.3.4:80`, `[::1]`, `[::1]:80`, `::1` (and, `named`, an obfuscated
    node or `unknown`); Refused (400) for anything else."""
    value = text.strip()
    host, port = value, ""
    if value.startswith("["):
        host, bracket, port = value[1:].partition("]")
        if not bracket or (port and not port.startswith(":")):
            host = ""
        port = port[1:]
    elif value.count(":") == 1:  # IPv4 with a port
        host, _, port = value.partition(":")
    if port and not (port.isascii() and port.isdigit() and len(port) <= 5 and int(port) <= 65535):
        host = ""
    ip = ip_of(host) if "%" not in host else None  # a zone is no client's address
    if ip is not None:
        return ip.compressed
    if named and _OBFUSCATED.fullmatch(value):
        return value
    raise Refused(400, f"a trusted proxy's header names no client address: {clip(value)!r}")


def forwarded_hops(text: str) -> list[str]:
    """RFC 7239 `Forwarded: for=192.0.2.60;proto=http, for="[2001:db8::17]:4711"` -> the `for` of each
    element as written (unquoted), first first; an element without one is a hop nobody named
    ("unknown"); one that is no list of pairs is left as it is, refused if it is ever read."""
    hops = []
    for element in _elements(text):
        node = "unknown"
        for pair in element.split(";") if element.strip() else ():
            match = _PAIR.fullmatch(pair)
            if match is None:
                node = element
                break
            if match[1].lower() == "for":
                value = match[2]
                node = re.sub(r"\\(.)", r"\1", value[1:-1]) if value.startswith('"') else value
        hops.append(node)
    return hops


def _elements(text: str) -> list[str]:
    """The comma-separated elements of a Forwarded header, commas inside quoted strings kept."""
    elements, current, quoted, escaped = [], [], False, False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\" and quoted:
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            elements.append("".join(current))
            current = []
            continue
        current.append(char)
    if quoted:
        raise Refused(400, "the Forwarded header has an unclosed quoted string")
    elements.append("".join(current))
    return elements
