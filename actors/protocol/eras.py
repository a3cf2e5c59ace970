"""The two protocol eras and what tells them apart (MCP 2026-07-28, versioning and basic pages).

Legacy (2025-11-25 and older) opens with `initialize`; its versions live in versions.py. Modern (2026-07-28
and later) has no handshake: every request carries its version, the client's capabilities and its identity
in `params._meta`, and is served on its own. A request is modern exactly when that `_meta` holds the
protocolVersion key (both SDKs classify on that key alone), so a request forwarded to a legacy peer must
lose the key (`without_envelope`).

Everything here is pure: no I/O, no clock. Every value read from a request is treated as hostile: a wrong
type, a huge value or a control character earns the error below, never an exception.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from actors.protocol.codec import json_type
from actors.protocol.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from actors.protocol.messages import RpcError
from actors.protocol.versions import LOG_LEVELS

FIRST_MODERN_VERSION: Final = "2026-07-28"
MODERN_VERSIONS: Final = ("2026-07-28",)  # what discover and -32022 advertise, newest first
MAX_VERSION_CHARS: Final = 64  # a longer protocolVersion is not a version: refused as malformed

# The envelope: reserved `_meta` keys of a modern request.
PROTOCOL_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY: Final = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_KEY: Final = "io.modelcontextprotocol/logLevel"
ENVELOPE_KEYS: Final = (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, LOG_LEVEL_KEY)
# Other `_meta` keys: the server's identity on results, a listen stream's id on its notifications, and the
# unprefixed W3C trace keys, which travel untouched in either era.
SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID_KEY: Final = "io.modelcontextprotocol/subscriptionId"
TRACE_KEYS: Final = ("traceparent", "tracestate", "baggage")

# The requests a modern client may send (schema ClientRequest), and the legacy ones it may not: a removed
# method is an unknown method (-32601, 404 over HTTP).
MODERN_CLIENT_METHODS: Final = frozenset(
    {
        "server/discover",
        "completion/complete",
        "prompts/get",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "subscriptions/listen",
        "tools/call",
        "tools/list",
    }
)
REMOVED_METHODS: Final = frozenset(
    {
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "tasks/get",  # tasks moved to the io.modelcontextprotocol/tasks extension
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
    }
)
MODERN_CLIENT_NOTIFICATIONS: Final = frozenset({"notifications/cancelled"})
REMOVED_NOTIFICATIONS: Final = frozenset(
    {
        "notifications/initialized",
        "notifications/roots/list_changed",
        "notifications/elicitation/complete",
        "notifications/progress",  # from the client; the server's progress stays
    }
)
MRTR_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})  # may be input_required
CACHEABLE_METHODS: Final = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)
# ClientCapabilities members whose named sub-members must be objects when present; experimental and
# extensions are maps whose every value must be an object.
_CAPABILITY_MEMBERS: Final = {"sampling": ("context", "tools"), "elicitation": ("form", "url"), "roots": ()}
_CAPABILITY_MAPS: Final = ("experimental", "extensions")


def is_modern(version: object) -> bool:
    """Whether a version string belongs to the modern era. Versions are ISO dates and compare as strings,
    as both SDKs do; so any string sorting at or after 2026-07-28 counts (supported or not)."""
    return isinstance(version, str) and version >= FIRST_MODERN_VERSION


def request_meta(params: object) -> dict[str, Any] | None:
    """A request's `params._meta` when both are objects."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else None


def is_modern_request(params: object) -> bool:
    """Whether a request claims the modern era: its `_meta` holds the protocolVersion key, whatever its
    value (a malformed claim is still a claim, and earns -32602, never the legacy path)."""
    meta = request_meta(params)
    return meta is not None and PROTOCOL_VERSION_KEY in meta


@attrs.frozen(slots=True)
class ModernEnvelope:
    """What a modern request says about its client, checked. `client_capabilities` is as sent (`{}` means
    none); `client_info` and `log_level` are None when absent (no log level: no notifications/message)."""

    version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None = None
    log_level: str | None = None

    def to_meta(self) -> dict[str, Any]:
        """The envelope as `_meta` keys, for a request to a modern peer."""
        meta: dict[str, Any] = {
            PROTOCOL_VERSION_KEY: self.version,
            CLIENT_CAPABILITIES_KEY: self.client_capabilities,
        }
        if self.client_info is not None:
            meta[CLIENT_INFO_KEY] = self.client_info
        if self.log_level is not None:
            meta[LOG_LEVEL_KEY] = self.log_level
        return meta


