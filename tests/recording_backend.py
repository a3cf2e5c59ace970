"""A minimal MCP server that records what reaches it: the headers of every HTTP request and WebSocket
handshake, and every message body. It serves Streamable HTTP (POST) and WebSocket (subprotocol mcp) on one
hypercorn port, with the tools `seen_by_<name>`, `whoami_<name>` (the claims of the token it was called
with, as its `check` read them) and `leak_auth_<name>` (a JSON-RPC error quoting the Authorization header
it got: what a careless server does); for tests that check what a gateway passes on to backends.

With `check`, every request must carry a credential it accepts (a token of the right audience, say):
anything else is answered 401, as a protected server does. `refuse_calls` more tools/call requests are
answered 401 even so (a token the server has revoked)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import orjson
from oauth_support import asgi_server

Check = Callable[[str | None], dict[str, Any]]  # an Authorization header -> its claims, or raises


@attrs.define
class Recorded:
    headers: list[dict[str, str]] = attrs.field(factory=list)  # one per HTTP request or handshake
    bodies: list[bytes] = attrs.field(factory=list)
    posts: list[tuple[dict[str, str], bytes]] = attrs.field(factory=list)  # each POST's headers and body
    claims: list[dict[str, Any]] = attrs.field(factory=list)  # of every credential `check` accepted
    refused: int = 0  # requests answered 401
    refuse_calls: int = 0  # tools/call requests still to answer 401, whatever they carry


def _answer(
    message: dict[str, Any], name: str, claims: dict[str, Any] | None = None, authorization: str = ""
) -> dict[str, Any] | None:
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
        tools = (f"seen_by_{name}", f"whoami_{name}", f"leak_auth_{name}")
        result = {"tools": [{"name": tool, "inputSchema": {"type": "object"}} for tool in tools]}
    elif method == "tools/call" and message["params"]["name"] == f"whoami_{name}":
        result = {"content": [{"type": "text", "text": orjson.dumps(claims or {}).decode()}]}
    elif method == "tools/call" and message["params"]["name"] == f"leak_auth_{name}":
        error = {"code": -32603, "message": f"rejected credential {authorization}"}
        return {"jsonrpc": "2.0", "id": request_id, "error": error}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": f"{name} was called"}]}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _checked(check: Check | None, authorization: str | None, recorded: Recorded) -> dict[str, Any] | None:
    """The claims of the request's credential ({} without `check`); None when it is refused."""
    if check is None:
        return {}
    try:
        claims = check(authorization)
    except Exception:  # whatever the check raises: the credential is not good here
        recorded.refused += 1
        return None
    recorded.claims.append(claims)
    return claims


async def _unauthorized(send: Any) -> None:
    headers = [(b"www-authenticate", b'Bearer error="invalid_token"'), (b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": b'{"error":"invalid_token"}'})


def recording_app(name: str, recorded: Recorded, check: Check | None = None) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        recorded.headers.append(headers)
        authorization = headers.get("authorization")
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            claims = _checked(check, authorization, recorded)
            if claims is None:  # refused at the handshake with 401, as a protected server does
                headers = [(b"www-authenticate", b'Bearer error="invalid_token"')]
                await send({"type": "websocket.http.response.start", "status": 401, "headers": headers})
                await send({"type": "websocket.http.response.body", "body": b""})
                return
            await send({"type": "websocket.accept", "subprotocol": "mcp"})
            while (event := await receive())["type"] == "websocket.receive":
                body = (event.get("text") or "").encode() or event.get("bytes") or b""
                recorded.bodies.append(body)
                answer = _answer(orjson.loads(body), name, claims, authorization or "")
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
        recorded.posts.append((headers, body))
        message = orjson.loads(body)
        claims = _checked(check, authorization, recorded)
        if claims is not None and message.get("method") == "tools/call" and recorded.refuse_calls > 0:
            recorded.refuse_calls -= 1
            recorded.refused += 1
            claims = None
        if claims is None:
            await _unauthorized(send)
            return
        answer = _answer(message, name, claims, authorization or "")
        headers = [(b"content-type", b"application/json"), (b"mcp-session-id", b"recorded-1")]
        await send({"type": "http.response.start", "status": 200 if answer else 202, "headers": headers})
        await send({"type": "http.response.body", "body": orjson.dumps(answer) if answer else b""})

    return app


@asynccontextmanager
async def recording_backend(name: str, check: Check | None = None) -> AsyncIterator[tuple[str, Recorded]]:
    """The server on a free loopback port: its host:port and what it records."""
    recorded = Recorded()
    async with asgi_server(recording_app(name, recorded, check)) as url:
        yield url.removeprefix("http://"), recorded
