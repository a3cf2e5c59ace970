"""Behind a load balancer (issue #34, point 8): the client's own address, told by a trusted proxy only, keys
max_sessions_per_client, [limits] and the log on both listeners. A PROXY protocol header (v2, v1) is taken
from a trusted proxy and required of it; X-Forwarded-For from a trusted peer, its rightmost untrusted hop;
anyone else is known by the address it connects from. Hostile headers get a clean 400 and the listener
serves on. Raw sockets write the headers a proxy would (tests/fleet/test_behind_haproxy.py puts a real
HAProxy in front); the gateway runs in this process with a real backend process behind it."""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import httpx2
import pytest
import trio
from support import DEADLINE_S, backend_entry, captured_logs, running, with_http, with_websocket, write_config
from trio_websocket import ConnectionRejected, HandshakeError, WebSocketConnection, wrap_client_stream

from actors.frontends.proxy_protocol import V2_SIGNATURE

TRUSTED: Final = ["127.0.0.1/32"]  # the proxy: connections from 127.0.0.2 are a client's own


def proxy_v2(client: str, port: int) -> bytes:
    """What HAProxy's send-proxy-v2 writes for a TCP client (over IPv6 when `client` is an IPv6 address)."""
    source = ipaddress.ip_address(client)
    family, destination = (b"\x11", "127.0.0.1") if source.version == 4 else (b"\x21", "::1")
    body = source.packed + ipaddress.ip_address(destination).packed + struct.pack("!HH", port, 8765)
    return V2_SIGNATURE + b"\x21" + family + struct.pack("!H", len(body)) + body


def proxy_v1(client: str, port: int) -> bytes:
    return f"PROXY TCP4 {client} 127.0.0.1 {port} 8765\r\n".encode()


async def connect_from(source: str, port: int) -> trio.SocketStream:
    sock = trio.socket.socket()
    await sock.bind((source, 0))
    await sock.connect(("127.0.0.1", port))
    return trio.SocketStream(sock)


@asynccontextmanager
async def websocket(
    port: int, header: bytes = b"", source: str = "127.0.0.1"
) -> AsyncIterator[WebSocketConnection]:
    """A WebSocket handshake on a connection from `source` that starts with `header`."""
    stream = await connect_from(source, port)
    await stream.send_all(header)
    async with trio.open_nursery() as nursery:
        connection = await wrap_client_stream(nursery, stream, "127.0.0.1", "/mcp", subprotocols=["mcp"])
        yield connection
        await connection.aclose()


async def handshake_status(port: int, header: bytes, source: str = "127.0.0.1") -> int | str:
    """The status a handshake is refused with (101: accepted), or "no handshake" when it failed without one
    (the library raises either in its reader task, in the nursery it is given: in a group)."""
    refusal: int | str = 101
    try:
        async with websocket(port, header, source):
            pass
    except* ConnectionRejected as rejected:
        refusal = rejected.exceptions[0].status_code  # type: ignore[attr-defined]
    except* (HandshakeError, trio.BrokenResourceError):
        refusal = "no handshake"
    return refusal


async def test_websocket_sessions_are_counted_per_client_behind_a_proxy_protocol_proxy(
    tmp_path: Path,
) -> None:
    config = with_websocket(
        write_config(tmp_path / "g.toml", [backend_entry("t", "--only=echo")]),
        host="0.0.0.0",
        trusted_proxies=TRUSTED,
        proxy_protocol=True,
        max_sessions_per_client=1,
    )
    with captured_logs("INFO") as lines:
        async with running(config) as gateway:
            assert gateway.websocket_url is not None
            port = int(gateway.websocket_url.rsplit(":", 1)[1].split("/")[0])
            with trio.fail_after(DEADLINE_S):
                async with (
                    websocket(port, proxy_v2("203.0.113.1", 1111)),
                    websocket(port, proxy_v2("203.0.113.2", 2222)),  # another client: its own share
                    websocket(port, b"", source="127.0.0.2"),  # no proxy: its own address, its own share
                ):
                    assert await handshake_status(port, proxy_v1("203.0.113.1", 3333)) == 429  # v1: the same
                    assert await handshake_status(port, proxy_v2("::ffff:203.0.113.1", 4)) == 429
                    assert await handshake_status(port, b"") == 400  # the proxy must send its header
                    hostile = V2_SIGNATURE + b"\x21\x11\xff\xff"
                    assert await handshake_status(port, hostile) == 400
                    # an untrusted peer's PROXY header is not taken: it is no HTTP either
                    untrusted = await handshake_status(port, proxy_v2("203.0.113.3", 5), source="127.0.0.2")
                    assert untrusted != 101
                    assert await handshake_status(port, proxy_v2("203.0.113.3", 6)) == 101  # serving on
    assert any("connected from 203.0.113.1:1111" in line for line in lines)
    assert any("refused /mcp from 203.0.113.1:3333: HTTP 429" in line for line in lines)
    assert any("from 127.0.0.1:" in line and "HTTP 400" in line and "PROXY" in line for line in lines)


