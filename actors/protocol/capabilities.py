"""What a client must have declared before a server's ask may reach it.

An ask is an input request: sampling/createMessage, elicitation/create or roots/list. A modern client
declares its capabilities on every request; a server must not send it an ask they do not cover, and answers
-32021 with `requiredCapabilities` instead. The same rules hold for a legacy client's `initialize`
capabilities (2025-11-25 has the same elicitation modes and sampling.tools).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

# The top-level client capability each ask needs; required_capabilities adds the mode it needs.
INPUT_REQUEST_CAPABILITIES: Final = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}


def required_capabilities(method: str, params: object) -> dict[str, Any] | None:
    """The ClientCapabilities an input request needs (None for a method that is not one): URL elicitation
    needs elicitation.url, any other needs elicitation.form; sampling with tools or toolChoice needs
    sampling.tools."""
    ask = params if isinstance(params, dict) else {}
    if method == "elicitation/create":
        return {"elicitation": {"url": {}}} if ask.get("mode") == "url" else {"elicitation": {"form": {}}}
    if method == "sampling/createMessage":
        return {"sampling": {"tools": {}}} if "tools" in ask or "toolChoice" in ask else {"sampling": {}}
    if method == "roots/list":
        return {"roots": {}}
    return None


def missing_capability(method: str, params: object, client_capabilities: object) -> dict[str, Any] | None:
    """The `requiredCapabilities` object for -32021 when the client did not declare what the input request
    `method` (with `params`) needs; None when it did, or when `method` needs nothing. A bare
    `elicitation: {}` declares form mode (its 2025 meaning); naming any mode drops that reading."""
    required = required_capabilities(method, params)
    if required is None:
        return None
    declared = client_capabilities if isinstance(client_capabilities, dict) else {}
    missing: dict[str, Any] = {}
    for name, members in required.items():
        have = declared.get(name)
        if not isinstance(have, dict):
            missing[name] = members
            continue
        lacking = {member: {} for member in members if not (member in have or _implied(name, member, have))}
        if lacking:
            missing[name] = lacking
    return missing or None


def _implied(name: str, member: str, declared: Mapping[str, Any]) -> bool:
    return name == "elicitation" and member == "form" and "form" not in declared and "url" not in declared
