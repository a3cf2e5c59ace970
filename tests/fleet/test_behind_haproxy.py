"""A real HAProxy in front of both listeners, sending PROXY protocol v2 (issue #34, point 8): the gateway
sees each client's own address behind it, not HAProxy's, and keys [policy] (`source.address`) and its log
by it. HAProxy listens on sockets this test binds on port 0 and hands it (`bind fd@N`); official SDK
clients over Streamable HTTP and a WebSocket handshake connect to it from two loopback addresses."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import httpx2
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import (
    DEADLINE_S,
    LEGACY_ERA,
    backend_entry,
    captured_logs,
    running,
    tool_names,
    with_http,
    with_websocket,
    write_config,
)
from trio_websocket import wrap_client_stream

PROXIED: Final = {"trusted_proxies": ["127.0.0.1/32"], "proxy_protocol": True}
POLICY: Final = """
[policy]
default = "deny"
[[policy.rules]]
name = "only from 127.0.0.2"
when = 'source.address == "127.0.0.2"'
"""


def listening_socket() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


@contextmanager
def haproxy(binary: str, folder: Path, targets: dict[str, int]) -> Iterator[dict[str, int]]:
    """HAProxy in TCP mode, one frontend per target (name -> the gateway's port) on a socket bound here,
    each connection to the gateway started with a PROXY v2 header; the frontends' ports by name."""
    sockets = {name: listening_socket() for name in targets}
    lines = [
        "defaults",
        "    mode tcp",
        "    timeout connect 2s",
        "    timeout client 1m",
        "    timeout server 1m",
    ]
    for name, port in targets.items():
        lines += [
            f"frontend {name}",
            f"    bind fd@{sockets[name].fileno()}",
            f"    default_backend {name}_gateway",
        ]
        lines += [f"backend {name}_gateway", f"    server gateway 127.0.0.1:{port} send-proxy-v2"]
    config = folder / "haproxy.cfg"
    config.write_text("\n".join(lines) + "\n")
    log = (folder / "haproxy.log").open("wb")
    fds = [sock.fileno() for sock in sockets.values()]
    process = subprocess.Popen([binary, "-f", str(config), "-db"], pass_fds=fds, stdout=log, stderr=log)
    ports = {name: sock.getsockname()[1] for name, sock in sockets.items()}
    for sock in sockets.values():
        sock.close()  # HAProxy holds them now; connections queue until it accepts
    try:
        yield ports
    finally:
        process.terminate()
        process.wait(timeout=DEADLINE_S)
        log.close()


async def tools_seen_from(source: str, url: str) -> list[str]:
    transport = httpx2.AsyncHTTPTransport(local_address=source)
    async with (
        httpx2.AsyncClient(transport=transport) as http,
        Client(streamable_http_client(url, http_client=http), mode=LEGACY_ERA) as client,
    ):
        return await tool_names(client)


async def test_behind_haproxy_each_client_is_known_by_its_own_address(
    haproxy_binary: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "g.toml", [backend_entry("t", "--only=echo")])
    config = with_websocket(with_http(config, **PROXIED), **PROXIED)
    config.write_text(config.read_text() + POLICY)
    with captured_logs("INFO") as lines:
        async with running(config) as gateway:
            assert gateway.http_url is not None and gateway.websocket_url is not None
            gateway_ports = {
                name: int(url.rsplit(":", 1)[1].split("/")[0])
                for name, url in (("http", gateway.http_url), ("ws", gateway.websocket_url))
            }
            with haproxy(haproxy_binary, tmp_path, gateway_ports) as ports, trio.fail_after(DEADLINE_S):
                url = f"http://127.0.0.1:{ports['http']}/mcp"
                assert await tools_seen_from("127.0.0.2", url) == ["echo"]
                assert await tools_seen_from("127.0.0.3", url) == []  # not HAProxy's 127.0.0.1 for both
                sock = trio.socket.socket()
                await sock.bind(("127.0.0.3", 0))
                await sock.connect(("127.0.0.1", ports["ws"]))
                async with trio.open_nursery() as nursery:
                    connection = await wrap_client_stream(
                        nursery, trio.SocketStream(sock), "127.0.0.1", "/mcp", subprotocols=["mcp"]
                    )
                    await connection.aclose()
    assert any("connected from 127.0.0.3:" in line for line in lines), lines
