"""The naming rule (`[gateway] tool_names`): the public name of each backend's tools and prompts.

With "prefix-on-collision" a tool keeps its bare name unless a backend earlier in config order has a tool
of that name; then it is published as `{backend}__{tool}`. The rule reads config order and each backend's
last known list, which a restart does not forget, so a backend going down and coming back never renames
anybody's tools. "always-prefix" publishes every tool as `{backend}__{tool}`. Prompts follow the same rule;
resource URIs follow it with a reversible prefix of their own (uris.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import attrs
from loguru import logger

from actors.protocol.messages import Tool

PREFIX_ON_COLLISION: Final = "prefix-on-collision"
ALWAYS_PREFIX: Final = "always-prefix"
SEPARATOR: Final = "__"
MAX_NAME_LENGTH: Final = 64  # clients may refuse longer tool names
PORTABLE_NAME: Final = re.compile(r"[A-Za-z0-9_.-]+")

PublicNames = dict[str, dict[str, str]]  # backend -> {its own name (or URI) -> public name (or URI)}


@attrs.frozen(slots=True)
class Route:
    backend: str
    own: str  # the name (tool, prompt) or URI (resource, template) the backend itself uses


def assign_public(
    order: Sequence[str],
    lists: Mapping[str, Sequence[Tool]],
    key: str,
    *,
    separator: str,
    always_prefix: bool,
    hide_taken: str | None,
) -> PublicNames:
    """Backends in config order, each entry's `key` once (a nameless or repeated one is not routable): an
    entry keeps its own form unless an earlier backend took it (or `always_prefix`), else it is published
    as `{backend}{separator}{own}`. With `hide_taken` (the kind of entry, for the warning) an entry whose
    public form is taken even so is hidden."""
    taken: set[str] = set()
    names: PublicNames = {}
    for backend in order:
        names[backend] = mine = {}
        for item in lists.get(backend, ()):
            own = item.get(key)
            if not isinstance(own, str) or own in mine:
                continue
            public = own if not always_prefix and own not in taken else f"{backend}{separator}{own}"
            if hide_taken and public in taken:
                logger.bind(backend=backend).warning(
                    "{} {!r}: public name {!r} is taken; hidden", hide_taken, own, public
                )
                continue
            taken.add(public)
            mine[own] = public
    return names


def assign_public_names(
    order: Sequence[str], tool_lists: Mapping[str, Sequence[Tool]], rule: str, kind: str = "tool"
) -> PublicNames:
    """backend -> {tool name -> public name}, decided by config order over the known tool lists."""
    always_prefix = rule != PREFIX_ON_COLLISION
    return assign_public(
        order, tool_lists, "name", separator=SEPARATOR, always_prefix=always_prefix, hide_taken=kind
    )


def routes_of(backend: str, names: Mapping[str, str], originals: Mapping[str, str]) -> dict[str, Route]:
    """public name -> (backend, the backend's own name), for one backend; `originals` undoes its renames."""
    return {public: Route(backend, originals.get(own, own)) for own, public in names.items()}


def renamed(items: Iterable[Tool], names: Mapping[str, str], key: str = "name") -> tuple[Tool, ...]:
    """Entries under their public names (or URIs); every other field passes through untouched."""
    published = []
    for item in items:
        public = names.get(item.get(key))  # type: ignore[arg-type]
        if public is not None:
            published.append(item if public == item[key] else {**item, key: public})
    return tuple(published)


def portable(name: str) -> bool:
    """Every client accepts it: at most 64 characters, all in [A-Za-z0-9_.-]."""
    return len(name) <= MAX_NAME_LENGTH and PORTABLE_NAME.fullmatch(name) is not None
