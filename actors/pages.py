"""Pages of the aggregated lists, with cursors of the gateway's own.

A cursor is opaque to clients: the list's version and an offset. It stays valid while that list does not
change; after a change it is refused with -32602 and the client lists from the start.
"""

from __future__ import annotations

import base64
from typing import Any

from actors.errors import INVALID_PARAMS, rpc_error
from actors.messages import ErrorResponse, Message, Params, RequestId, Response


def page(
    request_id: RequestId, params: Params, key: str, items: tuple[Any, ...], version: int, size: int
) -> Message:
    """The page of `items` that params.cursor points at (the first without one), under `key`."""
    start = 0
    if params.get("cursor") is not None:
        start = read_cursor(params["cursor"], version)
        if start is None or start > len(items):
            message = f"Invalid params: unknown cursor, or the {key} changed since; list from the start"
            return ErrorResponse(request_id, rpc_error(INVALID_PARAMS, message))
    end = start + size
    result: dict[str, Any] = {key: items[start:end]}
    if end < len(items):
        result["nextCursor"] = make_cursor(version, end)
    return Response(request_id, result)


def make_cursor(version: int, offset: int) -> str:
    """Opaque to clients; valid while the list it pages through does not change."""
    return base64.urlsafe_b64encode(f"{version}:{offset}".encode()).decode()


def read_cursor(cursor: object, version: int) -> int | None:
    if not isinstance(cursor, str):
        return None
    try:
        made_for, offset = base64.urlsafe_b64decode(cursor.encode()).decode().split(":")
        return int(offset) if int(made_for) == version and int(offset) >= 0 else None
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        return None
