"""server/discover (MCP 2026-07-28), and the rule it sets: a modern client may call the methods of the
features discover declares, and no others."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from actors.protocol.eras import MODERN_VERSIONS
from actors.protocol.errors import METHOD_NOT_FOUND, rpc_error
from actors.protocol.messages import Message, Params, RequestId, Response, RpcError

if TYPE_CHECKING:
    from actors.catalog import CatalogView
    from actors.session.dispatcher import Dispatcher

# The server capability a modern method needs declared; without it the method is unknown (-32601), as the
# era asks: a client reads the capabilities of discover as the methods it may call.
FEATURE_OF: Final = {
    "prompts/list": "prompts",
    "prompts/get": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resources",
    "resources/read": "resources",
    "completion/complete": "completions",
}


def undeclared(view: CatalogView, method: str) -> RpcError | None:
    """-32601 for a method of a feature no ready backend offers now (so discover does not declare it)."""
    feature = FEATURE_OF.get(method)
    if feature is None:
        return None
    if any(status.ready and feature in status.capabilities for status in view.backends.values()):
        return None
    return rpc_error(METHOD_NOT_FOUND, f"Method not found: {method} (no {feature} are offered now)")


def discover(d: Dispatcher, request_id: RequestId, params: Params) -> Message:
    """server/discover: the versions served, what the gateway can route now, the backends' instructions."""
    view = d.catalog.value
    result: dict[str, Any] = {
        "supportedVersions": list(MODERN_VERSIONS),
        "capabilities": view.server_capabilities(),
    }
    instructions = view.instructions()
    if instructions:
        result["instructions"] = instructions
    return Response(request_id, result)
