"""What an approval is bound to and what the user is shown: pure, no I/O.

An approval answers one question: may this principal, through this route, run this tool (its backend and
the backend's own name for it) with these arguments? The digest binds all of it, the arguments in their
RFC 8785 canonical form (JSON Canonicalization Scheme: sorted keys, one spelling per number and string), so
the same call asked twice has one digest and any other call another. The user is shown the backend, the
tool and a bounded summary of the arguments, with every character that could hide or reorder text written
as an escape.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Final

import attrs
import orjson
import rfc8785

DEFAULT_ROUTE: Final = "default"  # the one route today; [[routes]] will name theirs
DIGEST_VERSION: Final = "approval-v1"
MAX_SUMMARY_CHARS: Final = 600  # of the arguments as the user reads them: a summary, not a dump
MAX_CANONICAL_BYTES: Final = 8192  # arguments canonicalized by RFC 8785: at most ~3 ms of the event loop
# Controls (C0, DEL, C1), the line and paragraph separators, bidirectional overrides and isolates, zero-width
# characters and joiners, word joiners and invisible operators, the byte order mark, and tag characters:
# what could make the arguments read as something other than what they are.
HIDING: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
    "\U000e0000-\U000e007f]"
)


@attrs.frozen(slots=True)
class Need:
    """Why a call needs the user's approval: the rule that said so (an approve rule's name, or
    approve_destructive) and a few words for the question and the log."""

    rule: str
    reason: str


def canonical_arguments(arguments: object) -> bytes:
    """The arguments as RFC 8785 canonical JSON. Past MAX_CANONICAL_BYTES (the pure-Python scheme costs up to
    ~0.35 µs a byte, and a call's arguments may be megabytes), or what the scheme cannot write (an integer
    past 2**53, a value too deep for it): JSON with sorted keys under a prefix of its own, so every call
    still has one form and no such form equals a canonical one."""
    try:
        sorted_json = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer past 64 bits, a lone surrogate: the slower writer
        text = json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        return b"non-jcs:" + text.encode("utf-8", "surrogatepass")
    if len(sorted_json) <= MAX_CANONICAL_BYTES:
        try:
            return bytes(rfc8785.dumps(arguments))
        except (ValueError, TypeError, RecursionError):
            pass
    return b"non-jcs:" + sorted_json


def approval_digest(
    principal: object, backend: str, tool: str, arguments: object, route: str = DEFAULT_ROUTE
) -> str:
    """The digest an approval is bound to: principal (a token's issuer and subject, else None), route,
    backend, the backend's own tool name, canonical arguments."""
    head = orjson.dumps([DIGEST_VERSION, principal, route, backend, tool])
    digest = hashlib.sha256(head)
    digest.update(b"\n")
    digest.update(canonical_arguments(arguments))
    return digest.hexdigest()


def shown(text: str) -> str:
    """A string as the user may read it: every character that could hide or reorder text as an escape."""
    return text if HIDING.search(text) is None else HIDING.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def summary(arguments: object) -> str:
    """The arguments as the user reads them: JSON, at most MAX_SUMMARY_CHARS characters, hiding characters
    escaped; a cut one says how long it was."""
    try:
        text = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # an integer past 64 bits, a lone surrogate: the slower writer
        text = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
    whole = len(text)
    if whole > MAX_SUMMARY_CHARS:
        text = f"{text[:MAX_SUMMARY_CHARS]}... ({whole} characters in all)"
    return shown(text)


def is_destructive(tool: Mapping[str, Any]) -> bool:
    """A tool that says it may destroy: annotations with destructiveHint true and readOnlyHint not true."""
    annotations = tool.get("annotations")
    return (
        isinstance(annotations, dict)
        and annotations.get("destructiveHint") is True
        and annotations.get("readOnlyHint") is not True
    )


@attrs.define
class DestructiveTools:
    """Owns: the public names of the tools the catalog's current list marks destructive, worked out once
    per list (a new list is a new tuple), so a call pays a set look-up."""

    _tools: tuple[Mapping[str, Any], ...] | None = None
    _names: frozenset[str] = frozenset()

    def names(self, tools: tuple[Mapping[str, Any], ...]) -> frozenset[str]:
        if tools is not self._tools:
            names = (tool.get("name") for tool in tools if is_destructive(tool))
            self._names = frozenset(name for name in names if isinstance(name, str))
            self._tools = tools
        return self._names
