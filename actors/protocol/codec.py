"""The one wire codec: bytes <-> messages, orjson both ways, one pass each.

`decode` classifies a frame by its envelope alone; `encode` builds the wire dict and serialises it.
Framing (newlines, WebSocket frames) belongs to the transports.
"""

from __future__ import annotations

import re
from typing import Any, Final

import orjson

from actors.protocol.errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    InexactIntegerError,
    MessageError,
)
from actors.protocol.exact_integers import LONG_DIGITS, checked_integers, may_hold_long_integers
from actors.protocol.messages import (  # is_id: also codec's, as callers know it
    Batch,
    ErrorResponse,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    RpcError,
    is_id,
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

# orjson reads arrays and objects nested up to 1024 deep but writes only up to 254: a message in between would
# decode and then fail to encode, on whichever side forwards it. So decode refuses what could not be written
# again wrapped in WRAP_MARGIN more levels (the gateway adds one at most: a batch around an answer).
ENCODABLE_DEPTH: Final = 254  # orjson's limit on writing
WRAP_MARGIN: Final = 2
MAX_DEPTH: Final = ENCODABLE_DEPTH - WRAP_MARGIN
CLIP_CHARS: Final = 200  # of a peer's string quoted back in an error message or a log line
MAX_ID_CHARS: Final = 1024  # a longer string id is refused: it would be held while in flight, and echoed


def clip(text: str, limit: int = CLIP_CHARS) -> str:
    """A peer's string as it may be quoted back: at most `limit` characters."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def json_type(value: object) -> str:
    """The JSON name of a decoded value's type, for messages about a value of the wrong one."""
    return _JSON_TYPES.get(type(value), type(value).__name__)


_JSON_TYPES: Final = {
    dict: "object",
    list: "array",
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def shown(value: object, limit: int = CLIP_CHARS) -> str:
    """A peer's value as a log line may show it: its repr (control characters escaped), clipped."""
    return clip(repr(value), limit)


def _invalid(reason: str, request_id: RequestId | None = None) -> MessageError:
    return MessageError(RpcError(INVALID_REQUEST, f"Invalid request: {reason}"), request_id)


def decode(frame: bytes | str) -> Message:
    """Parse one frame. Raises MessageError carrying the error the sender should get."""
    try:
        obj = orjson.loads(frame)
    except orjson.JSONDecodeError as exc:
        raise MessageError(RpcError(PARSE_ERROR, f"Parse error: {exc}")) from None
    size = len(frame)
    if size >= LONG_DIGITS and may_hold_long_integers(frame):
        obj = checked_integers(frame, obj)
    deep = size > MAX_DEPTH and _may_be_deep(frame)
    if isinstance(obj, list):
        return _decode_batch(obj, deep)
    if not isinstance(obj, dict):
        raise _invalid(f"expected a JSON-RPC object, got a JSON {type(obj).__name__}")
    if deep:
        _check_depth(obj)
    return decode_object(obj, size)


def plain_answer(frame: bytes | str) -> tuple[int, dict[str, Any], memoryview] | None:
    """A response of exactly the form `{"jsonrpc":"2.0","id":<integer>,"result":<object>}` (what SDKs write
    for an answer): its id, its result, and the result's own bytes in the frame; None for anything else,
    which `decode` then takes with its errors. The form is checked byte by byte up to the result, and the
    result parsed on its own, so the frame is valid JSON with these three members only (no second "id", no
    member after the result) and the same checks as `decode`'s hold: the result's bytes can be written on
    under another id as they are (a backend's answer, issue #27)."""
    if type(frame) is not bytes or not frame.startswith(_ANSWER_HEAD) or not frame.endswith(b"}"):
        return None
    id_end = frame.find(_RESULT_KEY, _ID_START, _ID_START + 18 + len(_RESULT_KEY))  # 18 digits at most
    digits = frame[_ID_START:id_end]
    if id_end < 0 or not digits.isdigit() or (digits[0] == 48 and len(digits) > 1):  # 0, 1..., no 01
        return None
    size = len(frame)
    if (size >= LONG_DIGITS and may_hold_long_integers(frame)) or (size > MAX_DEPTH and _may_be_deep(frame)):
        return None
    body = memoryview(frame)[id_end + len(_RESULT_KEY) : -1]
    try:
        result = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if type(result) is not dict:
        return None
    return int(digits), result, body


_ANSWER_HEAD: Final = b'{"jsonrpc":"2.0","id":'
_ID_START: Final = len(_ANSWER_HEAD)
_RESULT_KEY: Final = b',"result":'


def _may_be_deep(frame: bytes | str) -> bool:
    """Only a frame with more than MAX_DEPTH opening brackets can nest that deep: two byte counts rule out
    nearly every frame, and `_check_depth` (one C-speed trial encoding) looks at the rest."""
    if isinstance(frame, str):
        return frame.count("[") + frame.count("{") > MAX_DEPTH
    data = frame.tobytes() if isinstance(frame, memoryview) else frame
    return data.count(b"[") + data.count(b"{") > MAX_DEPTH


def _check_depth(obj: dict[str, Any]) -> None:
    """Raise the error a message nested deeper than MAX_DEPTH earns (with its id, when it has one)."""
    wrapped: object = obj
    for _ in range(WRAP_MARGIN):
        wrapped = [wrapped]
    try:
        orjson.dumps(wrapped)
    except orjson.JSONEncodeError:
        raw_id = obj.get("id")
        raise _invalid(
            f"nested more than {MAX_DEPTH} levels deep", raw_id if is_id(raw_id) else None
        ) from None


def _decode_batch(items: list[Any], deep: bool = False) -> Batch:
    """Each element decoded on its own; one that is not a message (or nests too deep) becomes the error it
    should get."""
    if not items:
        raise _invalid("an empty batch")
    decoded: list[Request | Notification | Response | ErrorResponse] = []
    for item in items:
        if isinstance(item, InexactIntegerError):
            decoded.append(ErrorResponse(item.request_id, item.error))
            continue
        try:
            if not isinstance(item, dict):
                raise _invalid(f"expected a JSON-RPC object in the batch, got a JSON {type(item).__name__}")
            if deep:
                _check_depth(item)
            decoded.append(decode_object(item))
        except MessageError as exc:
            decoded.append(ErrorResponse(exc.request_id, exc.error))
    return Batch(tuple(decoded))


def decode_object(obj: dict[str, Any], size: int = 0) -> Request | Notification | Response | ErrorResponse:
    """Classify an already parsed JSON object as a request, notification or response; `size`, its frame's
    bytes when it came alone, is what a request costs as the budgets count it (session/budget.py)."""
    raw_id = obj.get("id")
    request_id = raw_id if is_id(raw_id) else None
    if isinstance(raw_id, str) and len(raw_id) > MAX_ID_CHARS:
        raise _invalid(f'"id" is longer than {MAX_ID_CHARS} characters')
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
        return Request(request_id, method, params, size)
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


def compact(raw: bytes) -> bytes:
    """`raw` copied into a bytes object of its own size, for bytes that are kept (an answer waiting for its
    client, a parked call's answers). orjson (3.x) returns its write buffer without shrinking it: at least
    4 KiB, and about ten times the text past that (measured: `{}` holds 4 KiB, 100 kB of text 1 MB), so
    what is kept as orjson wrote it holds that much while counted at its length."""
    return bytes(memoryview(raw))


def encode_kept(message: Message) -> bytes:
    """`encode`, for a frame that waits before it is written: it holds what its length says."""
    return compact(encode(message))


def encode(message: Message) -> bytes:
    """Serialise a message to JSON bytes (no framing). An answer that cannot be written (a value no decoded
    frame can hold: an integer past 64 bits, a lone surrogate, nesting past orjson's limit) is written as an
    internal error for the same id instead, so the writer never fails on it; a request or notification
    raises orjson.JSONEncodeError (a TypeError). A Response with `raw` (its result's bytes as a backend
    wrote them, proved by `plain_answer`) is written around those bytes."""
    if type(message) is Response and message.raw is not None:
        return b"".join((_ANSWER_HEAD, orjson.dumps(message.id), _RESULT_KEY, message.raw, b"}"))
    try:
        return orjson.dumps(to_wire(message))
    except orjson.JSONEncodeError:
        if isinstance(message, Request | Notification):
            raise
        return orjson.dumps(to_wire(_writable(message)))


def _writable(message: Message) -> Message:
    match message:
        case Batch(items=items):
            return Batch(tuple(_writable(item) for item in items))  # type: ignore[misc]
        case Response(id=request_id) | ErrorResponse(id=request_id):
            try:
                orjson.dumps(to_wire(message))
            except orjson.JSONEncodeError as exc:
                writable_id = request_id if writable(request_id) else None
                reason = f"Internal error: the answer could not be written as JSON ({exc})"
                return ErrorResponse(writable_id, RpcError(INTERNAL_ERROR, reason))
    return message


def writable(value: object) -> bool:
    """The value can be written as JSON (what a decoded frame holds always can; what code made may not)."""
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return False
    return True


def find_request_id(head: bytes, tail: bytes) -> RequestId | None:
    """The id of a message known only by its first and last bytes, when it can be read with certainty."""
    for pattern, text in ((_LEADING_ID, head), (_TRAILING_ID, tail)):
        match = pattern.search(text)
        if match:
            try:
                value = orjson.loads(match.group(1))
            except orjson.JSONDecodeError:
                continue
            if is_id(value):
                return value
    return None
