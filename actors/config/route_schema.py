"""The [[routes]] tables: what each route serves, where, and how each of its tools is shown.

```toml
[[routes]]
name = "support"
paths = ["/support"]                  # served at these paths by the WebSocket and HTTP listeners
include = ["tickets__*", "kb__*"]     # glob patterns over public names (tools, prompts, resource URIs)
exclude = ["*delete*"]
max_output_chars = 20000              # between a tool's own limit and the gateway's
stdio = false                         # true: `serve --stdio` serves this route (one route at most)

[routes.tools."tickets__search"]      # by the catalog's public name
name = "find_ticket"                  # the name this route lists and takes
description = "Find a support ticket by words in its title or body."
hide = { project = "SUP" }            # removed from the schema, set on every call, refused from a client

[routes.policy]                       # the route's own rules, over the gateway's [policy]: both must allow
default = "deny"
[[routes.policy.rules]]
when = '"support" in scopes'
```
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from actors.config.checks import every
from actors.config.oauth_schema import resource_url, scope_token
from actors.config.policy_schema import PolicyTable
from actors.discovery.settings import DiscoverySettings

MAX_ROUTES: Final = 64
MAX_PATTERNS: Final = 256  # include + exclude, per route
MAX_PATTERN_CHARS: Final = 256
MAX_OVERRIDES: Final = 1024  # tools with overrides, per route
MAX_TEXT_CHARS: Final = 16 * 1024  # a replaced title or description
NAME: Final = re.compile(r"[A-Za-z0-9_.\-]{1,64}")  # a route's name, a renamed tool's name
PATH: Final = re.compile(r"/[A-Za-z0-9_.~\-/]{0,200}")


def _no_controls(text: str) -> bool:
    return not any(ord(c) < 0x20 or ord(c) == 0x7F for c in text)


def _name(_instance: Any, attribute: Any, value: str | None) -> None:
    if value is not None and not NAME.fullmatch(value):
        raise ValueError(f"{value[:40]!r} is not a name (1 to 64 of A-Z, a-z, 0-9, _ . -)")


def _text(_instance: Any, _attribute: Any, value: str | None) -> None:
    if value is not None and (len(value) > MAX_TEXT_CHARS or not _no_controls(value.replace("\n", ""))):
        raise ValueError(f"at most {MAX_TEXT_CHARS} characters, no control characters but newlines")


def _patterns(_instance: Any, _attribute: Any, value: tuple[str, ...]) -> None:
    if len(value) > MAX_PATTERNS:
        raise ValueError(f"at most {MAX_PATTERNS} patterns")
    for pattern in value:
        if not pattern or len(pattern) > MAX_PATTERN_CHARS or not _no_controls(pattern):
            raise ValueError(
                f"{pattern[:40]!r}: a pattern is 1 to {MAX_PATTERN_CHARS} characters, no control characters"
            )
        try:
            re.compile(fnmatch.translate(pattern))
        except re.error as exc:
            raise ValueError(f"{pattern[:40]!r} is not a glob pattern: {exc}") from None


def _paths(_instance: Any, _attribute: Any, value: tuple[str, ...]) -> None:
    if len(value) > 16:
        raise ValueError("at most 16 paths")
    for path in value:
        if not PATH.fullmatch(path) or "//" in path or "/../" in f"{path}/" or "/./" in f"{path}/":
            raise ValueError(f"{path[:40]!r} is not a path (starts with /, no // . or .. segments, no query)")


def _limit(_instance: Any, _attribute: Any, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not 1_000 <= value <= 1_000_000_000):
        raise ValueError("must be from 1000 to 1000000000 characters")


def _json_table(_instance: Any, _attribute: Any, value: Mapping[str, Any]) -> None:
    if len(value) > 64:
        raise ValueError("at most 64 entries")
    for key in value:
        if not key or len(key) > 256 or not _no_controls(key):
            raise ValueError(f"{key[:40]!r} is not a key (1 to 256 characters, no control characters)")


@attrs.frozen(kw_only=True)
class ToolOverride:
    """How one tool is shown through a route: each field set replaces (annotations, meta: are merged into)
    the catalog's; `hide` fixes arguments: gone from the schema, set on every call, refused from a client."""

    name: str | None = attrs.field(default=None, validator=_name)
    title: str | None = attrs.field(default=None, validator=_text)
    description: str | None = attrs.field(default=None, validator=_text)
    annotations: Mapping[str, Any] = attrs.field(factory=dict, validator=_json_table)
    meta: Mapping[str, Any] = attrs.field(factory=dict, validator=_json_table)  # merged into _meta
    hide: Mapping[str, Any] = attrs.field(factory=dict, validator=_json_table)


