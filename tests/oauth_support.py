"""What the resource-server tests share: the test clients and the scopes their tools need, a raw initialize
POST, a free loopback port, a JWT signed with HMAC by hand (PyJWT itself refuses to use a PEM public key as an
HMAC secret, which is the attack), an SDK client with a bearer token, and an ASGI app served by hypercorn."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final

import httpx2
import hypercorn.config
import trio
from hypercorn.trio import serve
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import LEGACY_ERA

TOOL_SCOPES: Final = '{ echo = ["tools:echo"], add = ["tools:add"] }'  # [NAME.auth] tool_scopes, as TOML
CLIENTS: Final = {"alice-app": ("tools:echo", "tools:add"), "bob-app": ("tools:echo",)}  # id -> its scopes
Asgi = Callable[[dict[str, Any], Any, Any], Awaitable[None]]

POST_HEADERS: Final = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def hmac_token(header: dict[str, Any], claims: dict[str, Any], secret: bytes) -> str:
    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = f"{part(json.dumps(header).encode())}.{part(json.dumps(claims).encode())}"
    return f"{signing_input}.{part(hmac.new(secret, signing_input.encode(), hashlib.sha256).digest())}"


@asynccontextmanager
async def asgi_server(app: Asgi) -> AsyncIterator[str]:
    """`app` (HTTP and WebSocket scopes; the lifespan is answered here) on a free loopback port: its URL."""

    async def with_lifespan(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})

    config = hypercorn.config.Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = config.errorlog = None
    async with trio.open_nursery() as nursery:
        (url,) = await nursery.start(serve, with_lifespan, config)
        yield url
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def http_client(url: str, token: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http), mode=LEGACY_ERA) as client,
    ):
        yield client


async def listed(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}
