"""HTTP headers that mirror parts of a modern request's body (MCP 2026-07-28, Streamable HTTP), and the
base64 sentinel that carries a value a header cannot.

A tool declares a header for one of its arguments with `"x-mcp-header": "Region"` on a property of its
inputSchema; a client calling it sends `Mcp-Param-Region: <value>`, so that a proxy can route on the value
without reading the body. The gateway checks each declared header against the body before serving the call:
present without a value in the body, absent with one, different from it, or a malformed sentinel: -32020.
A declaration counts only on a property reached from the schema's root through `properties` alone, of type
string, integer or boolean, named by an HTTP token; others are ignored (clients drop such tools), and so are
Mcp-Param-* headers no declaration names.

A value that is not plain visible ASCII travels as `=?base64?<its UTF-8 in canonical padded base64>?=`; a
value without both the prefix and the suffix is literal.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any, Final

import attrs

from actors.catalog import CatalogView
from actors.protocol.codec import clip, json_type
from actors.protocol.eras import header_mismatch_error
from actors.protocol.errors import HEADER_MISMATCH
from actors.protocol.messages import RpcError

SENTINEL_PREFIX: Final = "=?base64?"
SENTINEL_SUFFIX: Final = "?="
PARAM_PREFIX: Final = "Mcp-Param-"
PARAM_PREFIX_LOWER: Final = PARAM_PREFIX.lower()
# MCP headers a request may carry once: routing, the session, the era, and what mirrors the body
ONCE_HEADERS: Final = frozenset({"mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name"})
# Read by the gateway's checks too (the token, the browser's origin): one copy, or a proxy in front may
# judge another copy than the gateway does. Both listeners (the WebSocket handshake's headers as well).
SINGLE_HEADERS: Final = frozenset({"authorization", "origin"})
X_MCP_HEADER: Final = "x-mcp-header"
HEADER_TYPES: Final = frozenset({"string", "integer", "boolean"})
MAX_PROPERTY_DEPTH: Final = 16  # nested `properties` followed; deeper declarations are ignored
HTTP_WHITESPACE: Final = " \t"  # trimmed around every header value before it is read (RFC 9110 5.5)
_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_CANONICAL_BASE64: Final = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_DECIMAL: Final = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")


def header_value(raw: str) -> str | None:
    """A header's value as the client meant it: trimmed, and decoded when it is a sentinel; None for a
    sentinel whose payload is not canonical padded base64 of UTF-8 text."""
    value = raw.strip(HTTP_WHITESPACE)
    if len(value) < len(SENTINEL_PREFIX) + len(SENTINEL_SUFFIX) or not (
        value.startswith(SENTINEL_PREFIX) and value.endswith(SENTINEL_SUFFIX)
    ):
        return value
    payload = value[len(SENTINEL_PREFIX) : -len(SENTINEL_SUFFIX)]
    if _CANONICAL_BASE64.fullmatch(payload) is None:
        return None
    try:
        decoded = base64.b64decode(payload, validate=True)
        if base64.b64encode(decoded).decode("ascii") != payload:  # stray bits in the last character
            return None
        return decoded.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def request_headers(raw: Iterable[tuple[bytes, bytes]]) -> tuple[dict[str, str], str | None]:
    """An HTTP request's headers by lower-case name, and the name of the first MCP header (or Authorization,
    or Origin) that comes more than once (None when none does). A proxy in front may check one copy while
    the gateway would read another, so a request that repeats one is refused rather than read by the last
    copy."""
    headers: dict[str, str] = {}
    repeated = None
    for name_bytes, value in raw:
        name = name_bytes.decode("latin-1").lower()
        if (
            repeated is None
            and name in headers
            and (name in ONCE_HEADERS or name in SINGLE_HEADERS or name.startswith(PARAM_PREFIX_LOWER))
        ):
            repeated = name
        headers[name] = value.decode("latin-1")
    return headers, repeated


def bad_sentinel_error(header: str, sent: str) -> RpcError:
    """-32020 for a header whose base64 sentinel cannot be decoded."""
    return RpcError(
        HEADER_MISMATCH,
        f"Bad Request: the {header} header carries a malformed base64 value",
        {"header": header, "mismatch": {"header": clip(sent), "body": None}},
    )


@attrs.frozen(slots=True)
class ParamHeader:
    """One header a tool declares: its name as declared, the argument it mirrors (a path of property
    names from the root) and that argument's type."""

    name: str  # "Mcp-Param-Region"
    path: tuple[str, ...]
    kind: str  # string, integer or boolean

    @property
    def key(self) -> str:
        """The name as the app's header mapping spells it."""
        return self.name.lower()