def xff(value: str) -> dict[str, str]:
    return {"x-forwarded-for": value, "content-type": "application/json", "accept": "application/json"}


PING: Final = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


async def test_http_requests_are_limited_per_client_named_by_a_trusted_peers_x_forwarded_for(
    tmp_path: Path,
) -> None:
    config = with_http(
        write_config(tmp_path / "g.toml", [backend_entry("t", "--only=echo")]),
        host="0.0.0.0",
        trusted_proxies=TRUSTED,
    )
    config.write_text(config.read_text() + "[limits]\nhttp_requests_per_s = 0.001\nhttp_burst = 1\n")
    alias = httpx2.AsyncHTTPTransport(local_address="127.0.0.2")
    with captured_logs("WARNING") as lines:
        async with (
            running(config) as gateway,
            httpx2.AsyncClient() as proxy,
            httpx2.AsyncClient(transport=alias) as direct,
        ):
            assert gateway.http_url is not None
            url = gateway.http_url.replace("0.0.0.0", "127.0.0.1")

            async def status(client: httpx2.AsyncClient, forwarded: str) -> int:
                return (await client.post(url, json=PING, headers=xff(forwarded))).status_code

            assert await status(proxy, "198.51.100.7") != 429
            assert await status(proxy, "198.51.100.7") == 429  # the same client, over its rate
            assert await status(proxy, "198.51.100.8") != 429  # another client behind the same proxy
            assert await status(proxy, "6.6.6.6, 198.51.100.7") == 429  # what it wrote itself is not read
            assert await status(proxy, "::ffff:198.51.100.8") == 429  # a second spelling of .8
            assert await status(proxy, "198.51.100.9\x1b[2J") == 400  # a hop that is no address
            assert await status(direct, "198.51.100.10") != 429  # an untrusted peer: its own address
            assert await status(direct, "198.51.100.11") == 429  # its header never counts
    assert any("from 198.51.100.7:0: HTTP 429" in line for line in lines)
    assert any("HTTP 400" in line and "names no client address" in line for line in lines)


async def test_a_trusted_proxys_proxy_header_names_the_http_client_and_a_bad_one_is_refused(
    tmp_path: Path,
) -> None:
    config = with_http(
        write_config(tmp_path / "g.toml", [backend_entry("t", "--only=echo")]),
        trusted_proxies=TRUSTED,
        proxy_protocol=True,
    )
    request = b"GET /nowhere HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
    with captured_logs("WARNING") as lines:
        async with running(config) as gateway:
            assert gateway.http_url is not None
            port = int(gateway.http_url.rsplit(":", 1)[1].split("/")[0])
            answers: list[bytes] = []
            for header in (proxy_v2("203.0.113.9", 999), b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x01", b""):
                with trio.fail_after(DEADLINE_S):
                    stream = await connect_from("127.0.0.1", port)
                    async with stream:
                        await stream.send_all(header + request)
                        answers.append(await stream.receive_some(65536))
    assert answers[0].startswith(b"HTTP/1.1 404")  # served: refused by its path, as the client it names
    assert answers[1].startswith(b"HTTP/1.1 400") and b"too few" in answers[1]
    assert answers[2].startswith(b"HTTP/1.1 400") and b"does not start with a PROXY" in answers[2]
    assert any("refused GET /nowhere from 203.0.113.9:999" in line for line in lines)


def test_listener_settings_refuse_a_proxy_protocol_without_trusted_proxies(tmp_path: Path) -> None:
    from actors.config import ConfigError, load_config

    config = with_http(write_config(tmp_path / "g.toml", [backend_entry("t")]), proxy_protocol=True)
    with pytest.raises(ConfigError, match=r"http\.proxy_protocol: needs trusted_proxies"):
        load_config(config)
    bad: dict[str, Any] = {"trusted_proxies": ["10.0.0.0/33"]}
    with pytest.raises(ConfigError, match=r"trusted_proxies\[0\]: '10.0.0.0/33' is not"):
        load_config(with_websocket(write_config(tmp_path / "w.toml", [backend_entry("t")]), **bad))
