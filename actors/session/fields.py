"""What a client's request must look like, checked before anything acts on it: the -32602 or -32600 each
wrong field earns names the field."""

from __future__ import annotations

from typing import Any

from actors.catalog import BackendStatus
from actors.protocol.codec import clip, is_id, shown
from actors.protocol.errors import BACKEND_UNAVAILABLE, INVALID_PARAMS, INVALID_REQUEST, rpc_error
from actors.protocol.messages import Params, RequestId, RpcError
from actors.session.settings import TOO_MANY_REQUESTS


def invalid_field(field: str, expected: str) -> RpcError:
    """The -32602 a request earns for a field of the wrong type or size; it names the field."""
    return rpc_error(INVALID_PARAMS, f"Invalid params: {field} must be {expected}", field=field)


def meta_error(params: Params) -> RpcError | None:
    meta = params.get("_meta")
    if meta is None:
        return None
    if not isinstance(meta, dict):
        return invalid_field("_meta", "an object")
    token = meta.get("progressToken")
    if token is not None and not is_id(token):
        return invalid_field("_meta.progressToken", "a string or an integer")
    return None


def named_error(params: Params) -> RpcError | None:
    """tools/call and prompts/get: a name, and arguments (when given) as an object."""
    if not isinstance(params.get("name"), str):
        return invalid_field("name", "a string")
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        return invalid_field("arguments", "an object")
    return None


def bad_id(request_id: object) -> RpcError:
    return rpc_error(
        INVALID_REQUEST, f"Invalid request: id {shown(request_id)} is not a string or an integer"
    )


def duplicate(request_id: RequestId) -> RpcError:
    return rpc_error(INVALID_REQUEST, f"Invalid request: id {shown(request_id)} is already in flight")


def label(value: object) -> str:
    """A client's value for a log line: a printable string as it is (clipped), anything else as its repr."""
    return clip(value) if isinstance(value, str) and value.isprintable() else shown(value)


def progress_token(params: Params) -> RequestId | None:
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if is_id(token) else None  # type: ignore[return-value]


def backend_down(name: str, status: BackendStatus, kind: str = "tool") -> Any:
    name = clip(name)
    message = f"{kind} '{name}' belongs to backend '{status.name}', which is {status.describe()}"
    return rpc_error(
        BACKEND_UNAVAILABLE, message, backend=status.name, state=status.state.value, **{kind: name}
    )


def held_error(why: str, backend: str, kind: str, name: str) -> RpcError:
    """What a call to a definition its backend's trust holds gets: never sent to the backend."""
    return rpc_error(INVALID_PARAMS, why, backend=backend, held=True, **{kind: clip(name)})


def too_many(max_inflight: int) -> RpcError:
    """What a request past the session's max_inflight unanswered ones gets."""
    limit = max_inflight
    message = f"Too many requests in flight: this session has {limit} unanswered (max_inflight {limit})"
    return rpc_error(TOO_MANY_REQUESTS, message, max_inflight=max_inflight)
