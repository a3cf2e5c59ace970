"""Pages of the aggregated lists, with cursors of the gateway's own.

A cursor is opaque to clients: the list's version and an offset. It is good while that list does not
change. A cursor that is not good (minted before the list changed, as it does when a backend dies or
restarts, or by another gateway process, or never minted at all) is refused with -32602, and the client
lists from the start: pages of two versions joined would hold duplicates, or tools of a backend that is gone
(issue #34; issue #24 had such a cursor start the listing again at the first page, which clients joined to
the pages they had). A cursor that is not a string, or longer than any cursor the gateway makes, is -32602
too, and never decoded.
"""

from __future__ import annotations

import base64
from typing import Any, Final

from actors.protocol.errors import INVALID_PARAMS, rpc_error
from actors.protocol.messages import ErrorResponse, Message, Params, RequestId, Response

MAX_CURSOR_CHARS: Final = 64  # ours are about 20; a longer one is no gateway's: refused, never decoded


def page(
    request_id: RequestId, params: Params, key: str, items: tuple[Any, ...], version: int, size: int
) -> Message:
    """The page of `items` that params.cursor points at (the first without one), under `key`."""
    start = 0
    cursor = params.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        message = "Invalid params: cursor must be a string"
        return ErrorResponse(request_id, rpc_error(INVALID_PARAMS, message, field="cursor"))
    if cursor is not None and len(cursor) > MAX_CURSOR_CHARS:
        message = f"Invalid params: cursor is longer than {MAX_CURSOR_CHARS} characters: not a cursor of ours"
        return ErrorResponse(request_id, rpc_error(INVALID_PARAMS, message, field="cursor"))
    if cursor is not None:
        offset = read_cursor(cursor, version)
        if offset is None or offset > len(items):
            changed = f"the {key} changed since it was made, or it is no cursor of this gateway"
            message = f"Invalid params: a cursor that is not good now ({changed}); list from the start"
            return ErrorResponse(request_id, rpc_error(INVALID_PARAMS, message, field="cursor"))
        start = offset
    end = start + size
    result: dict[str, Any] = {key: items[start:end]}
    if end < len(items):
        result["nextCursor"] = make_cursor(version, end)
    return Response(request_id, result)


def make_cursor(version: int, offset: int) -> str:
    """Opaque to clients; valid while the list it pages through does not change."""
    return base64.urlsafe_b64encode(f"{version}:{offset}".encode()).decode()


def read_cursor(cursor: object, version: int) -> int | None:
    if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR_CHARS:
        return None
    try:
        made_for, offset = base64.urlsafe_b64decode(cursor.encode()).decode().split(":")
        return int(offset) if int(made_for) == version and int(offset) >= 0 else None
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        return None
