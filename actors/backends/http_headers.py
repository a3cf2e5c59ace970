"""The HTTP headers of a request to a modern backend (MCP 2026-07-28, Streamable HTTP; brief §1.11).

Every POST says its version and method in headers, and its tool, prompt or resource in Mcp-Name, so that
what sits in front of the server can route without reading the body. A tool may also ask, with
`"x-mcp-header": "Region"` on a property of its inputSchema, that the argument go in `Mcp-Param-Region`.
A value that is not plain visible ASCII goes in the base64 sentinel `=?base64?...?=`.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from loguru import logger

from actors.protocol.codec import shown
from actors.protocol.eras import PROTOCOL_VERSION_KEY, request_meta

NAMED_BY: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}  # Mcp-Name's source
DECLARATION_KEY: Final = "x-mcp-header"
TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # an HTTP header name (RFC 9110 token)
PLAIN: Final = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")  # visible ASCII, no edge spaces
SENTINEL: Final = re.compile(r"=\?base64\?.*\?=", re.DOTALL)

ParamHeaders = Mapping[str, Mapping[str, str]]  # tool name -> property -> its header, without Mcp-Param-


def modern_headers(message: Mapping[str, Any], param_headers: ParamHeaders) -> dict[str, str]:
    """The standard headers of a modern request, and the Mcp-Param-* ones its tool declares."""
    params = message.get("params")
    meta = request_meta(params) or {}
    method = message.get("method")
    headers = {"mcp-protocol-version": str(meta.get(PROTOCOL_VERSION_KEY)), "mcp-method": str(method)}
    if not isinstance(params, dict):
        return headers
    name = params.get(NAMED_BY.get(str(method), ""))
    if isinstance(name, str):
        headers["mcp-name"] = header_value(name)
    arguments = params.get("arguments")
    if method == "tools/call" and isinstance(name, str) and isinstance(arguments, dict):
        for argument, header in param_headers.get(name, {}).items():
            value = param_value(arguments.get(argument))
            if value is not None:
                headers[f"mcp-param-{header}"] = value
    return headers


def param_value(value: object) -> str | None:
    """An argument as its header carries it: strings as they are (or in the sentinel), integers in
    decimal, booleans as true/false; anything else (null, absent, a number with a fraction) sends none."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return header_value(value)
    return None


def header_value(text: str) -> str:
    """Plain visible ASCII as it is; anything else, and text that looks like the sentinel, base64-wrapped."""
    if PLAIN.fullmatch(text) and not SENTINEL.fullmatch(text):
        return text
    return f"=?base64?{base64.b64encode(text.encode()).decode()}?="


def declared_param_headers(tools: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Each tool's `x-mcp-header` declarations: property -> header name. A declaration that is not an HTTP
    token, or names a header twice (ignoring case), is left out and logged."""
    declared: dict[str, dict[str, str]] = {}
    for tool in tools:
        schema = tool.get("inputSchema")
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(properties, dict):
            continue
        headers: dict[str, str] = {}
        for argument, property_schema in properties.items():
            header = property_schema.get(DECLARATION_KEY) if isinstance(property_schema, dict) else None
            if header is None:
                continue
            taken = {name.lower() for name in headers.values()}
            if not isinstance(header, str) or not TOKEN.fullmatch(header) or header.lower() in taken:
                logger.warning(
                    "tool {}: ignored {} {}", shown(tool.get("name")), DECLARATION_KEY, shown(header)
                )
                continue
            headers[argument] = header
        if headers:
            declared[tool["name"]] = headers
    return declared
