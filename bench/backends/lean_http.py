"""A lean MCP backend over Streamable HTTP (the initialize era, JSON answers) with a token endpoint beside
it, for the bench's auth scenario (bench/auth_cost.py): POST /mcp answers echo from a template, as
lean_echo.py does over stdio; POST /token grants one fixed token for an hour to any client_credentials or
token-exchange request. It checks no credential: the bench measures the gateway's cost of sending one.
Prints its base URL (http://127.0.0.1:PORT) once it listens; runs until killed.
"""

from __future__ import annotations

from typing import Any

import hypercorn.config
import orjson
import trio
from hypercorn.trio import serve
from lean_echo import CALL_RESULT, TOOLS, answer

TOKEN = orjson.dumps(
    {"access_token": "lean-http-token-" + "x" * 40, "token_type": "Bearer", "expires_in": 3600}
)
JSON = [(b"content-type", b"application/json")]


async def body_of(receive: Any) -> bytes:
    body = b""
    while True:
        event = await receive()
        body += event.get("body", b"")
        if not event.get("more_body"):
            return body


def mcp_answer(message: dict[str, Any]) -> bytes | None:
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        return None
    if method == "tools/call":
        return b'{"jsonrpc":"2.0","id":' + orjson.dumps(request_id) + CALL_RESULT.rstrip(b"\n")
    if method == "initialize":
        info = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "lean"},
        }
        return answer(request_id, orjson.dumps(info)).rstrip(b"\n")
    if method == "tools/list":
        return answer(request_id, TOOLS).rstrip(b"\n")
    if method == "ping":
        return answer(request_id, b"{}").rstrip(b"\n")
    error = {"code": -32601, "message": f"Method not found: {method}"}
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = await body_of(receive)
    status, headers, out = 405, [], b""
    if scope["method"] == "POST" and scope["path"] == "/token":
        status, headers, out = 200, JSON, TOKEN
    elif scope["method"] == "POST":
        found = mcp_answer(orjson.loads(body))
        status, headers, out = (202, [], b"") if found is None else (200, JSON, found)
        headers = [*headers, (b"mcp-session-id", b"lean-1")]
    elif scope["method"] == "DELETE":
        status = 200
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": out})


async def main() -> None:
    config = hypercorn.config.Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = config.errorlog = None
    async with trio.open_nursery() as nursery:
        (url,) = await nursery.start(serve, app, config)
        print(url, flush=True)


if __name__ == "__main__":
    trio.run(main)
