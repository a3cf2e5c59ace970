"""Refusals sent before a request's body has arrived (issue #34, point 6): a pooled HTTP/1.1 client's next
request never meets a connection the gateway is closing, on the MCP HTTP listener and on the admin one.

Each refused request's body is held back until the gateway has logged the refusal, so the answer is ready
before its body arrives, every time: the case the attackers hit 4 times in 400. A real pooled httpx2
client sends them all, one after another; a request that met a closing connection would raise
("Server disconnected without sending a response"). The gateway runs in this process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import httpx2
import jwt
import pytest
import trio
from admin_support import with_admin
from loguru import logger
from support import DEADLINE_S, backend_entry, running, with_http, write_config

from actors.frontends.http import whole_body

SECRET: Final = "a-keep-alive-test-secret-of-32-bytes-or-more"
VARIABLE: Final = "KEEP_ALIVE_TEST_SECRET"
ADMIN_TOKEN: Final = "keep-alive-admin-token"
MAX_BYTES: Final = 4096
ROUNDS: Final = 8
JSON: Final = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
PING: Final = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'


@contextmanager
def refusals_seen() -> Iterator[list[trio.Event]]:
    """One event per refusal the gateway logs (either listener), set when it is logged: the refusal's answer
    is on its way, its body not yet read."""
    seen: list[trio.Event] = []

    def note(message: object) -> None:
        if "refused" in str(message) and seen:
            seen.pop(0).set()

    sink = logger.add(note, level="INFO", format="{message}")
    try:
        yield seen
    finally:
        logger.remove(sink)


def held_back(seen: list[trio.Event], first: bytes, rest: bytes) -> AsyncIterator[bytes]:
    """A body whose `rest` is sent only once the gateway has refused its request (after `first`)."""
    refused = trio.Event()
    seen.append(refused)

    async def chunks() -> AsyncIterator[bytes]:
        if first:
            yield first
        await refused.wait()
        yield rest

    return chunks()


def token(subject: str) -> str:
    return jwt.encode({"sub": subject}, SECRET, algorithm="HS256")


def gateway_config(tmp_path: Path) -> Path:
    config = write_config(tmp_path / "g.toml", [backend_entry("t", "--only=echo")])
    config = with_http(config, max_message_bytes=MAX_BYTES, auth={"jwt_secret_env": VARIABLE})
    return with_admin(config, token_env="KEEP_ALIVE_ADMIN_TOKEN")


async def test_a_pooled_client_meets_no_closing_connection_after_refusals_before_the_body(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(VARIABLE, SECRET)
    monkeypatch.setenv("KEEP_ALIVE_ADMIN_TOKEN", ADMIN_TOKEN)
    alice = {"authorization": f"Bearer {token('alice')}"}
    over = b" " * (MAX_BYTES + 1)
    # (method, url suffix, headers, first chunk, rest, status): refused on the head, or (413) mid-body
    mcp = [
        ("POST", "/mcp", {}, b"", PING, 401),
        ("POST", "/mcp", {"origin": "http://evil.example"}, b"", PING, 403),
        ("POST", "/other", alice, b"", PING, 404),
        ("POST", "/mcp", {**alice, "host": "evil.example"}, b"", PING, 421),
        ("PUT", "/mcp", alice, b"", PING, 405),
        ("POST", "/mcp", alice, over, PING, 413),
    ]
    admin = [
        ("POST", "/status", {"authorization": f"Bearer {ADMIN_TOKEN}"}, b"", b"x" * 100, 405),
        ("GET", "/status", {}, b"", b"x" * 100, 401),
        ("GET", "/status", {"authorization": "Bearer wrong"}, b"", b"x" * 100, 401),
        ("GET", "/status", {"host": "evil.example"}, b"", b"x" * 100, 421),
    ]
    with refusals_seen() as seen:
        async with running(gateway_config(tmp_path)) as gateway, httpx2.AsyncClient() as http:
            assert gateway.http_url is not None and gateway.admin is not None
            bases = {"mcp": gateway.http_url.removesuffix("/mcp"), "admin": gateway.admin.listener.url}
            with trio.fail_after(DEADLINE_S):
                for _ in range(ROUNDS):
                    for listener, cases in (("mcp", mcp), ("admin", admin)):
                        for method, path, headers, first, rest, status in cases:
                            content = held_back(seen, first, rest)
                            url = bases[listener] + path
                            answer = await http.request(
                                method, url, headers={**JSON, **headers}, content=content
                            )
                            assert answer.status_code == status, (listener, path, answer.text)
                            assert "close" not in answer.headers.get("connection", "")  # the body came
                # and the pooled connections still serve
                served = await http.get(
                    bases["admin"] + "/healthz", headers={"authorization": f"Bearer {ADMIN_TOKEN}"}
                )
                assert served.status_code == 200


async def test_a_body_that_never_comes_after_a_refusal_gets_connection_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that waits for the answer before it sends its body: the gateway waits for that body for
    DRAIN_S, then answers with `Connection: close`, so the client does not send on that connection again."""
    monkeypatch.setenv(VARIABLE, SECRET)
    monkeypatch.setenv("KEEP_ALIVE_ADMIN_TOKEN", ADMIN_TOKEN)
    monkeypatch.setattr(whole_body, "DRAIN_S", 0.2)
    async with running(gateway_config(tmp_path)) as gateway:
        assert gateway.http_url is not None and gateway.admin is not None
        for url in (gateway.http_url, gateway.admin.listener.url + "/status"):
            host, port = url.split("//")[1].split("/")[0].split(":")
            head = f"POST /{url.split('/', 3)[3]} HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-length: 100\r\n"
            with trio.fail_after(DEADLINE_S):
                stream = await trio.open_tcp_stream(host, int(port))
                async with stream:
                    await stream.send_all(head.encode() + b"content-type: application/json\r\n\r\n")
                    answer = b""
                    while b"\r\n\r\n" not in answer:
                        chunk = await stream.receive_some(65536)
                        assert chunk, answer
                        answer += chunk
            status_line, *header_lines = answer.split(b"\r\n\r\n")[0].decode().split("\r\n")
            assert status_line.split()[1] in ("401", "405")
            assert "connection: close" in [line.lower() for line in header_lines], answer