def parse_envelope(params: object) -> ModernEnvelope | RpcError:
    """The envelope of a modern request's params, or the error the request earns: -32602 naming the first
    missing or malformed key, or -32022 for a version we do not serve. The order follows the HTTP ladder:
    required keys, the version's type, the version itself, then the shape of the other keys."""
    if not isinstance(params, dict):
        return _bad_envelope("params", f"expected an object, got {json_type(params)}")
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        problem = "missing" if meta is None else f"expected an object, got {json_type(meta)}"
        return _bad_envelope("_meta", problem)
    for key in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY):
        if key not in meta:
            return _bad_envelope(key, "missing")
    version = meta[PROTOCOL_VERSION_KEY]
    if not isinstance(version, str):
        return _bad_envelope(PROTOCOL_VERSION_KEY, f"expected a string, got {json_type(version)}")
    if len(version) > MAX_VERSION_CHARS:
        return _bad_envelope(PROTOCOL_VERSION_KEY, f"longer than {MAX_VERSION_CHARS} characters")
    if version not in MODERN_VERSIONS:
        return unsupported_version_error(version)
    capabilities = meta[CLIENT_CAPABILITIES_KEY]
    problem = _capabilities_problem(capabilities)
    if problem is not None:
        return _bad_envelope(*problem)
    client_info = meta.get(CLIENT_INFO_KEY)
    if CLIENT_INFO_KEY in meta and not _is_implementation(client_info):
        return _bad_envelope(CLIENT_INFO_KEY, "expected an object with string name and version")
    log_level = meta.get(LOG_LEVEL_KEY)
    if LOG_LEVEL_KEY in meta and not (isinstance(log_level, str) and log_level in LOG_LEVELS):
        return _bad_envelope(LOG_LEVEL_KEY, f"expected one of {', '.join(LOG_LEVELS)}")
    return ModernEnvelope(version, capabilities, client_info, log_level)


def _capabilities_problem(capabilities: Any) -> tuple[str, str] | None:
    """(key, problem) for the first malformed part of a ClientCapabilities object; unknown members pass."""
    if not isinstance(capabilities, dict):
        return CLIENT_CAPABILITIES_KEY, f"expected an object, got {json_type(capabilities)}"
    for name, value in capabilities.items():
        if name not in _CAPABILITY_MEMBERS and name not in _CAPABILITY_MAPS:
            continue
        where = f"{CLIENT_CAPABILITIES_KEY}.{name}"
        if not isinstance(value, dict):
            return where, f"expected an object, got {json_type(value)}"
        members = value.keys() if name in _CAPABILITY_MAPS else _CAPABILITY_MEMBERS[name]
        if any(member in value and not isinstance(value[member], dict) for member in members):
            return where, "expected objects as its members"
    return None


def _is_implementation(value: object) -> bool:
    """An Implementation object: string name and version (title, icons and the rest are not checked)."""
    return isinstance(value, dict) and all(isinstance(value.get(field), str) for field in ("name", "version"))


def _bad_envelope(key: str, problem: str) -> RpcError:
    return RpcError(
        INVALID_PARAMS,
        f"Invalid _meta envelope for protocol version {FIRST_MODERN_VERSION}: {key}: {problem}",
        {"envelope": {"key": key, "problem": problem}},
    )


def without_envelope(params: dict[str, Any] | None) -> dict[str, Any] | None:
    """A modern request's params as a legacy peer may see them: the envelope keys gone from `_meta` (and
    `_meta` gone once empty); progressToken, the trace keys and everything else kept. Copies, never edits."""
    meta = request_meta(params)
    if params is None or meta is None or not any(key in meta for key in ENVELOPE_KEYS):
        return params
    kept = {key: value for key, value in meta.items() if key not in ENVELOPE_KEYS}
    stripped = {key: value for key, value in params.items() if key != "_meta"}
    if kept:
        stripped["_meta"] = kept
    return stripped


def unsupported_version_error(requested: str | None) -> RpcError:
    """-32022 naming the versions we serve and echoing the one asked for (None: the request named none)."""
    data: dict[str, Any] = {"supported": list(MODERN_VERSIONS)}
    if requested is not None:
        data["requested"] = requested
    return RpcError(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", data)


def missing_capability_error(required: dict[str, Any]) -> RpcError:
    """-32021 with `requiredCapabilities`, a ClientCapabilities object such as {"sampling": {}}."""
    names = ", ".join(sorted(required))
    return RpcError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"Missing required client capability: {names}",
        {"requiredCapabilities": required},
    )


def header_mismatch_error(header: str, sent: str | None, body: object) -> RpcError:
    """-32020: the HTTP header `header` (value `sent`, None when absent) disagrees with the body's `body`."""
    return RpcError(
        HEADER_MISMATCH,
        f"Bad Request: the {header} header does not match the request body",
        {"header": header, "mismatch": {"header": sent, "body": body}},
    )


def resource_not_found_error(uri: str) -> RpcError:
    """A resources/read miss as modern clients know it: -32602 with exactly {"uri"} (-32002 is retired)."""
    return RpcError(INVALID_PARAMS, "Resource not found", {"uri": uri})


_EDGE_STATUS: Final = {METHOD_NOT_FOUND: 404}


def http_status(code: int, *, at_edge: bool) -> int:
    """The HTTP status for a modern request's error. At the edge (the gateway's own checks before serving:
    shape, era, envelope, headers, method) -32601 is 404 and every other code 400; in band (an answer from
    serving it, a backend's included) only -32021 is 400, the rest ride a 200."""
    if at_edge:
        return _EDGE_STATUS.get(code, 400)
    return 400 if code == MISSING_REQUIRED_CLIENT_CAPABILITY else 200
