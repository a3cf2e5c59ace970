"""Server-sent events as a Streamable HTTP backend sends them: (id, data) pairs, with a size limit."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any, Final

import httpx2
import orjson

MAX_ORIGINS: Final = 1024  # server requests noted with the stream they came on and not yet looked up


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


def read_event(data: bytes) -> dict[str, Any] | None:
    """An event's data as a JSON object, else None (the backend link says what is wrong with it)."""
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return message if isinstance(message, dict) else None


def is_answer(message: dict[str, Any] | None, request_id: Any) -> bool:
    return message is not None and "method" not in message and message.get("id") == request_id


def request_id_of(message: dict[str, Any] | None) -> int | str | None:
    """The id of a request (not a notification, not a response), when it is one an id can be."""
    if message is None or "method" not in message:
        return None
    request_id = message.get("id")
    return request_id if isinstance(request_id, str) or type(request_id) is int else None


class StreamOrigins:
    """The server's requests that came on the response stream of one of the gateway's requests: each one's
    id -> the id of the request whose stream it came on (the call it belongs to: backends/ask_owner.py).
    At most MAX_ORIGINS, the oldest forgotten first; an entry is freed when it is looked up."""

    def __init__(self) -> None:
        self._origins: OrderedDict[int | str, Any] = OrderedDict()

    def note(self, message: dict[str, Any] | None, stream_of: Any) -> None:
        asked = request_id_of(message)
        if asked is None:
            return
        self._origins[asked] = stream_of
        self._origins.move_to_end(asked)
        while len(self._origins) > MAX_ORIGINS:
            self._origins.popitem(last=False)

    def pop(self, asked: object) -> object:
        """The id of the request on whose stream `asked` came; None when it came on the standalone stream or
        is not known."""
        if isinstance(asked, str) or type(asked) is int:
            return self._origins.pop(asked, None)  # type: ignore[call-overload]
        return None

    def __len__(self) -> int:
        return len(self._origins)
