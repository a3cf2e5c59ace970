"""The PROXY protocol header (HAProxy's, versions 1 and 2) a trusted proxy starts each connection with: the
address of the client it accepted. Read only from a listener's trusted_proxies when proxy_protocol is on,
and then required of them.

Exactly the header's bytes are read (never into the HTTP that follows), within PROXY_HEADER_S: version 2 is
a 16-byte head then its stated length (at most MAX_V2_BODY), version 1 one text line of at most 107 bytes.
A header that is malformed, too long, late or of the wrong family is a ProxyHeaderError naming why; the
listener answers it 400 and closes. A LOCAL command (the proxy's own health check) and the UNSPEC and UNIX
families carry no client address: the connection is the proxy's own.
"""

from __future__ import annotations

import ipaddress
import struct
from typing import Final

import trio

from actors.frontends.client_address import spelled

V2_SIGNATURE: Final = b"\r\n\r\n\x00\r\nQUIT\n"
V1_PREFIX: Final = b"PROXY "
MAX_V1: Final = 107  # the longest line version 1 allows, CRLF included
MAX_V2_BODY: Final = 4096  # addresses and TLVs; a proxy sends tens of bytes (HAProxy: 12 or 36, plus TLVs)
PROXY_HEADER_S: Final = 5.0  # a trusted proxy writes its header at once
_INET: Final = {0x11: (12, "!4s4sHH"), 0x21: (36, "!16s16sHH")}  # TCP over IPv4, IPv6: bytes, layout
_UNSPEC_OR_UNIX: Final = frozenset({0x00, 0x31, 0x32})

Peer = tuple[str, int]


class ProxyHeaderError(Exception):
    """A connection that should start with a PROXY header and does not start with a good one."""


async def read_proxy_header(stream: trio.abc.ReceiveStream) -> Peer | None:
    """The client the header names (address in its one spelling, port), or None when it names none (the
    proxy's own connection); ProxyHeaderError when it is missing, malformed or late."""
    with trio.move_on_after(PROXY_HEADER_S):
        first = await _read_exactly(stream, len(V1_PREFIX))
        if first == V1_PREFIX:
            return _v1(await _read_line(stream, first))
        if first == V2_SIGNATURE[: len(first)]:
            head = first + await _read_exactly(stream, 16 - len(first))
            return await _v2(stream, head)
        raise ProxyHeaderError("the connection does not start with a PROXY protocol header")
    raise ProxyHeaderError(f"no whole PROXY protocol header within {PROXY_HEADER_S:g}s")


async def _read_exactly(stream: trio.abc.ReceiveStream, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = await stream.receive_some(size - len(data))
        if not chunk:
            raise ProxyHeaderError("the connection ended inside its PROXY protocol header")
        data += chunk
    return data


async def _read_line(stream: trio.abc.ReceiveStream, start: bytes) -> bytes:
    """Version 1's line, a byte at a time (so nothing after it is read), up to its CRLF."""
    line = start
    while not line.endswith(b"\r\n"):
        if len(line) >= MAX_V1:
            raise ProxyHeaderError(f"the PROXY protocol v1 line is longer than {MAX_V1} bytes")
        line += await _read_exactly(stream, 1)
    return line


def _v1(line: bytes) -> Peer | None:
    """`PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\\r\\n`; `PROXY UNKNOWN ...`: no address."""
    try:
        parts = line[:-2].decode("ascii").split(" ")
    except UnicodeDecodeError:
        raise ProxyHeaderError("the PROXY protocol v1 line is not ASCII") from None
    if len(parts) >= 2 and parts[1] == "UNKNOWN":
        return None
    if len(parts) != 6 or parts[1] not in ("TCP4", "TCP6"):
        raise ProxyHeaderError("the PROXY protocol v1 line is not PROXY TCP4|TCP6 SRC DST SPORT DPORT")
    _, family, source, _destination, port, _ = parts
    try:
        ip = ipaddress.ip_address(source)
    except ValueError:
        raise ProxyHeaderError("the PROXY protocol v1 line's source is no address") from None
    if ip.version != (4 if family == "TCP4" else 6) or not _is_port(port) or not _is_port(parts[5]):
        raise ProxyHeaderError("the PROXY protocol v1 line's address or ports do not match its family")
    return spelled(str(ip)), int(port)


def _is_port(text: str) -> bool:
    return (
        text.isascii() and text.isdigit() and (text == "0" or not text.startswith("0")) and int(text) < 65536
    )


async def _v2(stream: trio.abc.ReceiveStream, head: bytes) -> Peer | None:
    if head[:12] != V2_SIGNATURE:
        raise ProxyHeaderError("the connection does not start with a PROXY protocol header")
    version, command, family = head[12] >> 4, head[12] & 0x0F, head[13]
    (length,) = struct.unpack("!H", head[14:])
    if version != 2 or command > 1:
        raise ProxyHeaderError(f"PROXY protocol v2: version {version}, command {command} unknown")
    if length > MAX_V2_BODY:
        raise ProxyHeaderError(f"PROXY protocol v2: {length} bytes of addresses, over {MAX_V2_BODY}")
    body = await _read_exactly(stream, length)
    if command == 0 or family in _UNSPEC_OR_UNIX:  # LOCAL: the proxy's own connection
        return None
    if family not in _INET:
        raise ProxyHeaderError(
            f"PROXY protocol v2: address family {family:#04x} is not TCP over IPv4 or IPv6"
        )
    need, layout = _INET[family]
    if length < need:
        raise ProxyHeaderError(f"PROXY protocol v2: {length} bytes, too few for its addresses ({need})")
    source, _destination, port, _ = struct.unpack(layout, body[:need])
    return spelled(str(ipaddress.ip_address(source))), port
