"""Error codes and the gateway's exception tree.

JSON-RPC reserves -32768..-32000; -32000..-32099 are for the implementation. The codes below are the ones MCP
clients already know: -32002 for "not initialized", -32001 for a request timeout (the SDKs' own code), and
-32000 for a backend that is not available (the SDKs' "connection closed"). From 2026-07-28 the
specification allocates -32020 and up itself, and retires -32002 and -32042: those reach legacy clients only.
"""

from __future__ import annotations

from typing import Any, Final

from actors.protocol.messages import RpcError

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
BACKEND_UNAVAILABLE: Final = -32000
REQUEST_TIMEOUT: Final = -32001
NOT_INITIALIZED: Final = -32002
RESOURCE_NOT_FOUND: Final = -32002  # the MCP specification gives resources/read misses this code too
URL_ELICITATION_REQUIRED: Final = -32042  # a tool needs the user to open a URL first (2025-11-25)
HEADER_MISMATCH: Final = -32020  # an HTTP header disagrees with the body (2026-07-28)
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021  # serving needs a capability the client did not declare
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022  # a modern request names a version the server does not serve


def rpc_error(code: int, message: str, **data: Any) -> RpcError:
    """An RpcError whose `data` holds the given fields (omitted when there are none)."""
    return RpcError(code, message, data or None)


def unavailable(backend: str, reason: str) -> RpcError:
    """What a call gets when its backend cannot serve it: not ready, gone, or its run ended with the call."""
    return RpcError(
        BACKEND_UNAVAILABLE,
        f"backend '{backend}' is unavailable: {reason}",
        {"backend": backend, "reason": reason},
    )


def timed_out(backend: str, method: str, timeout_s: float) -> RpcError:
    """What a call gets when its backend has not answered it (or taken it) within request_timeout_s."""
    message = f"backend '{backend}' did not answer {method} within {timeout_s}s"
    return RpcError(REQUEST_TIMEOUT, message, {"backend": backend})


class GatewayError(Exception):
    """Base of the errors the gateway raises on purpose."""


class MessageError(GatewayError):
    """A frame that is not a usable JSON-RPC message. Carries the answer the peer should get."""

    def __init__(self, error: RpcError, request_id: int | str | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.request_id = request_id


class InexactIntegerError(MessageError):
    """A frame holding an integer outside 64 bits, which the codec cannot carry exactly: refused, never
    rounded to a float. `response` tells a peer's answer (its caller gets the error) from its request."""

    def __init__(self, reason: str, request_id: int | str | None, *, response: bool) -> None:
        super().__init__(RpcError(INVALID_PARAMS, f"Invalid params: {reason}"), request_id)
        self.reason = reason
        self.response = response


class MessageTooLargeError(GatewayError):
    """A frame longer than max_message_bytes; the stream has skipped it and can go on."""

    def __init__(self, size: int, limit: int, request_id: int | str | None = None) -> None:
        super().__init__(f"message of {size} bytes exceeds max_message_bytes ({limit})")
        self.size = size
        self.limit = limit
        self.request_id = request_id  # when the skipped message's own id could be read from its ends


class GatewayStartError(GatewayError):
    """Something the gateway needs cannot be set up (the audit file cannot be opened, say): it does not
    start, and says why in one line."""
