"""JSON-RPC 2.0 wire types.

Params and results stay opaque (plain dicts and lists from the decoder): the gateway routes on the envelope
(`id`, `method`, `params.name`) and never reshapes what it forwards.
"""

from __future__ import annotations

from typing import Any

import attrs

RequestId = int | str
Params = dict[str, Any]
Tool = dict[str, Any]  # a tool (prompt, resource) definition: opaque JSON but for the fields read


@attrs.frozen(slots=True)
class RpcError:
    """The `error` member of a JSON-RPC error response. `data` of None means absent."""

    code: int
    message: str
    data: Any = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            wire["data"] = self.data
        return wire


@attrs.frozen(slots=True)
class Request:
    id: RequestId
    method: str
    params: Params | None = None
    size: int = attrs.field(default=0, eq=False, repr=False)  # its frame's bytes, when it came alone


@attrs.frozen(slots=True)
class Notification:
    method: str
    params: Params | None = None


@attrs.frozen(slots=True)
class Response:
    id: RequestId
    result: Any
    # `result`'s JSON text as its sender wrote it, when that is proved to be exactly `result` (codec's
    # plain_answer): the codec writes it as it is instead of serialising `result` again. Whoever builds a
    # Response with another result leaves it out.
    raw: bytes | memoryview | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen(slots=True)
class ErrorResponse:
    """An error answer. `id` is None only when the request's id could not be read (e.g. a parse error)."""

    id: RequestId | None
    error: RpcError


@attrs.frozen(slots=True)
class Batch:
    """A JSON-RPC batch (an array), in either direction. Coming in, an element that is not a valid message
    is kept as the ErrorResponse it earns; going out, it holds the responses to a batch of requests."""

    items: tuple[Request | Notification | Response | ErrorResponse, ...]


Message = Request | Notification | Response | ErrorResponse | Batch


@attrs.frozen(slots=True)
class Encoded:
    """A message already written as its frame (no framing): what waits for a client that reads slowly is
    kept as the bytes it will be sent as, not as decoded objects (which cost 1 to 24 times their JSON)."""

    frame: bytes


def is_id(value: object) -> bool:
    """A JSON-RPC id: a string or an integer (bool is an int in Python; MCP forbids null)."""
    kind = type(value)
    if kind is int or kind is str:  # what a decoded id is: no isinstance chain on every message
        return True
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
