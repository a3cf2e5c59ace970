"""Which POSTs are of the 2026-07-28 era, and the checks such a POST passes before it is served.

A POST is modern when its body claims the era (the protocolVersion key in a message's `params._meta`, in a
batch too) or its MCP-Protocol-Version header names a modern version; any other POST takes the legacy path,
unchanged. The checks run in the order the era's HTTP transport gives them, and the first that fails answers:
clients and the conformance suite read the code as a sign of what the server is.

    1. HTTP method  the era is POST only: GET and DELETE under a modern header get 405 (app.py)
    2. shape        a posted response, or a batch holding anything modern: 400 -32600
    3. era          the header names another version than the body: 400 -32020; the body claims a version
                    not served: 400 -32022 with `supported` and `requested`
    4. envelope     a malformed envelope, or none under a modern header: 400 -32602
    5. headers      MCP-Protocol-Version missing; Mcp-Method missing or not the body's method; Mcp-Name
                    missing or not the body's `name` (tools/call, prompts/get) or `uri` (resources/read); a
                    malformed base64 sentinel: 400 -32020
    6. method       removed in the era, or unknown: 404 -32601

modern.py then checks what needs the catalog (a method whose feature no backend offers now: 404 -32601; a
tool's Mcp-Param-* headers: 400 -32020) and serves the request; its params are checked in band (200), and
a capability the client did not declare is 400 -32021. Header names are matched ignoring case (the app
lower-cases them), values exactly once spaces and tabs around them are trimmed. Every refusal echoes the
request's id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from actors.frontends.http.param_headers import HTTP_WHITESPACE, bad_sentinel_error, echoed, header_value
from actors.frontends.http.responses import EdgeRefusal
from actors.frontends.http.sessions import VERSION_HEADER
from actors.protocol.codec import clip
from actors.protocol.eras import (
    MAX_VERSION_CHARS,
    MODERN_CLIENT_METHODS,
    MODERN_VERSIONS,
    PROTOCOL_VERSION_KEY,
    header_mismatch_error,
    is_modern,
    is_modern_request,
    parse_envelope,
    request_meta,
    unsupported_version_error,
)
from actors.protocol.errors import INVALID_REQUEST, METHOD_NOT_FOUND, rpc_error
from actors.protocol.messages import Batch, Message, Notification, Request, RpcError

METHOD_HEADER: Final = "mcp-method"
NAME_HEADER: Final = "mcp-name"
ERA: Final = f"protocol {MODERN_VERSIONS[0]}"
NAME_FIELDS: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}  # Mcp-Name's


def header(headers: Mapping[str, str], name: str) -> str | None:
    """A header's value, trimmed; None when absent. `name` is lower-case."""
    value = headers.get(name)
    return None if value is None else value.strip(HTTP_WHITESPACE)


def modern_header(headers: Mapping[str, str]) -> bool:
    """Whether MCP-Protocol-Version names a version of the modern era (supported or not)."""
    return is_modern(header(headers, VERSION_HEADER))


def is_modern_post(headers: Mapping[str, str], message: Message) -> bool:
    """Whether a POST takes the modern path: a modern header, or a body message that claims the era."""
    if modern_header(headers):
        return True
    items = message.items if isinstance(message, Batch) else (message,)
    return any(isinstance(item, Request | Notification) and is_modern_request(item.params) for item in items)


def refusal(headers: Mapping[str, str], message: Message) -> EdgeRefusal | None:
    """The answer to the first of checks 2 to 6 a modern POST fails; None when it passes them all (a
    notification passes at once: it is accepted and dropped, having nothing to say over HTTP)."""
    if isinstance(message, Batch):
        return EdgeRefusal(None, rpc_error(INVALID_REQUEST, f"Invalid request: no batches in {ERA}"))
    if isinstance(message, Notification):
        return None
    if not isinstance(message, Request):  # a response (to nothing: the era asks the client nothing)
        return EdgeRefusal(message.id, rpc_error(INVALID_REQUEST, f"Invalid request: a response in {ERA}"))
    error = _era_error(headers, message) or _envelope_error(message)
    error = error or _header_error(headers, message) or _method_error(message)
    return None if error is None else EdgeRefusal(message.id, error)


def _era_error(headers: Mapping[str, str], request: Request) -> RpcError | None:
    """Check 3: the header against the body's claim, then the claim against the versions served."""
    meta = request_meta(request.params)
    if meta is None or PROTOCOL_VERSION_KEY not in meta:
        return (
            None  # no claim: the modern header brought it here, and the envelope check says what is missing
        )
    claimed, sent = meta[PROTOCOL_VERSION_KEY], header(headers, VERSION_HEADER)
    if sent is not None and sent != claimed:
        return header_mismatch_error("MCP-Protocol-Version", clip(sent), echoed(claimed))
    if isinstance(claimed, str) and len(claimed) <= MAX_VERSION_CHARS and claimed not in MODERN_VERSIONS:
        return unsupported_version_error(claimed)
    return None  # a claim of the wrong type or length is malformed: the envelope check says so


def _envelope_error(request: Request) -> RpcError | None:
    envelope = parse_envelope(request.params)
    return envelope if isinstance(envelope, RpcError) else None


def _header_error(headers: Mapping[str, str], request: Request) -> RpcError | None:
    """Check 5: the standard headers are there and say what the body says."""
    if header(headers, VERSION_HEADER) is None:
        return header_mismatch_error("MCP-Protocol-Version", None, _claimed(request))
    method = header(headers, METHOD_HEADER)
    if method != request.method:
        return header_mismatch_error(
            "Mcp-Method", None if method is None else clip(method), clip(request.method)
        )
    field = NAME_FIELDS.get(request.method)
    named = request.params.get(field) if field is not None and isinstance(request.params, dict) else None
    if not isinstance(named, str):
        return None  # nothing for Mcp-Name to mirror: the params check answers in band
    raw = headers.get(NAME_HEADER)
    if raw is None:
        return header_mismatch_error("Mcp-Name", None, clip(named))
    sent = header_value(raw)
    if sent is None:
        return bad_sentinel_error("Mcp-Name", raw)
    return None if sent == named else header_mismatch_error("Mcp-Name", clip(sent), clip(named))


def _method_error(request: Request) -> RpcError | None:
    if request.method in MODERN_CLIENT_METHODS:
        return None
    return rpc_error(METHOD_NOT_FOUND, f"Method not found: {clip(request.method)}")


def _claimed(request: Request) -> object:
    meta = request_meta(request.params) or {}
    return echoed(meta.get(PROTOCOL_VERSION_KEY))
