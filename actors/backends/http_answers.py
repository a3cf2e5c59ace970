"""What an HTTP backend's answer to a POST is read as: its body (at most `max_bytes`), the protocol version
an initialize result names, and the JSON-RPC error a request gets when HTTP said no (the server's own, or
one saying what HTTP said), as the frame its link settles the request with."""

from __future__ import annotations

from typing import Any

import httpx2
import orjson

from actors.backends.sse import TooLargeError


async def read_all(response: httpx2.Response, max_bytes: int) -> bytes:
    """The whole body; TooLargeError past `max_bytes`."""
    parts, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise TooLargeError(max_bytes)
        parts.append(chunk)
    return b"".join(parts)


def version_of(body: bytes) -> str | None:
    """The protocolVersion of an initialize result, if it names one."""
    try:
        version = orjson.loads(body).get("result", {}).get("protocolVersion")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return version if isinstance(version, str) else None


def error_frame(request_id: Any, error: dict[str, Any]) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})


async def error_for(url: str, response: httpx2.Response, kind: str, request_id: Any, max_bytes: int) -> bytes:
    """The server's JSON-RPC error under this request's id, or one that says what HTTP said."""
    body = await read_all(response, max_bytes)
    error: Any = None
    if kind == "application/json":
        try:
            error = orjson.loads(body).get("error")
        except (orjson.JSONDecodeError, AttributeError):
            error = None
    if not isinstance(error, dict):
        error = {"code": -32603, "message": f"{url} answered HTTP {response.status_code}"}
    return error_frame(request_id, error)
