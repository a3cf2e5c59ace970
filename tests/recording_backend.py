"""A minimal MCP server that records what reaches it: the headers of every HTTP request and WebSocket
handshake, and every message body. It serves Streamable HTTP (POST) and WebSocket (subprotocol mcp) on one
hypercorn port, with one tool, `seen_by_<name>`; for tests that check what a gateway passes on to backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import orjson
from oauth_support import asgi_server


@attrs.define
class Recorded:
    headers: list[dict[str, str]] = attrs.field(factory=list)  # one per HTTP request or handshake
    bodies: list[bytes] = attrs.field(factory=list)


def _answer(message: dict[str, Any], name: str) -> dict[str, Any] | None:
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        return None
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": name, "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [{"name": f"seen_by_{name}", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": f"{name} was called"}]}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def recording_app(name: str, recorded: Recorded) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        recorded.headers.append({k.decode().lower(): v.decode() for k, v in scope["headers"]})
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.accept", "subprotocol": "mcp"})
            while (event := await receive())["type"] == "websocket.receive":
                body = (event.get("text") or "").encode() or event.get("bytes") or b""
                recorded.bodies.append(body)
                answer = _answer(orjson.loads(body), name)
                if answer is not None:
                    await send({"type": "websocket.send", "text": orjson.dumps(answer).decode()})
            return
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        if scope["method"] != "POST":
            status = 405 if scope["method"] == "GET" else 200
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        recorded.bodies.append(body)
        answer = _answer(orjson.loads(body), name)
        headers = [(b"content-type", b"application/json"), (b"mcp-session-id", b"recorded-1")]
        await send({"type": "http.response.start", "status": 200 if answer else 202, "headers": headers})
        await send({"type": "http.response.body", "body": orjson.dumps(answer) if answer else b""})

    return app


@asynccontextmanager
async def recording_backend(name: str) -> AsyncIterator[tuple[str, Recorded]]:
    """The server on a free loopback port: its host:port and what it records."""
    recorded = Recorded()
    async with asgi_server(recording_app(name, recorded)) as url:
        yield url.removeprefix("http://"), recorded
