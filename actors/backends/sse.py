"""Server-sent events as a Streamable HTTP backend sends them: (id, data) pairs, with a size limit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import orjson


class TooLargeError(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"a message larger than max_message_bytes ({limit} bytes)")


async def sse_events(response: httpx2.Response, max_bytes: int) -> AsyncIterator[tuple[str | None, bytes]]:
    """(id, data) of each SSE event; events without data too, for their id. Raises TooLargeError for an
    event whose data is over `max_bytes`."""
    event_id: str | None = None
    data: list[str] = []
    size = 0
    async for line in response.aiter_lines():
        if not line:
            if data or event_id is not None:
                yield event_id, "\n".join(data).encode()
            event_id, data, size = None, [], 0
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            size += len(value)
            if size > max_bytes:
                raise TooLargeError(max_bytes)
            data.append(value)
        elif field == "id":
            event_id = value


def answers(data: bytes, request_id: Any) -> bool:
    """Whether an event's data is the response to `request_id`."""
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return isinstance(message, dict) and "method" not in message and message.get("id") == request_id
