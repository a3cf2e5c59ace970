"""The one wire codec: bytes <-> messages, orjson both ways, one pass each.

`decode` classifies a frame by its envelope alone; `encode` builds the wire dict and serialises it.
Framing (newlines, WebSocket frames) belongs to the transports.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from actors.errors import INVALID_REQUEST, PARSE_ERROR, MessageError
from actors.messages import (
    Batch,
    ErrorResponse,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    RpcError,
)

JSONRPC = "2.0"

# The top-level "id" of a message too large to parse, read from its first or last bytes: first when nothing
# but flat top-level members come before it ({"jsonrpc":"2.0","id":7,...), last when it closes the object
# (...,"id":7}), as JavaScript SDKs write it.
_ID = rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")'
_LEADING_ID = re.compile(
    rb'\A\s*\{(?:\s*"[^"{}\[\]]*"\s*:\s*(?:"(?:[^"\\]|\\.)*"|[^,{}\[\]"]*)\s*,)*\s*' + _ID
)
_TRAILING_ID = re.compile(rb",\s*" + _ID + rb"\s*\}\s*\Z")


def _is_id(value: object) -> bool:
    # bool is an int in Python; JSON-RPC ids are strings or integers (MCP forbids null).
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _invalid(reason: str, request_id: RequestId | None = None) -> MessageError:
    return MessageError(RpcError(INVALID_REQUEST, f"Invalid request: {reason}"), request_id)


def decode(frame: bytes | str) -> Message:
    """Parse one frame. Raises MessageError carrying the error the sender should get."""
    try:
        obj = orjson.loads(frame)
    except orjson.JSONDecodeError as exc:
        raise MessageError(RpcError(PARSE_ERROR, f"Parse error: {exc}")) from None
    if isinstance(obj, list):
        return _decode_batch(obj)
    if not isinstance(obj, dict):
        raise _invalid(f"expected a JSON-RPC object, got a JSON {type(obj).__name__}")
    return decode_object(obj)


def _decode_batch(items: list[Any]) -> Batch:
    """Each element decoded on its own; one that is not a message becomes the error it should get."""
    if not items:
        raise _invalid("an empty batch")
    decoded: list[Request | Notification | Response | ErrorResponse] = []
    for item in items:
        try:
            if not isinstance(item, dict):
                raise _invalid(f"expected a JSON-RPC object in the batch, got a JSON {type(item).__name__}")
            decoded.append(decode_object(item))
        except MessageError as exc:
            decoded.append(ErrorResponse(exc.request_id, exc.error))
    return Batch(tuple(decoded))


def decode_object(obj: dict[str, Any]) -> Request | Notification | Response | ErrorResponse:
    """Classify an already parsed JSON object as a request, notification or response."""
    raw_id = obj.get("id")
    request_id = raw_id if _is_id(raw_id) else None
    if obj.get("jsonrpc") != JSONRPC:
        raise _invalid('"jsonrpc" must be "2.0"', request_id)
    if "method" in obj:
        method, params = obj["method"], obj.get("params")
        if not isinstance(method, str):
            raise _invalid('"method" must be a string', request_id)
        if params is not None and not isinstance(params, dict | list):
            raise _invalid('"params" must be an object', request_id)
        if "id" not in obj:
            return Notification(method, params)
        if request_id is None:
            raise _invalid('"id" must be a string or an integer')
        return Request(request_id, method, params)
    if "id" not in obj or ("result" in obj) == ("error" in obj):
        raise _invalid("neither a request, a notification nor a response", request_id)
    if "result" in obj:
        if request_id is None:
            raise _invalid('"id" must be a string or an integer')
        return Response(request_id, obj["result"])
    return ErrorResponse(request_id, _decode_error(obj["error"], request_id))


def _decode_error(error: object, request_id: RequestId | None) -> RpcError:
    if not isinstance(error, dict):
        raise _invalid('"error" must be an object', request_id)
    code, message = error.get("code"), error.get("message")
    if not isinstance(code, int) or isinstance(code, bool) or not isinstance(message, str):
        raise _invalid('"error" needs an integer "code" and a string "message"', request_id)
    return RpcError(code, message, error.get("data"))


def to_wire(message: Message) -> Any:
    """The JSON-RPC object (or array, for a batch) for a message."""
    match message:
        case Batch(items=items):
            return [to_wire(item) for item in items]
        case Response(id=request_id, result=result):
            return {"jsonrpc": JSONRPC, "id": request_id, "result": result}
        case Request(id=request_id, method=method, params=params):
            wire: dict[str, Any] = {"jsonrpc": JSONRPC, "id": request_id, "method": method}
        case Notification(method=method, params=params):
            wire = {"jsonrpc": JSONRPC, "method": method}
        case ErrorResponse(id=request_id, error=error):
            return {"jsonrpc": JSONRPC, "id": request_id, "error": error.to_wire()}
    if params is not None:
        wire["params"] = params
    return wire


def encode(message: Message) -> bytes:
    """Serialise a message to JSON bytes (no framing)."""
    return orjson.dumps(to_wire(message))


def find_request_id(head: bytes, tail: bytes) -> RequestId | None:
    """The id of a message known only by its first and last bytes, when it can be read with certainty."""
    for pattern, text in ((_LEADING_ID, head), (_TRAILING_ID, tail)):
        match = pattern.search(text)
        if match:
            try:
                value = orjson.loads(match.group(1))
            except orjson.JSONDecodeError:
                continue
            if _is_id(value):
                return value
    return None
