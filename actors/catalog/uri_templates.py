"""Matching a URI against a resource template (RFC 6570, the forms MCP servers use), to find its owner.

A URI is matched in time linear in its length (times the template's parts): a client chooses the URI, and
a backtracking regex of a template such as `x{.a}/y` or `{a}-{b}-{c}.txt` takes exponential or cubic time
on a crafted one, and would stall every session of the gateway meanwhile.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

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
