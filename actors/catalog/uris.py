"""Resource URIs through the gateway: the reversible prefix that keeps colliding URIs apart, and matching
a URI against a resource template (RFC 6570, the forms MCP servers use) to find its owner.

A URI is matched against a template in time linear in its length (times the template's parts): a client
chooses the URI, and a backtracking regex of a template such as `x{.a}/y` or `{a}-{b}-{c}.txt` takes
exponential or cubic time on a crafted one, and would stall every session of the gateway meanwhile.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Final

import attrs

PREFIX_SEPARATOR: Final = "+"  # "beta+file:///a": backend beta's file:///a; '+' is legal in a URI scheme
_EXPRESSION: Final = re.compile(r"\{([+#./;?&]?)([^}]*)\}")
# What each RFC 6570 operator expands to: a value may be empty, or starts with the lead character (when
# there is one) followed by characters not in the excluded set.
_EXPANSIONS: Final = {
    "": ("", "/?#"),  # simple: no reserved characters
    "+": ("", ""),  # reserved: anything
    "#": ("#", ""),
    ".": (".", "/?#"),
    "/": ("/", "?#"),
    ";": (";", "/?#"),
    "?": ("?", "#"),
    "&": ("&", "#"),
}
Part = str | tuple[str, str]  # a literal, or an expression's (lead, excluded)


def fits(template: str, uri: str) -> bool:
    """`uri` is one `template` can expand to (the shape only; values are not checked): the set of positions
    reachable in `uri` is carried through the template's parts, one pass over `uri` per part."""
    size = len(uri)
    reach = bytearray(size + 1)
    reach[0] = 1
    for part in _parts(template):
        reach = _after_literal(reach, uri, part) if isinstance(part, str) else _after_value(reach, uri, *part)
        if not any(reach):
            return False
    return bool(reach[size])


@lru_cache(maxsize=1024)
def _parts(template: str) -> tuple[Part, ...]:
    parts: list[Part] = []
    last = 0
    for match in _EXPRESSION.finditer(template):
        if match.start() > last:
            parts.append(template[last : match.start()])
        parts.append(_EXPANSIONS[match.group(1)])
        last = match.end()
    if last < len(template):
        parts.append(template[last:])
    return tuple(parts)


def _after_literal(reach: bytearray, uri: str, literal: str) -> bytearray:
    after = bytearray(len(reach))
    start = reach.find(1)
    while start >= 0:
        if uri.startswith(literal, start):
            after[start + len(literal)] = 1
        start = reach.find(1, start + 1)
    return after


def _after_value(reach: bytearray, uri: str, lead: str, excluded: str) -> bytearray:
    after = bytearray(len(reach))
    inside = False  # some value that started at a reachable position goes on up to here
    for position in range(len(reach)):
        if not lead:
            inside = inside or bool(reach[position])
        after[position] = 1 if reach[position] or inside else 0
        if position == len(uri):
            break
        char = uri[position]
        if lead:
            inside = (inside and char not in excluded) or (bool(reach[position]) and char == lead)
        else:
            inside = inside and char not in excluded
    return after


def prefixed(backend: str, uri: str) -> str:
    return f"{backend}{PREFIX_SEPARATOR}{uri}"


def assign_public_uris(
    order: Sequence[str], lists: Mapping[str, Sequence[dict[str, Any]]], key: str, always_prefix: bool
) -> dict[str, dict[str, str]]:
    """backend -> {uri (or template) -> public form}: the earliest backend in config order keeps a URI; a
    later one that lists the same URI publishes it with its name as a reversible prefix."""
    taken: set[str] = set()
    names: dict[str, dict[str, str]] = {}
    for backend in order:
        names[backend] = mine = {}
        for item in lists.get(backend, ()):
            uri = item.get(key)
            if not isinstance(uri, str) or uri in mine:
                continue
            public = prefixed(backend, uri) if always_prefix or uri in taken else uri
            taken.add(public)
            mine[uri] = public
    return names


@attrs.frozen
class TemplateRoute:
    backend: str
    prefix: str  # "" or "backend+" when the template collided
    template: str  # the backend's own form of the template

    def owns(self, uri: str) -> str | None:
        """The backend's own URI when `uri` is one this template expands to, else None."""
        if not uri.startswith(self.prefix):
            return None
        own = uri[len(self.prefix) :]
        return own if fits(self.template, own) else None
