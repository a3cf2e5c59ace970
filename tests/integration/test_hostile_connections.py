"""Bytes an attacker sends to the network listeners end their own connection, never the gateway.

Each example of the hardening issue is sent raw over loopback to a gateway in this process, with a session
open beside it; afterwards that session and new ones on both listeners are still served. A hypothesis test
then throws random and half-valid bytes at both ports of a gateway subprocess and checks that it still
answers a call.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import h2.config
import h2.connection
import httpx2
import orjson
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loguru import logger
from support import (
    DEADLINE_S,
    INITIALIZE,
    backend_entry,
    free_port,
    running,
    serving_gateway,
    with_http,
    with_websocket,
    write_config,
)
from trio_websocket import open_websocket_url

from actors.gateway import Gateway

WS_KEY: Final = b"dGhlIHNhbXBsZSBub25jZQ=="
ACCEPT_BOTH: Final = {"accept": "application/json, text/event-stream"}


def upgrade(path: bytes = b"/mcp", **headers: bytes) -> bytes:
    """A WebSocket upgrade request with `headers` replacing or adding to the usual ones."""
    fields = {
        b"Host": b"127.0.0.1",
        b"Upgrade": b"websocket",
        b"Connection": b"Upgrade",
        b"Sec-WebSocket-Key": WS_KEY,
        b"Sec-WebSocket-Version": b"13",
    }
    fields.update({name.replace("_", "-").encode(): value for name, value in headers.items()})
    lines = [b"GET " + path + b" HTTP/1.1", *(name + b": " + value for name, value in fields.items())]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def gateway_config(tmp_path: Path) -> Path:
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo")])
    return with_http(with_websocket(config))


def port_of(url: str | None) -> int:
    assert url is not None
    return int(url.split(":")[2].split("/")[0])


async def send_raw(port: int, data: bytes) -> bytes:
    """Send `data` and read until the gateway closes the connection (it must, or answer and wait)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    received = b""
    with trio.move_on_after(2.0):  # a listener may wait for more bytes; what matters is what follows
        try:
            await stream.send_all(data)
            while chunk := await stream.receive_some(65536):
                received += chunk
        except trio.BrokenResourceError:
            pass
    await stream.aclose()
    return received


def echo_call(text: str) -> dict[str, Any]:
    params = {"name": "echo", "arguments": {"text": text}}
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}


async def ws_echo(url: str, text: str) -> str:
    async with open_websocket_url(url, subprotocols=["mcp"]) as connection:
        await connection.send_message(orjson.dumps(INITIALIZE).decode())
        assert "result" in orjson.loads(await connection.get_message())
        await connection.send_message('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        await connection.send_message(orjson.dumps(echo_call(text)).decode())
        while "id" not in (answer := orjson.loads(await connection.get_message())):
            pass
        return str(answer["result"]["content"][0]["text"])


async def http_echo(url: str, text: str) -> str:
    async with httpx2.AsyncClient() as http:
        opened = await http.post(url, json=INITIALIZE, headers=ACCEPT_BOTH)
        session = {**ACCEPT_BOTH, "mcp-session-id": opened.headers["mcp-session-id"]}
        await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        answer = await http.post(url, json=echo_call(text), headers=session)
        return str(answer.json()["result"]["content"][0]["text"])


async def still_serves(ws_url: str, http_url: str) -> None:
    with trio.fail_after(DEADLINE_S):
        assert await ws_echo(ws_url, "ws still here") == "ws still here"
        assert await http_echo(http_url, "http still here") == "http still here"


@asynccontextmanager
async def attacked(tmp_path: Path) -> AsyncIterator[tuple[Gateway, Any]]:
    """A gateway with a WebSocket session open through the attack; yields it and that session."""
    async with running(gateway_config(tmp_path)) as gateway:
        assert gateway.websocket_url is not None
        async with open_websocket_url(gateway.websocket_url, subprotocols=["mcp"]) as bystander:
            await bystander.send_message(orjson.dumps(INITIALIZE).decode())
            assert "result" in orjson.loads(await bystander.get_message())
            yield gateway, bystander
            await bystander.send_message('{"jsonrpc": "2.0", "id": 9, "method": "ping"}')
            with trio.fail_after(DEADLINE_S):
                assert orjson.loads(await bystander.get_message()) == {
                    "jsonrpc": "2.0",
                    "id": 9,
                    "result": {},
                }
        assert gateway.http_url is not None
        await still_serves(gateway.websocket_url, gateway.http_url)


@pytest.mark.parametrize("listener", ["websocket", "http"])
@pytest.mark.parametrize("header", ["Sec-WebSocket-Protocol", "Sec-WebSocket-Extensions", "Connection"])
async def test_a_non_ascii_byte_in_an_upgrade_header_ends_only_that_connection(
    tmp_path: Path, listener: str, header: str
) -> None:
    async with attacked(tmp_path) as (gateway, _):
        url = gateway.websocket_url if listener == "websocket" else gateway.http_url
        value = b"Upgrade, \xff" if header == "Connection" else b"\xff"
        await send_raw(port_of(url), upgrade(**{header: value}))


def h2_request(headers: list[tuple[bytes, bytes]]) -> bytes:
    """An HTTP/2 prior-knowledge connection preface and one request whose headers h2 does not check."""
    config = h2.config.H2Configuration(
        client_side=True, validate_outbound_headers=False, normalize_outbound_headers=False
    )
    connection = h2.connection.H2Connection(config)
    connection.initiate_connection()
    connection.send_headers(1, headers, end_stream=False)
    return connection.data_to_send()


async def test_http2_with_a_non_ascii_path_ends_only_that_connection(tmp_path: Path) -> None:
    async with attacked(tmp_path) as (gateway, _):
        request = [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":authority", b"127.0.0.1"),
            (b":path", b"/\xff"),
        ]
        await send_raw(port_of(gateway.http_url), h2_request(request))


