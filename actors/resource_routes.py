"""Which backend owns a resource URI or a resource template, and the URI forms on each side.

A URI is matched against templates in time linear in its length (times the template's parts): a client
chooses the URI, and the backtracking regex of a template such as `x{.a}/y` or `{a}-{b}-{c}.txt` takes
exponential or cubic time on a crafted one, and would stall every session of the gateway meanwhile.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Final

from actors.catalog import CatalogView, Route
from actors.uris import PREFIX_SEPARATOR, TemplateRoute

_EXPRESSION: Final = re.compile(r"\{([+#./;?&]?)([^}]*)\}")  # the syntax uris.template_pattern reads
# What each RFC 6570 operator expands to, as uris.template_pattern has it: a value may be empty, or starts
# with the lead character (when there is one) followed by characters not in the excluded set.
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


def resource_route(view: CatalogView, uri: str) -> Route | None:
    """A listed URI, else the first template (config order) it fits, else an explicit `backend+` prefix."""
    route = view.resource_routes.get(uri)
    if route is not None:
        return route
    for template in view.template_routes:
        own = owned(template, uri)
        if own is not None:
            return Route(template.backend, own)
    backend, separator, own = uri.partition(PREFIX_SEPARATOR)
    return Route(backend, own) if separator and backend in view.backends else None


def owned(template: TemplateRoute, uri: str) -> str | None:
    """The backend's own URI when `uri` is one this template expands to, else None (TemplateRoute.owns,
    in linear time)."""
    if not template.template:
        return template.owns(uri)
    if not uri.startswith(template.prefix):
        return None
    own = uri[len(template.prefix) :]
    return own if fits(template.template, own) else None


def fits(template: str, uri: str) -> bool:
    """`uri` is one `template` can expand to (the shape only, as uris.template_pattern): the set of positions
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


def template_owner(view: CatalogView, published: str) -> tuple[Route | None, str]:
    """The backend whose resource template is published as `published`, and the template's own form."""
    for template in view.template_routes:
        if published.startswith(template.prefix) and template.template == published[len(template.prefix) :]:
            return Route(template.backend, template.template), template.template
    return None, published


def with_public_uri(result: dict[str, Any], own: str, public: str) -> dict[str, Any]:
    """The read result with the backend's URI replaced by the one the client asked for."""
    contents = result.get("contents")
    if not isinstance(contents, list):
        return result
    renamed = [
        {**item, "uri": public} if isinstance(item, dict) and item.get("uri") == own else item
        for item in contents
    ]
    return {**result, "contents": renamed}
