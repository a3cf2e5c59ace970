"""What a span says, by the MCP semantic conventions: its name, its attributes and its error.type.

Pure functions of the request, the peer and the answer; nothing here imports OpenTelemetry, so the names
can be tested (and read) without it. Everything read from a peer is checked for its type and cut to
MAX_VALUE_CHARS: a tool name is the client's text, of any length and content.
"""

from __future__ import annotations

from typing import Any, Final

from actors.protocol.eras import PROTOCOL_VERSION_KEY, request_meta
from actors.protocol.messages import Batch, ErrorResponse, Message, RequestId, Response

MAX_VALUE_CHARS: Final = 256  # an attribute read from a peer (a tool name, a version) is cut here
JSONRPC_VERSION: Final = "2.0"
TOOL_ERROR: Final = "tool_error"  # error.type of a tools/call answered with isError: true
TRANSPORTS: Final = {"stdio": "pipe", "websocket": "tcp", "http": "tcp"}
PROTOCOL_NAMES: Final = {"websocket": "websocket", "http": "http"}

Attributes = dict[str, Any]
Peer = tuple[tuple[str, Any], ...]  # a session's attributes for its SERVER spans, as items: hashable


def clipped(value: object) -> str | None:
    """A peer's string, cut to MAX_VALUE_CHARS; None when it is not a string."""
    return value[:MAX_VALUE_CHARS] if isinstance(value, str) else None


def target_of(method: str, params: object) -> str | None:
    """The span name's target: the tool or prompt a request names (never a resource URI)."""
    if method in ("tools/call", "prompts/get") and isinstance(params, dict):
        return clipped(params.get("name"))
    return None


def span_name(method: str, target: str | None) -> str:
    """`{mcp.method.name} {target}`, or the method alone."""
    method = method[:MAX_VALUE_CHARS]
    return f"{method} {target}" if target else method


def request_attributes(method: str, target: str | None, request_id: RequestId | None) -> Attributes:
    """What any MCP span of a request says about it: method, id, and the tool or prompt it names
    (`target`, from target_of)."""
    attributes: Attributes = {
        "mcp.method.name": method[:MAX_VALUE_CHARS],
        "jsonrpc.protocol.version": JSONRPC_VERSION,
    }
    if request_id is not None:
        attributes["jsonrpc.request.id"] = str(request_id)[:MAX_VALUE_CHARS]
    if target is not None:
        if method == "tools/call":
            attributes["gen_ai.tool.name"] = target
            attributes["gen_ai.operation.name"] = "execute_tool"
        else:
            attributes["gen_ai.prompt.name"] = target
    return attributes


def protocol_version(method: str, params: object, negotiated: str | None) -> str | None:
    """The MCP version a request is served in: a modern request's own claim, else the session's
    negotiated version (an initialize's requested one, before it is negotiated)."""
    meta = request_meta(params)
    if meta is not None and PROTOCOL_VERSION_KEY in meta:
        return clipped(meta[PROTOCOL_VERSION_KEY])
    if negotiated is None and method == "initialize" and isinstance(params, dict):
        return clipped(params.get("protocolVersion"))
    return negotiated


def peer_attributes(listener: str, address: str, session: str, has_session_id: bool) -> Attributes:
    """What every SERVER span of one session says about its client and transport. `session` is the
    gateway's label of a Streamable HTTP session (`has_session_id`), as its log names it: the Mcp-Session-Id
    itself opens the session to whoever holds it, so it never leaves the gateway."""
    attributes: Attributes = {"network.transport": TRANSPORTS.get(listener, "tcp")}
    protocol = PROTOCOL_NAMES.get(listener)
    if protocol is not None:
        attributes["network.protocol.name"] = protocol
    host, port = split_address(address)
    if host and listener != "stdio":
        attributes["client.address"] = host
        if port is not None:
            attributes["client.port"] = port
    if has_session_id:
        attributes["mcp.session.id"] = session[:MAX_VALUE_CHARS]
    return attributes


def split_address(address: str) -> tuple[str, int | None]:
    """An address "host:port" (or "[v6]:port", or a bare host) as host and port."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or (":" in host and not host.startswith("[")):
        return address, None  # a bare host, or a bare IPv6 address
    return host.strip("[]"), int(port)


def error_type(message: Message | None) -> str | None:
    """error.type of an answer: the JSON-RPC error code, or `tool_error` for a result with isError."""
    if isinstance(message, ErrorResponse):
        return str(message.error.code)
    if isinstance(message, Response):
        result = message.result
        if type(result) is dict and result.get("isError") is True:
            return TOOL_ERROR
        return None
    if isinstance(message, Batch):
        return None
    return None


def result_error_type(result: object) -> str | None:
    """error.type of a backend's result: `tool_error` for isError."""
    return TOOL_ERROR if type(result) is dict and result.get("isError") is True else None