async def test_http2_websocket_connect_with_a_non_ascii_subprotocol_ends_only_that_connection(
    tmp_path: Path,
) -> None:
    async with attacked(tmp_path) as (gateway, _):
        request = [
            (b":method", b"CONNECT"),
            (b":protocol", b"websocket"),
            (b":scheme", b"http"),
            (b":authority", b"127.0.0.1"),
            (b":path", b"/mcp"),
            (b"sec-websocket-version", b"13"),
            (b"sec-websocket-protocol", b"\xff"),
        ]
        await send_raw(port_of(gateway.http_url), h2_request(request))


async def test_a_token_in_the_query_string_is_never_logged(tmp_path: Path) -> None:
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="DEBUG")
    try:
        async with attacked(tmp_path) as (gateway, _):
            await send_raw(
                port_of(gateway.websocket_url),
                upgrade(b"/mcp?access_token=eyJsecret", Origin=b"http://evil.example"),
            )
            for path in (b"/mcp", b"/elsewhere"):  # refused for its origin, and not found
                post = b"POST " + path + b"?access_token=eyJsecret HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                post += b"Origin: http://evil.example\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
                await send_raw(port_of(gateway.http_url), post)
    finally:
        logger.remove(sink)
    refused = [line for line in lines if "refused" in line]
    assert len(refused) == 3  # the upgrade, the POST to /mcp and the one to no endpoint
    assert all("eyJsecret" not in line and "access_token" not in line for line in lines)


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def initialize_post(host: bytes, origin: bytes | None) -> bytes:
    body = orjson.dumps(INITIALIZE)
    head = [
        b"POST /mcp HTTP/1.1",
        b"Host: " + host,
        b"Content-Type: application/json",
        b"Accept: application/json, text/event-stream",
        b"Content-Length: " + str(len(body)).encode(),
        b"Connection: close",
        *([b"Origin: " + origin] if origin else []),
    ]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


async def test_both_listeners_check_host_and_origin_alike_and_allow_their_own_ports_pages(
    tmp_path: Path,
) -> None:
    """DNS rebinding on either listener: a Host that is no loopback name (however it hides one) is 421,
    an Origin of another local port or of a hidden host is 403, and a page of the listener's own port (a
    port the system chose, here) is let in."""
    async with attacked(tmp_path) as (gateway, _):
        ports = {"websocket": port_of(gateway.websocket_url), "http": port_of(gateway.http_url)}
        for listener, port in ports.items():
            other = ports["http" if listener == "websocket" else "websocket"]
            cases = [
                (b"evil.example", None, 421),
                (b"127.0.0.1:1@evil.com", None, 421),
                (b"127.0.0.1", b"http://127.0.0.1:1@evil.com", 403),
                (b"127.0.0.1", f"http://localhost:{other}".encode(), 403),
                (b"127.0.0.1", f"http://localhost:{port}".encode(), 101 if listener == "websocket" else 200),
            ]
            for host, origin, status in cases:
                if listener == "websocket":
                    request = upgrade(Host=host, **({"Origin": origin} if origin else {}))
                else:
                    request = initialize_post(host, origin)
                assert status_of(await send_raw(port, request)) == status, (listener, host, origin)