@attrs.frozen(kw_only=True)
class RouteAuth:
    """[routes.auth]: the route as an OAuth protected resource of its own (RFC 9728), on listeners whose
    [NAME.auth] trusts issuers. Its metadata is served at /.well-known/oauth-protected-resource<path>."""

    # its public URL; unset: the listener's resource URL with the route's first path
    resource: str | None = attrs.field(default=None, validator=attrs.validators.optional(resource_url))
    scopes_supported: tuple[str, ...] = attrs.field(default=(), validator=every(scope_token))
    # every request through the route needs them (beside the listener's): else 403 insufficient_scope
    required_scopes: tuple[str, ...] = attrs.field(default=(), validator=every(scope_token))


@attrs.frozen(kw_only=True)
class RouteConfig:
    """One [[routes]] table."""

    name: str = attrs.field(validator=_name)
    paths: tuple[str, ...] = attrs.field(default=(), validator=_paths)
    include: tuple[str, ...] = attrs.field(default=("*",), validator=_patterns)
    exclude: tuple[str, ...] = attrs.field(default=(), validator=_patterns)
    max_output_chars: int | None = attrs.field(default=None, validator=_limit)
    discovery: DiscoverySettings | None = None  # search mode for this route's own listing
    stdio: bool = False  # the route `serve --stdio` serves
    tools: Mapping[str, ToolOverride] = attrs.field(factory=dict)
    policy: PolicyTable | None = None  # the route's own rules: a request needs the gateway's and these
    auth: RouteAuth = attrs.field(factory=RouteAuth)  # its Protected Resource Metadata, its scopes

    def shows(self, public: str) -> bool:
        """Whether a catalog name (or URI) is in this route, before any rename."""
        return any(fnmatch.fnmatchcase(public, p) for p in self.include) and not any(
            fnmatch.fnmatchcase(public, p) for p in self.exclude
        )


def route_problems(routes: Sequence[RouteConfig], listener_paths: Sequence[str]) -> list[tuple[str, str]]:
    """What a set of routes may not be, beyond each table's own checks, as (key, reason)."""
    problems: list[tuple[str, str]] = []
    if len(routes) > MAX_ROUTES:
        problems.append(("routes", f"at most {MAX_ROUTES} routes"))
    names: dict[str, int] = {}
    paths: dict[str, str] = {path: "a listener's own path" for path in listener_paths}
    stdio = [index for index, route in enumerate(routes) if route.stdio]
    for index in stdio[1:]:
        problems.append((f"routes[{index}].stdio", f"routes[{stdio[0]}] is already the stdio route"))
    for index, route in enumerate(routes):
        key = f"routes[{index}]"
        if route.name in names:
            problems.append((f"{key}.name", f"{route.name!r} is routes[{names[route.name]}]'s name too"))
        names.setdefault(route.name, index)
        for path in route.paths:
            if path in paths:
                problems.append((f"{key}.paths", f"{path} is already {paths[path]}"))
            paths.setdefault(path, f"route {route.name!r}'s")
        if not route.paths and not route.stdio:
            problems.append((f"{key}.paths", "a route needs a path (or stdio = true) to be served at"))
        if len(route.tools) > MAX_OVERRIDES:
            problems.append((f"{key}.tools", f"at most {MAX_OVERRIDES} tools with overrides"))
        problems += _rename_problems(key, route)
    return problems


def _rename_problems(key: str, route: RouteConfig) -> list[tuple[str, str]]:
    """Two tools renamed to one name, or a rename onto a name another override keeps: load errors (a rename
    onto a catalog name is known only once backends list; the view then hides the other, and logs it)."""
    problems: list[tuple[str, str]] = []
    taken: dict[str, str] = {}
    for public, override in route.tools.items():
        shown = override.name or public
        if shown in taken:
            problems.append(
                (f"{key}.tools.{public}.name", f"{shown!r} is also the name of {taken[shown]!r} here")
            )
        taken.setdefault(shown, public)
    return problems