def declared_headers(input_schema: object) -> tuple[ParamHeader, ...]:
    """The Mcp-Param headers an inputSchema declares, each name once (ignoring case; the first wins)."""
    declared: dict[str, ParamHeader] = {}
    for path, schema in _properties(input_schema):
        token, kind = schema.get(X_MCP_HEADER), schema.get("type")
        if not isinstance(token, str) or _TOKEN.fullmatch(token) is None or kind not in HEADER_TYPES:
            continue
        header = ParamHeader(PARAM_PREFIX + token, path, kind)
        declared.setdefault(header.key, header)
    return tuple(declared.values())


def _properties(schema: object) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """Every property schema reached from the root through `properties` alone, with its path."""
    pending: list[tuple[tuple[str, ...], object]] = [((), schema)]
    while pending:
        path, node = pending.pop()
        properties = node.get("properties") if isinstance(node, dict) else None
        if not isinstance(properties, dict) or len(path) >= MAX_PROPERTY_DEPTH:
            continue
        for name, child in properties.items():
            if isinstance(child, dict):
                yield (*path, name), child
                pending.append(((*path, name), child))


def param_mismatch(
    headers: Mapping[str, str], declared: tuple[ParamHeader, ...], arguments: object
) -> RpcError | None:
    """-32020 for the first declared header that disagrees with the call's arguments; None when all agree.
    `headers` has lower-case names."""
    for header in declared:
        value = _argument(arguments, header.path)
        raw = headers.get(header.key)
        rendered = _rendered(value)
        if rendered is None:  # no value a header could carry: a header claiming one cannot match
            if raw is not None:
                return header_mismatch_error(header.name, clip(raw), echoed(value))
            continue
        if raw is None:
            return header_mismatch_error(header.name, None, echoed(value))
        sent = header_value(raw)
        if sent is None:
            return bad_sentinel_error(header.name, raw)
        if not _same(header.kind, value, rendered, sent):
            return header_mismatch_error(header.name, clip(sent), echoed(value))
    return None


def _argument(arguments: object, path: tuple[str, ...]) -> object:
    node = arguments
    for name in path:
        if not isinstance(node, dict):
            return None
        node = node.get(name)
    return node


def _rendered(value: object) -> str | None:
    """A body value as a client writes it in a header: booleans as true/false, numbers in decimal, strings
    as they are; None for null and for objects and arrays, which no header carries."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return None


def _same(kind: str, value: object, rendered: str, sent: str) -> bool:
    """Whether a decoded header says what the body says; an integer argument is compared as a number
    (`42.0` says 42)."""
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "integer" and numeric and _DECIMAL.fullmatch(sent) is not None:
        return Decimal(sent) == value
    return sent == rendered


def echoed(value: object) -> object:
    """A body value as an error may echo it: strings clipped, other scalars as they are, the rest named."""
    if isinstance(value, str):
        return clip(value)
    return value if value is None or isinstance(value, bool | int | float) else f"(a JSON {json_type(value)})"


@attrs.define
class DeclaredHeaders:
    """The Mcp-Param headers of every published tool that declares some, read once per tool list."""

    _tools_version: int = -1
    _by_tool: dict[str, tuple[ParamHeader, ...]] = attrs.field(factory=dict)

    def of(self, view: CatalogView, tool: str) -> tuple[ParamHeader, ...]:
        if view.tools_version != self._tools_version:
            self._by_tool = {}
            for listed in view.tools:
                declared = declared_headers(listed.get("inputSchema"))
                if declared and isinstance(listed.get("name"), str):
                    self._by_tool[listed["name"]] = declared
            self._tools_version = view.tools_version
        return self._by_tool.get(tool, ())
