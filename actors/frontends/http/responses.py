"""Plain (not streamed) HTTP answers of the Streamable HTTP frontend, and the refusals that name their
request.

Both eras answer refusals and single responses the same way: a status, JSON-RPC error or response bytes,
and headers. A refusal raised after the request's id is known carries it, so its error body echoes the id;
a modern request's refusal (EdgeRefusal) has the status its era gives the error's code.
"""

from __future__ import annotations

from typing import Final

import attrs
import orjson

from actors.frontends.auth import Refused
from actors.frontends.auth import RequestRefused as RequestRefused
from actors.frontends.http.sse import Send
from actors.protocol import codec
from actors.protocol.eras import http_status
from actors.protocol.messages import ErrorResponse, RequestId, RpcError

JSON_HEADERS: Final = [(b"content-type", b"application/json")]
REFUSED_CODE: Final = -32000  # the implementation's range: a refusal with no protocol code of its own


def refused_id(refused: Refused) -> RequestId | None:
    """The id a refusal's error body echoes (None: the request's id was not known yet)."""
    return refused.request_id if isinstance(refused, RequestRefused) else None


async def respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def error_body(request_id: RequestId | None, message: str, code: int = REFUSED_CODE) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


@attrs.frozen(slots=True)
class EdgeRefusal:
    """A modern request refused before it is served: the HTTP status and the JSON-RPC error."""

    request_id: RequestId | None
    error: RpcError

    @property
    def status(self) -> int:
        return http_status(self.error.code, at_edge=True)

    def body(self) -> bytes:
        return codec.encode(ErrorResponse(self.request_id, self.error))