@pytest.mark.parametrize(
    "twice",
    [
        (b"Authorization: Bearer first", b"Authorization: Bearer second"),
        (b"Origin: http://127.0.0.1", b"origin: http://evil.example"),
    ],
)
async def test_an_authorization_or_origin_header_sent_twice_is_refused_by_both_listeners(
    tmp_path: Path, twice: tuple[bytes, bytes]
) -> None:
    """A proxy in front may judge one copy while the gateway would read the other: 400 on either listener,
    before any token or origin is looked at."""
    async with attacked(tmp_path) as (gateway, _):
        for listener, request in (
            ("websocket", upgrade()),
            ("http", initialize_post(b"127.0.0.1", None)),
        ):
            head, _, body = request.partition(b"\r\n\r\n")
            doubled = head + b"\r\n" + b"\r\n".join(twice) + b"\r\n\r\n" + body
            port = port_of(gateway.websocket_url if listener == "websocket" else gateway.http_url)
            assert status_of(await send_raw(port, doubled)) == 400, listener
            once = head + b"\r\n" + twice[0] + b"\r\n\r\n" + body  # one copy: past this check
            assert status_of(await send_raw(port, once)) != 400, listener


# --- random bytes at a gateway process --------------------------------------------------------------------


@pytest.fixture(scope="module")
def gateway_process(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[subprocess.Popen[bytes], int, int]]:
    folder = tmp_path_factory.mktemp("fuzz")
    ws_port, http_port = free_port(), free_port()
    config = write_config(folder / "g.toml", [backend_entry("alpha", "--only=echo")])
    config.write_text(config.read_text() + f"\n[websocket]\nport = {ws_port}\n\n[http]\nport = {http_port}\n")
    log = folder / "gateway.log"
    argv = [sys.executable, "-m", "actors", "serve", "--config", str(config), "--log-file", str(log)]
    environment = {**os.environ, "MCP_GATEWAY_LOG_LEVEL": "INFO"}
    with serving_gateway(argv, ws_port, http_port, stderr=subprocess.DEVNULL, env=environment) as process:
        yield process, ws_port, http_port


HEADER_NAMES: Final = [
    b"Sec-WebSocket-Protocol",
    b"Sec-WebSocket-Extensions",
    b"Connection",
    b"Host",
    b"Origin",
]
header_value = st.binary(min_size=1, max_size=64).map(
    lambda value: value.replace(b"\r", b"").replace(b"\n", b"")
)
hostile_bytes = st.one_of(
    st.binary(max_size=4096),
    st.builds(lambda junk: b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + junk, st.binary(max_size=1024)),
    st.builds(lambda junk: upgrade()[: len(junk) % 120] + junk, st.binary(max_size=512)),
    st.builds(
        lambda name, value: upgrade(**{name.decode(): value}), st.sampled_from(HEADER_NAMES), header_value
    ),
    st.builds(lambda path: upgrade(b"/" + path.replace(b" ", b"")), st.binary(max_size=64)),
)


def send_and_close(port: int, data: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as connection:
        try:
            connection.sendall(data)
            connection.shutdown(socket.SHUT_WR)
            connection.settimeout(0.2)
            while connection.recv(65536):
                pass
        except OSError:
            pass  # refused, reset or still waiting for more: all fine, as long as the gateway stays up


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=hostile_bytes, to_http=st.booleans())
def test_random_bytes_at_both_ports_never_stop_the_gateway(
    gateway_process: tuple[subprocess.Popen[bytes], int, int], data: bytes, to_http: bool
) -> None:
    process, ws_port, http_port = gateway_process
    send_and_close(http_port if to_http else ws_port, data)
    assert process.poll() is None


def test_after_the_random_bytes_the_gateway_still_serves_a_call(
    gateway_process: tuple[subprocess.Popen[bytes], int, int],
) -> None:
    process, ws_port, http_port = gateway_process
    trio.run(still_serves, f"ws://127.0.0.1:{ws_port}/mcp", f"http://127.0.0.1:{http_port}/mcp")
    assert process.poll() is None


@pytest.mark.parametrize("target", [b"//evil.example/mcp", b"//[x/mcp", b"http://evil.example/mcp"])
async def test_a_request_target_that_is_no_plain_path_is_not_found(tmp_path: Path, target: bytes) -> None:
    async with attacked(tmp_path) as (gateway, _):
        answer = await send_raw(port_of(gateway.websocket_url), upgrade(target))
        assert answer.startswith(b"HTTP/1.1 404")  # not taken for /mcp, and answered, not dropped
