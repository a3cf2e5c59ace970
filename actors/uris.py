"""Resource URIs through the gateway: the reversible prefix that keeps colliding URIs apart, and matching
a URI against a resource template (RFC 6570, the forms MCP servers use) to find its owner."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

PREFIX_SEPARATOR: Final = "+"  # "beta+file:///a": backend beta's file:///a; '+' is legal in a URI scheme
_EXPRESSION: Final = re.compile(r"\{([+#./;?&]?)([^}]*)\}")
_OPERATOR_PATTERNS: Final = {
    "": r"[^/?#]*",  # simple: no reserved characters
    "+": r".*",  # reserved: anything, slashes included
    "#": r"(?:#.*)?",
    ".": r"(?:\.[^/?#]*)*",
    "/": r"(?:/[^/?#]*)*",
    ";": r"(?:;[^/?#]*)*",
    "?": r"(?:\?[^#]*)?",
    "&": r"(?:&[^#]*)*",
}


def template_pattern(template: str) -> re.Pattern[str]:
    """A regex that matches the URIs a template can expand to (values are not checked, only the shape)."""
    parts, last = [], 0
    for match in _EXPRESSION.finditer(template):
        parts.append(re.escape(template[last : match.start()]))
        parts.append(_OPERATOR_PATTERNS[match.group(1)])
        last = match.end()
    parts.append(re.escape(template[last:]))
    return re.compile("".join(parts), re.DOTALL)


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
    pattern: re.Pattern[str]
    template: str = ""  # the backend's own form of the template

    def owns(self, uri: str) -> str | None:
        """The backend's own URI when `uri` is one this template expands to, else None."""
        if not uri.startswith(self.prefix):
            return None
        own = uri[len(self.prefix) :]
        return own if self.pattern.fullmatch(own) else None
