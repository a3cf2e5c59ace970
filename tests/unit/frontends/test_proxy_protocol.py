"""The PROXY protocol header a trusted proxy starts its connections with (issue #34, point 8): versions 1
and 2 read to their last byte and not one past it; a hostile, truncated, oversized or late header is a
ProxyHeaderError naming why, never a crash."""

from __future__ import annotations

import ipaddress
import struct

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.frontends.proxy_protocol import (
    MAX_V1,
    MAX_V2_BODY,
    V2_SIGNATURE,
    Peer,
    ProxyHeaderError,
    read_proxy_header,
)

AFTER = b"GET /mcp HTTP/1.1\r\n"  # what the connection carries after the header


def v2(command: int, family: int, body: bytes, *, version: int = 2, length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    return V2_SIGNATURE + bytes([version << 4 | command, family]) + struct.pack("!H", size) + body


def inet(source: str, port: int, destination: str = "127.0.0.1") -> bytes:
    src, dst = ipaddress.ip_address(source).packed, ipaddress.ip_address(destination).packed
    if len(src) != len(dst):
        dst = ipaddress.IPv6Address(f"::ffff:{destination}").packed
    return src + dst + struct.pack("!HH", port, 8766)


async def read(data: bytes) -> tuple[Peer | None, bytes]:
    """The header's peer, and what is left to read after it."""
    send, receive = trio.testing.memory_stream_one_way_pair()
    await send.send_all(data)
    await send.aclose()
    peer = await read_proxy_header(receive)
    rest = b""
    while chunk := await receive.receive_some():
        rest += chunk
    return peer, rest


@pytest.mark.parametrize(
    ("header", "peer"),
    [
        (b"PROXY TCP4 198.51.100.7 127.0.0.1 51234 8766\r\n", ("198.51.100.7", 51234)),
        (b"PROXY TCP6 2001:db8::7 ::1 51234 8766\r\n", ("2001:db8::7", 51234)),
        (b"PROXY TCP6 ::ffff:198.51.100.7 ::1 1 8766\r\n", ("198.51.100.7", 1)),  # one spelling
        (b"PROXY UNKNOWN\r\n", None),
        (b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n", None),
        (v2(1, 0x11, inet("198.51.100.7", 51234)), ("198.51.100.7", 51234)),
        (v2(1, 0x21, inet("2001:db8::7", 443, "::1")), ("2001:db8::7", 443)),
        (v2(1, 0x11, inet("198.51.100.7", 9) + b"\x04\x00\x02ab"), ("198.51.100.7", 9)),  # with a TLV
        (v2(0, 0x00, b""), None),  # LOCAL: the proxy's own health check
        (v2(0, 0x11, inet("198.51.100.7", 9)), None),
        (v2(1, 0x31, b"\x00" * 216), None),  # a UNIX socket: no address to key by
    ],
)
async def test_a_header_names_the_client_and_nothing_after_it_is_read(
    header: bytes, peer: Peer | None
) -> None:
    assert await read(header + AFTER) == (peer, AFTER)


@pytest.mark.parametrize(
    ("header", "why"),
    [
        (b"GET /mcp HTTP/1.1\r\n", "does not start with a PROXY"),
        (b"PROXY TCP4 198.51.100.7 127.0.0.1 1 2", "ended inside"),
        (b"PROXY TCP4 " + b"1" * MAX_V1 + b"\r\n", "longer than"),
        (b"PROXY TCP4 2001:db8::7 127.0.0.1 1 2\r\n", "do not match its family"),
        (b"PROXY TCP4 198.51.100.7 127.0.0.1 01 2\r\n", "do not match"),
        (b"PROXY TCP4 198.51.100.7 127.0.0.1 65536 2\r\n", "do not match"),
        (b"PROXY TCP4 evil 127.0.0.1 1 2\r\n", "no address"),
        (b"PROXY TCP4 \xff\xfe 127.0.0.1 1 2\r\n", "not ASCII"),
        (b"PROXY TCP5 1.2.3.4 127.0.0.1 1 2\r\n", "not PROXY TCP4"),
        (b"PROXY TCP4 1.2.3.4 127.0.0.1 1 2 3\r\n", "not PROXY TCP4"),
        (V2_SIGNATURE[:6] + b"XXXXXX" + b"\x21\x11\x00\x0c", "does not start with a PROXY"),
        (v2(1, 0x11, inet("1.2.3.4", 1), version=3), "version 3"),
        (v2(2, 0x11, inet("1.2.3.4", 1)), "command 2"),
        (v2(1, 0x11, b"", length=MAX_V2_BODY + 1), "over"),
        (v2(1, 0x11, b"\x00" * 4), "too few"),
        (v2(1, 0x12, inet("1.2.3.4", 1)), "not TCP"),  # UDP
        (v2(1, 0x41, inet("1.2.3.4", 1)), "not TCP"),
        (v2(1, 0x11, inet("1.2.3.4", 1), length=100), "ended inside"),
        (b"", "ended inside"),
    ],
)
async def test_a_bad_header_is_refused_naming_why(header: bytes, why: str) -> None:
    with pytest.raises(ProxyHeaderError, match=why):
        await read(header)


async def test_a_header_that_does_not_come_whole_in_time_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    await send.send_all(b"PROXY TCP4 198.")  # and then nothing, the connection left open
    with pytest.raises(ProxyHeaderError, match="within"):
        await read_proxy_header(receive)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([b"", V2_SIGNATURE, b"PROXY "]))
def test_any_bytes_are_a_peer_or_a_refusal_never_a_crash(data: bytes, start: bytes) -> None:
    async def main() -> None:
        try:
            peer, _ = await read(start + data)
        except ProxyHeaderError:
            return
        assert peer is None or (ipaddress.ip_address(peer[0]) and 0 <= peer[1] < 65536)

    trio.run(main)
