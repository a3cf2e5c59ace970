"""With [fleet]: a client's POST passed on to another replica (the internal hop) and the replica's answer,
JSON or an SSE stream, relayed to the client as it comes. The client's own headers go along (its token: the
other replica checks it again), so the other replica serves the POST as if the client had sent it there.
Used for a modern retry whose call is parked on another replica (fleet_retries.py) and for a legacy
client's answer to a request another replica sent it (fleet_messages.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit, urlunsplit

import httpx2
from loguru import logger

from actors.frontends.http.sse import Send

FORWARD_CONNECT_S: Final = 2.0  # a replica that does not accept within this is gone
PASSED_ON: Final = ("authorization", "content-type", "accept", "user-agent")  # and every mcp-* header
RELAYED: Final = ("content-type", "cache-control", "retry-after")  # of the other replica's answer


def at_path(url: str, path: str | None) -> str:
    """The other replica's URL (its listener's) at the path the client used (a [[routes]] path: the POST
    reaches the same route there, whose sessions alone take it; None: the listener's own)."""
    if path is None:
        return url
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def passed_on(headers: Mapping[str, str]) -> dict[str, str]:
    """The client's headers the other replica serves the POST with."""
    return {name: value for name, value in headers.items() if name in PASSED_ON or name.startswith("mcp-")}


async def relay_post(url: str, headers: dict[str, str], frame: bytes, send: Send, replica: str) -> int | None:
    """`frame` POSTed to `replica` at `url`, its answer relayed to the client: the status relayed, or None
    when the replica did not answer (nothing was sent to the client: the caller answers it). An answer cut
    off midway ends the client's response where it was cut."""
    timeout = httpx2.Timeout(FORWARD_CONNECT_S, read=None)
    status: int | None = None
    try:
        async with (
            httpx2.AsyncClient(timeout=timeout) as http,
            http.stream("POST", url, content=frame, headers=headers) as answer,
        ):
            kept = [
                (name.encode(), answer.headers[name].encode()) for name in RELAYED if name in answer.headers
            ]
            await send({"type": "http.response.start", "status": answer.status_code, "headers": kept})
            status = answer.status_code
            async for chunk in answer.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    except (httpx2.HTTPError, httpx2.InvalidURL) as exc:  # InvalidURL: a registration that is no URL
        logger.warning("fleet: forwarding to replica {} failed: {}", replica, type(exc).__name__)
    return status
